package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/sample"
)

// Session is one conversation's state on a runner: the tokens whose keys and
// values the runner's cache holds. A new request whose prompt extends those
// tokens (the next chat turn) only evaluates what is new.
type Session struct {
	r      Runner
	slot   int      // the runner's cache this session's tokens go to
	via    *Batcher // nil: the session calls the runner itself
	cached []int32
	// images are the images among the cached tokens, by position.
	images []cachedImage
}

// cachedImage is an image whose rows the cache holds at pos .. pos+n-1.
type cachedImage struct {
	pos, n int
	key    string
}

// NewSession starts a session with an empty cache on r's slot 0. One slot
// serves one session at a time: another session's Generate overwrites the
// cache, and the first one, when it generates again, sees that the slot
// served someone else and evaluates its whole prompt again.
func NewSession(r Runner) *Session { return &Session{r: r} }

// Slot is the runner's cache the session uses.
func (s *Session) Slot() int { return s.slot }

// forward evaluates tokens from pos on the session's slot, through the
// batcher when it has one.
func (s *Session) forward(tokens []int32, pos int, out Output) (Result, error) {
	if s.via != nil {
		return s.via.forward(s.slot, tokens, nil, pos, out)
	}
	return s.r.ForwardSlot(s.slot, tokens, pos, out)
}

// forwardEmbeds evaluates embedding rows from pos on the session's slot
// (Runner.ForwardEmbeds), through the batcher when it has one.
func (s *Session) forwardEmbeds(rows []float32, pos int, out Output) (Result, error) {
	if s.via != nil {
		return s.via.forward(s.slot, nil, rows, pos, out)
	}
	return s.r.ForwardEmbeds(s.slot, rows, pos, out)
}

// Runner is the runner the session evaluates on.
func (s *Session) Runner() Runner { return s.r }

// Cached is the number of tokens the cache holds for this session.
func (s *Session) Cached() int { return len(s.cached) }

// Reuse is how many leading tokens of prompt, with its images, the
// session's slot still holds for it: what a Generate of prompt would not
// evaluate again. An image before that point needs no embeddings. Call it
// while the session is not generating.
func (s *Session) Reuse(prompt []int32, images []Image) int {
	if s.r.owner(s.slot) != s {
		return 0
	}
	return s.reuse(prompt, images)
}

// reuse is how many leading tokens of prompt the cache holds: the common
// prefix of the tokens, cut at the first image that differs (another key,
// or an image on one side only); an image is held whole or not at all.
func (s *Session) reuse(prompt []int32, images []Image) int {
	p := commonPrefix(s.cached, prompt)
	held := func(pos, n int, key string) bool {
		for _, c := range s.images {
			if c.pos == pos {
				return c.n == n && c.key == key
			}
		}
		return false
	}
	for _, im := range images {
		if im.Pos < p && (!held(im.Pos, im.Len, im.Key) || im.Pos+im.Len > p) {
			p = im.Pos
		}
	}
	for _, c := range s.images {
		if c.pos < p && !slices.ContainsFunc(images, func(im Image) bool { return im.Pos == c.pos && im.Len == c.n && im.Key == c.key }) {
			p = c.pos
		}
	}
	return p
}

// keep cuts the cache's record to its first n tokens.
func (s *Session) keep(n int) {
	s.cached = s.cached[:n]
	s.images = slices.DeleteFunc(s.images, func(c cachedImage) bool { return c.pos+c.n > n })
}

// Reset forgets the cache's contents.
func (s *Session) Reset() { s.keep(0) }

// Hidden evaluates tokens from position 0 and returns each one's final
// hidden state (Output.Hidden: Hidden floats a token), what an embedding
// pools. The cache then holds these tokens. More tokens than the context
// holds is an error.
func (s *Session) Hidden(tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("model: no tokens to embed")
	}
	if n := s.r.Context(); len(tokens) > n {
		return nil, fmt.Errorf("%w: %d tokens to embed, context %d", ErrContextFull, len(tokens), n)
	}
	s.r.setOwner(s.slot, s)
	s.keep(0)
	res, err := s.forward(tokens, 0, Output{Hidden: true})
	if err != nil {
		return nil, err
	}
	s.cached = append(s.cached, tokens...)
	return res.Hidden, nil
}

// Overflow says what Generate does when prompt and reply outgrow the context.
type Overflow int

const (
	// OverflowRefuse refuses a prompt that does not fit, and stops the reply
	// when the context is full.
	OverflowRefuse Overflow = iota
	// OverflowShift drops the oldest tokens after the first Keep, keeping
	// the most recent half of the context, and evaluates what remains again.
	OverflowShift
)

// Request is one generation.
type Request struct {
	// Prompt is the whole token sequence to continue (for a chat, the
	// rendered conversation so far).
	Prompt []int32
	// MaxTokens bounds the reply; 0 means until a stop or the context's end.
	MaxTokens int
	Sampling  sample.Options
	// StopIDs end the reply when sampled (EOS, end-of-turn); the stop token
	// itself is not emitted as text.
	StopIDs []int32
	// StopStrings end the reply when its text contains one; the text from
	// the stop string on is not emitted.
	StopStrings []string
	Overflow    Overflow
	// Keep is how many leading tokens (the system prompt) a shift keeps.
	Keep int
	// Decoder turns tokens into text (a tokenizer.Decoder); nil emits no
	// text. Its Flush is called when the reply ends.
	Decoder Decoder
	// Progress, when set, is told how many of the prompt's new tokens are
	// evaluated: the prompt then goes through in chunks of PrefillChunk,
	// between which a cancellation is seen, so a long prompt can be shown
	// and stopped.
	Progress func(done, total int)
	// Constraint, when set, limits each step's tokens (structured output):
	// the whole vocabulary's logits come back to the host for it.
	Constraint Constraint
	// Images are runs of the prompt's positions that take embedding rows
	// instead of their tokens' embeddings, in order of position and
	// apart. A prompt with images is not shifted: with OverflowShift, it
	// is refused when it does not fit, and its reply stops at the
	// context's end.
	Images []Image
}

// Image is a run of a prompt's positions filled by embedding rows: an
// image's tokens, as its vision tower projects them.
type Image struct {
	// Pos is the image's first position in the prompt, and Len its
	// positions; the prompt holds placeholder tokens there (the model's
	// image token), which only the cache's bookkeeping reads.
	Pos, Len int
	// Key identifies the rows (the image's content and the projector): a
	// cache that holds an image of the same Key at Pos is reused.
	Key string
	// Embeds are Len rows of the model's Hidden floats. They may be nil
	// when Session.Reuse says the cache holds the image; a Generate that
	// must evaluate it then fails.
	Embeds []float32
}

// checkImages validates a request's images against its prompt.
func checkImages(images []Image, prompt int) error {
	end := 0
	for i, im := range images {
		switch {
		case im.Len <= 0:
			return fmt.Errorf("model: image %d has %d positions", i, im.Len)
		case im.Pos < end || im.Pos+im.Len > prompt:
			return fmt.Errorf("model: image %d at positions %d..%d overlaps another or leaves the %d-token prompt", i, im.Pos, im.Pos+im.Len-1, prompt)
		case im.Pos+im.Len == prompt:
			return fmt.Errorf("model: image %d ends the prompt: a reply follows text (the turn's end and the reply's start)", i)
		}
		end = im.Pos + im.Len
	}
	return nil
}

// Constraint limits the tokens a generation may sample, as a grammar does
// (engine/structured's JSON schemas).
type Constraint interface {
	// Limit sets to -Inf the logit of every token but the keep best that
	// may come next (keep <= 0: every one that may); an error when none may.
	Limit(logits []float32, keep int) error
	// Accept moves past the sampled token.
	Accept(id int32) error
}

// PrefillChunk is the most prompt tokens evaluated between two progress
// reports: llama.cpp's default batch, so a GPU runner's chains are as full
// as without reports.
const PrefillChunk = 512

// Decoder is a streaming detokenizer, as tokenizer.Decoder is: Next
// returns the text a token completes, Flush what is still held back.
type Decoder interface {
	Next(id int32) (string, error)
	Flush() string
}

// Token is one generated token.
type Token struct {
	ID int32
	// Text is what this token adds to the reply: the decoder may hold back
	// bytes of an unfinished UTF-8 character or of a possible stop string,
	// and release them with a later token.
	Text string
	// Elapsed is the time since the previous token (since the prompt was
	// submitted, for the first one).
	Elapsed time.Duration
}

// Stats summarise a generation.
type Stats struct {
	PromptTokens int           // tokens in the request's prompt
	CachedTokens int           // of those, how many the cache already held
	Generated    int           // tokens sampled (including a final stop token)
	Prefill      time.Duration // evaluating the prompt up to the first token
	Decode       time.Duration // the rest
	Stop         string        // "stop" (a stop token or string), "length" (MaxTokens or context), "canceled"
}

// PrefillRate and DecodeRate are tokens per second.
func (s Stats) PrefillRate() float64 { return rate(s.PromptTokens-s.CachedTokens, s.Prefill) }
func (s Stats) DecodeRate() float64  { return rate(s.Generated-1, s.Decode) }

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ErrContextFull is returned when a prompt does not fit the context under
// OverflowRefuse.
var ErrContextFull = errors.New("model: prompt does not fit the context")

// ErrEmbeddingModel is returned when an embedding model (Config.Bidirectional)
// is asked to write text or to continue a cache.
var ErrEmbeddingModel = errors.New("an embedding model, which writes no text")

// Generate continues req.Prompt, calling emit with each token as it is
// sampled, until a stop token or string, MaxTokens, the context's end, ctx's
// cancellation (checked between tokens; Stats.Stop is "canceled" and the
// error nil), or an error from emit.
func (s *Session) Generate(ctx context.Context, req Request, emit func(Token) error) (st Stats, err error) {
	st.PromptTokens = len(req.Prompt)
	if len(req.Prompt) == 0 {
		return st, fmt.Errorf("model: empty prompt: give at least one token (the BOS token for an unconditioned start)")
	}
	sampler, err := sample.New(req.Sampling)
	if err != nil {
		return st, err
	}
	if err := checkImages(req.Images, len(req.Prompt)); err != nil {
		return st, err
	}
	n := s.r.Context()
	if len(req.Prompt) >= n {
		if len(req.Images) > 0 {
			return st, fmt.Errorf("%w: %d tokens with %d images, context %d (a prompt with images is not shifted: choose a bigger context)", ErrContextFull, len(req.Prompt), len(req.Images), n)
		}
		if req.Overflow != OverflowShift {
			return st, fmt.Errorf("%w: %d tokens, context %d (choose a bigger context, or the shift overflow policy)", ErrContextFull, len(req.Prompt), n)
		}
		if n < 2 {
			return st, fmt.Errorf("%w: a %d-token context cannot be shifted", ErrContextFull, n)
		}
	}
	if s.r.owner(s.slot) != s {
		// Another session used the slot since: its cache holds their
		// tokens, not ours.
		s.keep(0)
		s.r.setOwner(s.slot, s)
	}
	history := append([]int32(nil), req.Prompt...)
	if len(history) >= n {
		history = shifted(history, n, req.Keep)
	}

	k := req.Sampling.CandidateCount(ops.MaxTopK)
	exact := req.Sampling.Temperature > 0 && req.Sampling.TopK == 0
	// out is what the next Forward returns: the top-k candidates with the
	// penalties applied on the GPU, or, when top-k is off or the penalty
	// list outgrows the GPU's (a repeat window beyond MaxPenaltyTokens
	// distinct tokens), every logit for the host's sampler.
	out := func() Output {
		if exact || req.Constraint != nil {
			return Output{}
		}
		o := Output{TopK: k}
		if ids, counts := sampler.Penalties(history); len(ids) > MaxPenaltyTokens {
			return Output{}
		} else if len(ids) > 0 {
			o.Penalty = &Penalty{IDs: ids, Counts: counts, Repeat: req.Sampling.RepeatPenalty,
				Frequency: req.Sampling.FrequencyPenalty, Presence: req.Sampling.PresencePenalty}
		}
		return o
	}
	pick := func(res Result) (int32, error) {
		if c := req.Constraint; c != nil {
			keep := req.Sampling.TopK
			if req.Sampling.Temperature == 0 {
				keep = 1
			}
			if err := c.Limit(res.Logits, keep); err != nil {
				return -1, err
			}
			id := sampler.Sample(res.Logits, history)
			return id, c.Accept(id)
		}
		if res.Logits != nil {
			return sampler.Sample(res.Logits, history), nil
		}
		return sampler.SampleCandidates(res.IDs, res.Values), nil
	}
	forward := func(tokens []int32, pos int) (Result, error) {
		s.keep(min(pos, len(s.cached)))
		res, err := s.forward(tokens, pos, out())
		if err != nil {
			s.keep(0)
			return res, err
		}
		s.cached = append(s.cached, tokens...)
		return res, nil
	}
	// image evaluates one image's rows; the cache then holds its
	// placeholder tokens and its key.
	image := func(im Image) (Result, error) {
		if len(im.Embeds) == 0 {
			return Result{}, fmt.Errorf("model: the image at positions %d..%d is not in the cache and came without its embeddings", im.Pos, im.Pos+im.Len-1)
		}
		if c := s.r.Model(); c != nil && len(im.Embeds) != im.Len*c.Config.Hidden {
			return Result{}, fmt.Errorf("model: the image at position %d has %d floats for %d rows of %d", im.Pos, len(im.Embeds), im.Len, c.Config.Hidden)
		}
		s.keep(min(im.Pos, len(s.cached)))
		res, err := s.forwardEmbeds(im.Embeds, im.Pos, out())
		if err != nil {
			s.keep(0)
			return res, err
		}
		s.cached = append(s.cached, history[im.Pos:im.Pos+im.Len]...)
		s.images = append(s.images, cachedImage{pos: im.Pos, n: im.Len, key: im.Key})
		return res, nil
	}

	// Prefill: evaluate what the cache does not hold yet; at least the last
	// prompt token, whose logits give the first reply token. The prompt
	// goes in runs of text (chunks of PrefillChunk with progress) and
	// images (one batch each).
	start := time.Now()
	reuse := s.reuse(history, req.Images)
	if reuse == len(history) {
		reuse--
	}
	st.CachedTokens = min(reuse, len(req.Prompt))
	var res Result
	chunk := len(history)
	if req.Progress != nil {
		chunk = PrefillChunk
	}
	total := len(history) - reuse
	if req.Progress != nil {
		req.Progress(0, total)
	}
	next := 0 // the first image not yet passed
	for lo := reuse; lo < len(history); {
		for next < len(req.Images) && req.Images[next].Pos+req.Images[next].Len <= lo {
			next++
		}
		var hi int
		if next < len(req.Images) && req.Images[next].Pos <= lo {
			im := req.Images[next]
			if res, err = image(im); err != nil {
				return st, err
			}
			hi = im.Pos + im.Len
		} else {
			hi = min(lo+chunk, len(history))
			if next < len(req.Images) {
				hi = min(hi, req.Images[next].Pos)
			}
			if res, err = forward(history[lo:hi], lo); err != nil {
				return st, err
			}
		}
		if req.Progress != nil {
			req.Progress(hi-reuse, total)
		}
		if hi < len(history) && ctx.Err() != nil {
			st.Prefill = time.Since(start)
			st.Stop = "canceled"
			return st, nil
		}
		lo = hi
	}
	st.Prefill = time.Since(start)

	text := newStopFilter(req.StopStrings)
	last := time.Now()
	decodeStart := last
	defer func() { st.Decode = time.Since(decodeStart) }()
	// end finishes the reply: the text still held back is emitted, except
	// after a stop string, which drops it.
	end := func(why string, drop bool) error {
		st.Stop = why
		rest := ""
		if req.Decoder != nil {
			rest = req.Decoder.Flush()
		}
		if drop {
			return nil
		}
		if rest, _ = text.push(rest); rest+text.pending != "" {
			return emit(Token{ID: -1, Text: rest + text.flush()})
		}
		return nil
	}
	for {
		id, err := pick(res)
		if err != nil {
			return st, fmt.Errorf("model: %w", err)
		}
		if id < 0 {
			return st, fmt.Errorf("model: the sampler found no candidate token")
		}
		st.Generated++
		history = append(history, id)
		tok := Token{ID: id, Elapsed: time.Since(last)}
		last = time.Now()
		stopID := slices.Contains(req.StopIDs, id)
		hit := false
		if !stopID && req.Decoder != nil {
			piece, _ := req.Decoder.Next(id)
			tok.Text, hit = text.push(piece)
		}
		if err := emit(tok); err != nil {
			return st, err
		}
		switch {
		case stopID || hit:
			return st, end("stop", hit)
		case req.MaxTokens > 0 && st.Generated >= req.MaxTokens:
			return st, end("length", false)
		case ctx.Err() != nil:
			return st, end("canceled", false)
		}
		if len(s.cached) >= n {
			if req.Overflow != OverflowShift || len(req.Images) > 0 {
				return st, end("length", false)
			}
			history = shifted(history, n, req.Keep)
			keep := commonPrefix(s.cached, history) // the kept prefix is still in the cache
			if res, err = forward(history[keep:], keep); err != nil {
				return st, err
			}
			continue
		}
		if res, err = forward([]int32{id}, len(s.cached)); err != nil {
			return st, err
		}
	}
}

// shifted keeps the first keep tokens (at most half the context, less one)
// and the most recent ones after them, up to half of the n-token context,
// the newest token always among them.
func shifted(history []int32, n, keep int) []int32 {
	keep = max(0, min(keep, n/2-1))
	tail := min(len(history), max(1, n/2-keep))
	out := append([]int32(nil), history[:keep]...)
	return append(out, history[len(history)-tail:]...)
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// stopFilter holds back text that could be the start of a stop string, so
// a stop string is never half emitted.
type stopFilter struct {
	stops   []string
	pending string
}

func newStopFilter(stops []string) *stopFilter {
	var s []string
	for _, x := range stops {
		if x != "" {
			s = append(s, x)
		}
	}
	return &stopFilter{stops: s}
}

// push adds a token's text and returns what may be emitted; hit reports a
// stop string, in which case the text before it is returned and the rest
// dropped.
func (f *stopFilter) push(text string) (emit string, hit bool) {
	f.pending += text
	first := -1
	for _, s := range f.stops {
		if i := strings.Index(f.pending, s); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		emit, f.pending = f.pending[:first], ""
		return emit, true
	}
	hold := 0
	for _, s := range f.stops {
		for l := min(len(s)-1, len(f.pending)); l > hold; l-- {
			if strings.HasSuffix(f.pending, s[:l]) {
				hold = l
				break
			}
		}
	}
	emit, f.pending = f.pending[:len(f.pending)-hold], f.pending[len(f.pending)-hold:]
	return emit, false
}

func (f *stopFilter) flush() string {
	s := f.pending
	f.pending = ""
	return s
}

// Event is one message of Stream: a token, or the end with its stats or
// error.
type Event struct {
	Token *Token
	Stats *Stats
	Err   error
}

// Stream runs Generate on the calling goroutine's behalf in a new goroutine
// and delivers its tokens on the returned channel, then one final Event with
// Stats (and Err if it failed), then closes it. Cancel ctx to stop early; the
// channel must be drained. The runner must not be used by anything else
// until the channel closes.
func (s *Session) Stream(ctx context.Context, req Request) <-chan Event {
	ch := make(chan Event, 16)
	go func() {
		defer close(ch)
		st, err := s.Generate(ctx, req, func(t Token) error {
			select {
			case ch <- Event{Token: &t}:
				return nil
			case <-ctx.Done():
				return nil // Generate sees the cancellation after this token
			}
		})
		ch <- Event{Stats: &st, Err: err}
	}()
	return ch
}
