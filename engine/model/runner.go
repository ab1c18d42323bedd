package model

import "fmt"

// Runner evaluates a model over KV caches of a fixed context: the GPU
// forward pass (GPU) or the CPU reference (CPU). It holds Slots caches, one
// per sequence it serves at once (parallel requests); Forward uses slot 0.
// A Runner is not safe for concurrent use; the engine goroutine owns it.
type Runner interface {
	// Forward runs tokens at positions pos, pos+1, ... over the cache, whose
	// positions below pos must hold this sequence's earlier keys and values
	// (positions from pos on are overwritten), and returns what out asks for.
	// It is ForwardSlot(0, ...).
	Forward(tokens []int32, pos int, out Output) (Result, error)
	// ForwardSlot is Forward over slot's cache.
	ForwardSlot(slot int, tokens []int32, pos int, out Output) (Result, error)
	// ForwardEmbeds is ForwardSlot for rows given as embeddings, Hidden
	// floats each, which enter the first block as they are (no embedding
	// scale) and, on the layers Config.ImageBatch names, see each other
	// past the causal mask (ops.AttentionArgs.Batch): an image's tokens, as
	// its vision tower projects them. They run as one batch. Per-layer
	// embeddings (Gemma 4) look up token 0 for them, as transformers looks
	// up the pad token and llama.cpp row 0; a model with AltUp (Gemma 3n)
	// or that embeds bidirectionally refuses them.
	ForwardEmbeds(slot int, rows []float32, pos int, out Output) (Result, error)
	// Decode runs one token of each of several sequences, each in its own
	// slot (no slot twice), as one batch: the weights are read once for
	// all of them. Each step's Result holds its logits (Output{}); the
	// sampler applies penalties and top-k on the host.
	Decode(steps []Step) ([]Result, error)
	// Slots is the number of sequences the runner holds caches for.
	Slots() int
	// SetAdapters replaces the LoRA adapters applied from the next Forward
	// on, each with its own scale (none: the base model alone), without
	// reloading the base. The caches' contents were computed with the old
	// ones, so a Session evaluates its prompt again. The pairs are read, not
	// copied: do not modify them while the runner holds them.
	SetAdapters(loras []LoRA) error
	// Context is the number of positions each slot's cache holds.
	Context() int
	// Model is the model the runner evaluates.
	Model() *Model
	// Close frees the runner's memory (GPU buffers, the cache). Close
	// runners before their Model: they read its memory-mapped file.
	Close()

	// owner and setOwner track the Session whose tokens a slot's cache
	// holds; forget drops every slot's.
	owner(slot int) *Session
	setOwner(slot int, s *Session)
	forget()
}

// Step is one sequence's next token in a Decode: Token at position Pos of
// Slot's cache, whose positions below Pos hold the sequence's history.
type Step struct {
	Slot  int
	Token int32
	Pos   int
}

// ownership implements Runner's owner bookkeeping and Slots for the
// runners here.
type ownership struct{ slots []*Session }

func newOwnership(slots int) ownership             { return ownership{slots: make([]*Session, slots)} }
func (o *ownership) Slots() int                    { return len(o.slots) }
func (o *ownership) owner(slot int) *Session       { return o.slots[slot] }
func (o *ownership) setOwner(slot int, s *Session) { o.slots[slot] = s }
func (o *ownership) forget()                       { clear(o.slots) }

// checkSlot validates a slot number against the runner's.
func checkSlot(r Runner, slot int) error {
	if slot < 0 || slot >= r.Slots() {
		return fmt.Errorf("model: slot %d is outside the runner's %d", slot, r.Slots())
	}
	return nil
}

// checkDecode validates a Decode's steps: known, distinct slots, tokens in
// the vocabulary, positions inside the context.
func checkDecode(r Runner, steps []Step) error {
	if len(steps) == 0 {
		return fmt.Errorf("model: a decode of no sequences")
	}
	seen := make(map[int]bool, len(steps))
	for _, s := range steps {
		if err := checkSlot(r, s.Slot); err != nil {
			return err
		}
		if seen[s.Slot] {
			return fmt.Errorf("model: slot %d decodes twice in one step", s.Slot)
		}
		seen[s.Slot] = true
		if err := checkForward(r.Model(), r.Context(), []int32{s.Token}, s.Pos, Output{}); err != nil {
			return fmt.Errorf("%w (slot %d)", err, s.Slot)
		}
	}
	return nil
}

// Output says what a Forward returns.
type Output struct {
	// All asks for the logits of every token, not just the last.
	All bool
	// TopK > 0 returns only the TopK largest logits of the last token, with
	// their ids, largest first (1 is the argmax), after Penalty; 0 returns
	// the logits themselves.
	TopK int
	// Penalty, when not nil, is applied to the last token's logits first.
	Penalty *Penalty
	// Hidden returns every token's final hidden state, norm(x) before the
	// LM head, instead of logits: what an embedding pools.
	Hidden bool
}

// Penalty lowers the logits of tokens already seen: repeat (llama.cpp's:
// positive logits divided by Repeat, negative ones multiplied), then
// frequency and presence (OpenAI's: minus Count*Frequency, minus Presence).
// IDs are unique, Counts their occurrences.
type Penalty struct {
	IDs                         []uint32
	Counts                      []uint32
	Repeat, Frequency, Presence float32
}

// Result is a Forward's answer.
type Result struct {
	// Logits are Vocab floats per returned row: one row, or one per token
	// with Output.All. Empty when TopK > 0.
	Logits []float32
	// IDs and Values are the top-k candidates when Output.TopK > 0. With
	// TopK 1 the GPU returns the argmax id alone and Values holds NaN.
	IDs    []uint32
	Values []float32
	// Hidden is Hidden floats per token with Output.Hidden.
	Hidden []float32
}

// checkEmbeds validates a ForwardEmbeds call and returns its row count.
func checkEmbeds(r Runner, slot int, rows []float32, pos int, out Output) (int, error) {
	c := &r.Model().Config
	if err := checkSlot(r, slot); err != nil {
		return 0, err
	}
	switch {
	case len(rows) == 0 || len(rows)%c.Hidden != 0:
		return 0, fmt.Errorf("model: %d floats of embeddings are no whole number of %d-wide rows", len(rows), c.Hidden)
	case c.AltUp > 0:
		return 0, fmt.Errorf("model: %s takes no embedding rows: its AltUp streams are built from token embeddings", c.Arch)
	case c.Bidirectional:
		return 0, fmt.Errorf("model: %s is %w: it takes tokens, not embedding rows", c.Arch, ErrEmbeddingModel)
	}
	n := len(rows) / c.Hidden
	if pos < 0 || pos > r.Context()-n {
		return 0, fmt.Errorf("model: positions %d..%d do not fit the %d-token context", pos, pos+n-1, r.Context())
	}
	// The token checks are the Forward's, on stand-in ids.
	if err := checkForward(r.Model(), r.Context(), make([]int32, n), pos, out); err != nil {
		return 0, err
	}
	return n, nil
}

// checkForward validates a Forward call against the model and the cache.
func checkForward(m *Model, ctx int, tokens []int32, pos int, out Output) error {
	if len(tokens) == 0 {
		return fmt.Errorf("model: no tokens to evaluate (empty prompt)")
	}
	if m.Config.Bidirectional && (pos != 0 || !out.Hidden) {
		// Every token's state depends on the tokens after it: there is no
		// next token to predict, nor a cache to continue.
		return fmt.Errorf("model: %s is %w: its attention sees the whole input, so it embeds one input from position 0", m.Config.Arch, ErrEmbeddingModel)
	}
	if pos < 0 || pos > ctx-len(tokens) {
		return fmt.Errorf("model: positions %d..%d do not fit the %d-token context", pos, pos+len(tokens)-1, ctx)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.Config.Vocab {
			return fmt.Errorf("model: token %d at index %d is outside the vocabulary of %d", t, i, m.Config.Vocab)
		}
	}
	if out.TopK < 0 || out.TopK > m.Config.Vocab {
		return fmt.Errorf("model: top-k %d must be within the vocabulary of %d", out.TopK, m.Config.Vocab)
	}
	if out.All && (out.TopK > 0 || out.Penalty != nil) {
		return fmt.Errorf("model: all-position logits come without top-k or penalties")
	}
	if p := out.Penalty; p != nil {
		if len(p.IDs) != len(p.Counts) {
			return fmt.Errorf("model: penalty has %d ids but %d counts", len(p.IDs), len(p.Counts))
		}
		for _, id := range p.IDs {
			if int(id) >= m.Config.Vocab {
				return fmt.Errorf("model: penalty token %d is outside the vocabulary of %d", id, m.Config.Vocab)
			}
		}
	}
	return nil
}
