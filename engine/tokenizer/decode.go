package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// DecodeOptions say how tokens become text.
type DecodeOptions struct {
	// Special writes control tokens ("<|eot_id|>", "<s>") as their text;
	// without it they decode to nothing.
	Special bool
	// Keep are control tokens written as their text even without Special:
	// the markers a chat's tool-call parser reads ("[TOOL_CALLS]").
	Keep []string
}

// Decode is the text of ids. Bytes that do not form valid UTF-8 become
// U+FFFD as the reference decoder replaces them: one for each byte for a
// SentencePiece vocabulary (sentencepiece's decode) and Gemma 4's (Hugging
// Face's ByteFallback decoder), one for each maximal invalid subsequence
// for a byte-level BPE one (Rust's from_utf8_lossy, which Hugging Face
// tokenizers use). An id outside the vocabulary is an error.
func (t *Tokenizer) Decode(ids []int32, opts DecodeOptions) (string, error) {
	d := t.NewDecoder(opts)
	var sb strings.Builder
	for _, id := range ids {
		s, err := d.Next(id)
		if err != nil {
			return "", err
		}
		sb.WriteString(s)
	}
	sb.WriteString(d.Flush())
	return sb.String(), nil
}

// Decoder turns a stream of tokens into text as they arrive, holding back
// the bytes of a character that spans tokens until it is complete, so that
// every string it returns is valid UTF-8 and the concatenation of its
// strings is Decode of the whole stream.
type Decoder struct {
	t       *Tokenizer
	opts    DecodeOptions
	pending []byte // the start of a character that the next token may finish
	started bool   // past the start of the text, where leading spaces are stripped
}

// NewDecoder starts a stream.
func (t *Tokenizer) NewDecoder(opts DecodeOptions) *Decoder {
	return &Decoder{t: t, opts: opts}
}

// Next adds token id and returns the text it completes, possibly "".
func (d *Decoder) Next(id int32) (string, error) {
	if id < 0 || int(id) >= len(d.t.pieces) {
		return "", fmt.Errorf("tokenizer: token id %d is outside the vocabulary of %d tokens", id, len(d.t.pieces))
	}
	piece := d.t.pieces[id]
	typ := d.t.typeOf(id)
	if typ == Control && !d.opts.Special && !slices.Contains(d.opts.Keep, string(piece)) {
		// sentencepiece decodes a run of byte tokens as a unit, and an
		// invisible control token ends the run.
		if d.t.spm != nil {
			return d.Flush(), nil
		}
		return "", nil
	}
	if !d.started {
		// sentencepiece drops the space its prefix added from the first
		// piece that writes text (not a byte or <unk>), and with
		// remove_extra_whitespaces the leading space of every piece until
		// one writes something.
		consumed := false
		if d.t.stripLeadingSpace && len(piece) > 0 && piece[0] == ' ' && typ != Byte && typ != Unknown {
			piece, consumed = piece[1:], true
		}
		d.started = len(piece) > 0 || (consumed && !d.t.vocab.RemoveExtraWhitespaces)
	}
	d.pending = append(d.pending, piece...)
	n := completePrefix(d.pending)
	out := lossy(d.pending[:n], d.t.perByte)
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out, nil
}

// Flush ends the stream: a character still incomplete is U+FFFD.
func (d *Decoder) Flush() string {
	out := lossy(d.pending, d.t.perByte)
	d.pending = d.pending[:0]
	return out
}

// completePrefix is the length of b without a trailing character that is
// incomplete but could still be completed by more bytes.
func completePrefix(b []byte) int {
	// A UTF-8 character is at most 4 bytes, so only the last 3 can be the
	// start of an unfinished one.
	for back := 1; back <= 3 && back <= len(b); back++ {
		i := len(b) - back
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if need := seqLen(b[i]); need > back && validSoFar(b[i:]) {
			return i
		}
		break
	}
	return len(b)
}

// seqLen is the length of the UTF-8 sequence lead byte c starts, 1 for a
// byte that cannot start one.
func seqLen(c byte) int {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2
	case c >= 0xE0 && c <= 0xEF:
		return 3
	case c >= 0xF0 && c <= 0xF4:
		return 4
	}
	return 1
}

// validSoFar reports whether b (shorter than its lead byte's sequence) is a
// prefix of some valid UTF-8 character.
func validSoFar(b []byte) bool {
	return maximalSubpart(b) == len(b)
}

// maximalSubpart is the number of bytes at the start of b that belong to
// one character: the whole character if it is valid, otherwise the longest
// prefix of a valid sequence (at least 1), which Unicode's "maximal subpart"
// rule replaces by one U+FFFD.
func maximalSubpart(b []byte) int {
	c := b[0]
	need := seqLen(c)
	if need == 1 {
		return 1
	}
	lo, hi := byte(0x80), byte(0xBF)
	switch c {
	case 0xE0:
		lo = 0xA0
	case 0xED:
		hi = 0x9F
	case 0xF0:
		lo = 0x90
	case 0xF4:
		hi = 0x8F
	}
	n := 1
	for ; n < need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// lossy is b as a string with each maximal invalid subsequence replaced by
// U+FFFD, or each invalid byte if perByte.
func lossy(b []byte, perByte bool) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			sb.WriteRune(utf8.RuneError)
			if perByte {
				b = b[1:]
			} else {
				b = b[maximalSubpart(b):]
			}
			continue
		}
		sb.WriteRune(r)
		b = b[n:]
	}
	return sb.String()
}
