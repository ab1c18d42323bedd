package data

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// Sample is one training example before packing.
type Sample struct {
	// Line is the source line in a JSONL file; for a .txt file, the
	// piece's number from 1.
	Line int
	// Tokens are the ids the model reads and Targets, of the same length,
	// the id it should predict at each position, -1 where there is no
	// loss. Targets[i] is Tokens[i+1] where that token is trained.
	Tokens, Targets []int32
}

// Trained is the number of positions with a loss.
func (s *Sample) Trained() int { return trained(s.Targets) }

func trained(targets []int32) int {
	n := 0
	for _, t := range targets {
		if t >= 0 {
			n++
		}
	}
	return n
}

// builder makes samples from records with one model's tokenizer and chat
// format.
type builder struct {
	tok    *tokenizer.Tokenizer
	format *chat.Format
	vars   map[string]any

	chats       int // conversations rendered
	resegmented int // samples tokenized segment by segment
	perTurn     int // conversations split into one sample per assistant turn
}

// span is a trained range of a text, in bytes.
type span struct{ start, end int }

// samples makes the samples of one record: one, or one per assistant turn
// (see doc.go). A record with nothing to train on gives none.
func (b *builder) samples(rec record) ([]Sample, error) {
	switch rec.kind {
	case kindText:
		if rec.text == "" {
			return nil, nil
		}
		toks := b.withEOS(b.encodeText(rec.text))
		return []Sample{sampleOf(rec.line, toks, allTrue(len(toks)))}, nil
	case kindPromptCompletion:
		text := rec.prompt + rec.completion
		toks, isTrained := b.encodeSpans(text, []span{{len(rec.prompt), len(text)}}, b.encodeText, false)
		n := len(toks)
		toks = b.withEOS(toks)
		if len(toks) > n {
			isTrained = append(isTrained, true)
		}
		return []Sample{sampleOf(rec.line, toks, isTrained)}, nil
	}
	return b.chatSamples(rec)
}

// chatSamples renders a conversation and marks what its assistant turns add
// (see doc.go, "Assistant-only loss").
func (b *builder) chatSamples(rec record) ([]Sample, error) {
	if b.format == nil {
		return nil, errors.New("a conversation, and no chat format was given")
	}
	var turns []int
	for i, t := range rec.train {
		if t {
			turns = append(turns, i)
		}
	}
	if len(turns) == 0 {
		return nil, nil
	}
	b.chats++
	full, err := b.render(rec, len(rec.msgs), false)
	if err != nil {
		return nil, err
	}
	// before[k] and through[k] are the renders up to assistant turn k,
	// without it (and with the generation prompt) and with it.
	before := make([]string, len(turns))
	through := make([]string, len(turns))
	prefix := true
	for k, i := range turns {
		if before[k], err = b.render(rec, i, true); err != nil {
			return nil, err
		}
		if through[k], err = b.render(rec, i+1, false); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(through[k], before[k]) {
			return nil, fmt.Errorf("message %d: the chat template's generation prompt is not where its render of the assistant message starts (%q vs %q), so the assistant's tokens cannot be found",
				i, tail(before[k]), tail(through[k][:min(len(through[k]), len(before[k]))]))
		}
		if !strings.HasPrefix(full, through[k]) || (k > 0 && len(before[k]) < len(through[k-1])) {
			prefix = false
		}
	}
	if prefix {
		spans := make([]span, len(turns))
		for k := range turns {
			spans[k] = span{len(before[k]), len(through[k])}
		}
		// What follows the last assistant turn has no loss.
		text := full[:len(through[len(turns)-1])]
		toks, isTrained := b.encodeSpans(text, spans, b.format.Tokenize, true)
		return []Sample{chatSample(rec.line, toks, isTrained)}, nil
	}
	b.perTurn++
	out := make([]Sample, 0, len(turns))
	for k := range turns {
		toks, isTrained := b.encodeSpans(through[k], []span{{len(before[k]), len(through[k])}}, b.format.Tokenize, true)
		out = append(out, chatSample(rec.line, toks, isTrained))
	}
	return out, nil
}

// chatSample is a conversation's sample, cut after its last trained token:
// what the template writes after the last end of turn (ChatML's newline)
// would have no loss.
func chatSample(line int, toks []int32, isTrained []bool) Sample {
	n := len(toks)
	for n > 0 && !isTrained[n-1] {
		n--
	}
	return sampleOf(line, toks[:n:n], isTrained[:n])
}

// render renders the first n messages of a conversation with the model's
// template. If the model's template fails on it, Format.Render falls back
// to a built-in one; a model's fine-tune must be rendered as the model will
// be prompted, so that is an error here.
func (b *builder) render(rec record, n int, addGenerationPrompt bool) (string, error) {
	p, err := b.format.Render(chat.Request{
		Messages:            rec.msgs[:n],
		Tools:               rec.tools,
		AddGenerationPrompt: addGenerationPrompt,
		Vars:                b.vars,
	})
	if err != nil {
		return "", err
	}
	if b.format.Template != nil && p.Template != b.format.Template.Name() {
		return "", errors.New(p.Notice)
	}
	return p.Text, nil
}

// encodeSpans tokenizes text, whose first tokens encodeFirst makes (BOS
// included), and marks the tokens of spans as trained; with stopAtEOT, a
// span's tokens after its first stop token are not.
//
// Each span boundary is placed by tokenizing the text before it: if those
// tokens are a prefix of the whole text's, the boundary is a token edge.
// If a token crosses a boundary instead, the text is tokenized segment by
// segment, as inference sees it: the prompt encoded alone, then what the
// model writes (a SentencePiece vocabulary with a space prefix gives each
// segment that starts with text one, as it does after a special token).
func (b *builder) encodeSpans(text string, spans []span, encodeFirst func(string) []int32, stopAtEOT bool) ([]int32, []bool) {
	var cuts []int
	for _, s := range spans {
		cuts = append(cuts, s.start, s.end)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)

	toks := encodeFirst(text)
	at := make(map[int]int, len(cuts)) // byte offset → token index
	for _, c := range cuts {
		if c == len(text) {
			at[c] = len(toks)
			continue
		}
		p := encodeFirst(text[:c])
		if len(p) > len(toks) || !slices.Equal(p, toks[:len(p)]) {
			at = nil
			break
		}
		at[c] = len(p)
	}
	if at == nil {
		b.resegmented++
		at = make(map[int]int, len(cuts))
		toks = encodeFirst(text[:cuts[0]])
		at[cuts[0]] = len(toks)
		for i := 1; i < len(cuts); i++ {
			toks = append(toks, b.tok.Encode(text[cuts[i-1]:cuts[i]], tokenizer.EncodeOptions{ParseSpecial: true})...)
			at[cuts[i]] = len(toks)
		}
		if last := cuts[len(cuts)-1]; last < len(text) {
			toks = append(toks, b.tok.Encode(text[last:], tokenizer.EncodeOptions{ParseSpecial: true})...)
		}
	}
	isTrained := make([]bool, len(toks))
	for _, s := range spans {
		for i := at[s.start]; i < at[s.end]; i++ {
			isTrained[i] = true
			if stopAtEOT && b.format != nil && b.format.IsStop(toks[i]) {
				break
			}
		}
	}
	return toks, isTrained
}

// encodeText encodes a text as Hugging Face's tokenizer(text) does: BOS
// where the vocabulary adds one, and special tokens written in the text
// read as those tokens.
func (b *builder) encodeText(text string) []int32 {
	var ids []int32
	if v := b.tok.Vocab(); v.AddBOS && v.BOS != tokenizer.None {
		ids = append(ids, v.BOS)
	}
	return append(ids, b.tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: true})...)
}

// withEOS appends EOS unless toks already end with it, so that the model
// learns to stop.
func (b *builder) withEOS(toks []int32) []int32 {
	eos := b.tok.EOS()
	if eos == tokenizer.None || (len(toks) > 0 && toks[len(toks)-1] == eos) {
		return toks
	}
	return append(toks, eos)
}

// sampleOf makes the targets of toks: position i predicts toks[i+1] where
// that token is trained. The last position predicts nothing, so a packed
// sample never learns its neighbour's first token.
func sampleOf(line int, toks []int32, isTrained []bool) Sample {
	targets := make([]int32, len(toks))
	for i := range targets {
		targets[i] = -1
		if i+1 < len(toks) && isTrained[i+1] {
			targets[i] = toks[i+1]
		}
	}
	return Sample{Line: line, Tokens: toks, Targets: targets}
}

func allTrue(n int) []bool {
	v := make([]bool, n)
	for i := range v {
		v[i] = true
	}
	return v
}

// tail is the end of a render, for an error message.
func tail(s string) string {
	if len(s) > 40 {
		return "…" + s[len(s)-40:]
	}
	return s
}

// textPieces cuts the tokens of a whole text (BOS, the text, EOS) into
// samples of seqLen positions; each piece's last position predicts the
// next piece's first token, so no token goes unpredicted.
func textPieces(toks []int32, seqLen int) []Sample {
	var out []Sample
	for start := 0; start < len(toks)-1; start += seqLen {
		end := min(start+seqLen, len(toks))
		s := Sample{Line: len(out) + 1, Tokens: toks[start:end:end], Targets: make([]int32, end-start)}
		for i := range s.Targets {
			s.Targets[i] = -1
			if start+i+1 < len(toks) {
				s.Targets[i] = toks[start+i+1]
			}
		}
		out = append(out, s)
	}
	return out
}
