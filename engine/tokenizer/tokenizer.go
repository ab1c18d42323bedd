package tokenizer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hearthstudio/hearth/gguf"
)

// Tokenizer turns text into token ids and back for one vocabulary. It is
// immutable after New, so one Tokenizer may serve any number of goroutines.
type Tokenizer struct {
	vocab *Vocab
	toID  map[string]int32
	spm   *spmModel
	bpe   *bpeModel

	// userDefined finds the user-defined tokens, which are matched whole
	// in any text; special finds those and the control tokens, matched only
	// when the caller parses special tokens.
	userDefined, special *specialMatcher

	// retyped are the tokens whose type llama.cpp changes when it loads a
	// gemma4 vocabulary (gemma4Retyped); nil for the others.
	retyped map[int32]TokenType

	pieces            [][]byte // what each token decodes to
	stripLeadingSpace bool
	// perByte: invalid UTF-8 in decoded text is one U+FFFD per byte, as
	// sentencepiece and Hugging Face's ByteFallback decoder write it, not
	// one per maximal invalid subsequence (byte-level BPE's from_utf8_lossy).
	perByte bool
}

// New builds a Tokenizer from v, which it keeps and must not be modified
// afterwards.
func New(v *Vocab) (*Tokenizer, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	t := &Tokenizer{vocab: v, toID: make(map[string]int32, len(v.Tokens))}
	for id, text := range v.Tokens {
		// The last of duplicate texts wins, as in llama.cpp's token_to_id.
		t.toID[text] = int32(id)
	}
	if v.Model == ModelGemma4 {
		t.retyped = gemma4Retyped(v, t.toID)
	}
	var ud, sp []specialToken
	for id, text := range v.Tokens {
		if text == "" {
			continue
		}
		switch t.typeOf(int32(id)) {
		case UserDefined:
			ud = append(ud, specialToken{text, int32(id)})
			sp = append(sp, specialToken{text, int32(id)})
		case Control:
			sp = append(sp, specialToken{text, int32(id)})
		}
	}
	t.userDefined = newSpecialMatcher(ud)
	t.special = newSpecialMatcher(sp)

	t.pieces = make([][]byte, len(v.Tokens))
	switch v.Model {
	case ModelSPM:
		m, err := newSPMModel(v)
		if err != nil {
			return nil, err
		}
		t.spm = m
		t.stripLeadingSpace = v.AddSpacePrefix || v.RemoveExtraWhitespaces
		t.perByte = true
		for id, text := range v.Tokens {
			switch v.TypeOf(id) {
			case Byte:
				b, _ := parseByteToken(text)
				t.pieces[id] = []byte{b}
			case Unknown:
				// sentencepiece's unk_surface.
				t.pieces[id] = []byte(" \u2047 ")
			default:
				t.pieces[id] = []byte(strings.ReplaceAll(text, spaceMarker, " "))
			}
		}
	case ModelBPE:
		bl := newByteLevel()
		m, err := newBPEModel(v, t.toID, bl)
		if err != nil {
			return nil, err
		}
		t.bpe = m
		for id, text := range v.Tokens {
			switch v.TypeOf(id) {
			case Control, UserDefined:
				// Added tokens are stored as their text, not byte-level.
				t.pieces[id] = []byte(text)
			default:
				t.pieces[id] = bl.decode(text)
			}
		}
	case ModelGemma4:
		m, err := newGemma4Model(v, t.toID)
		if err != nil {
			return nil, err
		}
		t.bpe = m
		if err := gemma4Pieces(t.pieces, v.Tokens, t.typeOf); err != nil {
			return nil, err
		}
		t.perByte = true
	default:
		return nil, fmt.Errorf("tokenizer: %s = %q: unsupported tokenizer model (want %q, %q or %q)", KeyModel, v.Model, ModelSPM, ModelBPE, ModelGemma4)
	}
	return t, nil
}

// FromGGUF builds the tokenizer of a GGUF file from its metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	return New(v)
}

// Vocab is the vocabulary t was built from. It must not be modified.
func (t *Tokenizer) Vocab() *Vocab { return t.vocab }

// Size is the number of tokens.
func (t *Tokenizer) Size() int { return len(t.vocab.Tokens) }

// Token is the text of token id as the vocabulary stores it ("▁the", "Ġthe",
// "<|eot_id|>"), or "" for an id out of range.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.vocab.Tokens) {
		return ""
	}
	return t.vocab.Tokens[id]
}

// Piece is the bytes token id writes in the middle of a text, as the
// decoder emits them ("the" with its space, one byte for a byte token);
// nil for a control token, which writes nothing, and for an id out of
// range. The slice must not be modified.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) || t.typeOf(id) == Control {
		return nil
	}
	return t.pieces[id]
}

// Type is the type of token id as the tokenizer treats it: the
// vocabulary's, except where llama.cpp changes it on loading (a gemma4
// vocabulary's end-of-generation tokens are control); 0 for an id out of
// range.
func (t *Tokenizer) Type(id int32) TokenType {
	if id < 0 || int(id) >= len(t.vocab.Tokens) {
		return 0
	}
	return t.typeOf(id)
}

// typeOf is Type of an id in range.
func (t *Tokenizer) typeOf(id int32) TokenType {
	if typ, ok := t.retyped[id]; ok {
		return typ
	}
	return t.vocab.TypeOf(int(id))
}

// ID is the token whose stored text is exactly text.
func (t *Tokenizer) ID(text string) (int32, bool) {
	id, ok := t.toID[text]
	return id, ok
}

// BOS is the beginning-of-sequence token, None if the vocabulary has none.
func (t *Tokenizer) BOS() int32 { return t.vocab.BOS }

// EOS is the end-of-sequence token, None if the vocabulary has none.
func (t *Tokenizer) EOS() int32 { return t.vocab.EOS }

// EOT is the end-of-turn token (tokenizer.ggml.eot_token_id), None if the
// file names none.
func (t *Tokenizer) EOT() int32 { return t.vocab.EOT }

// EncodeOptions say what Encode may add to and read from the text.
type EncodeOptions struct {
	// AddSpecial puts BOS in front and EOS behind where the vocabulary asks
	// for them (add_bos_token, add_eos_token).
	AddSpecial bool
	// ParseSpecial reads control tokens written in the text ("<|eot_id|>",
	// "<start_of_turn>") as those tokens. Without it they are plain text,
	// which is what text from a user must be. User-defined tokens are
	// matched either way, as the reference tokenizers do.
	ParseSpecial bool
}

// Encode is the token ids of text. Text need not be valid UTF-8; an invalid
// byte is read as U+FFFD.
//
// The result is the reference tokenizer's. For a byte-level BPE vocabulary
// that is Hugging Face tokenizers' encode (add_special_tokens off), which
// reads special tokens in the text as ParseSpecial does, and with
// encode_special_tokens on when ParseSpecial is off. For Gemma 4's it is
// llama.cpp's: special tokens cut the text as for byte-level BPE, and each
// piece of text merges line by line. For a SentencePiece
// vocabulary, without ParseSpecial it is sentencepiece's encode: user-defined
// symbols are found in the normalized text and the space prefix goes in
// front of the whole text only. With ParseSpecial, special tokens cut the
// text first and each piece is encoded alone, with a space prefix (if the
// vocabulary has one) before each piece that starts the text or follows a
// special token, as llama.cpp does and Hugging Face's legacy Llama
// tokenizer.
func (t *Tokenizer) Encode(text string, opts EncodeOptions) []int32 {
	ids := make([]int32, 0, len(text)/3+2)
	if opts.AddSpecial && t.vocab.AddBOS && t.vocab.BOS != None {
		ids = append(ids, t.vocab.BOS)
	}
	switch {
	case t.spm != nil && !opts.ParseSpecial:
		ids = t.spm.encode(t.spm.normalize(text, t.spm.addSpacePrefix), t.userDefined, ids)
	case t.spm != nil:
		afterSpecial := true
		t.special.split(text, func(s string, id int32) {
			if id != None {
				ids = append(ids, id)
				afterSpecial = true
				return
			}
			ids = t.spm.encode(t.spm.normalize(s, t.spm.addSpacePrefix && afterSpecial), nil, ids)
			afterSpecial = false
		})
	default:
		m := t.userDefined
		if opts.ParseSpecial {
			m = t.special
		}
		m.split(text, func(s string, id int32) {
			if id != None {
				ids = append(ids, id)
				return
			}
			ids = t.bpe.encode(s, ids)
		})
	}
	if opts.AddSpecial && t.vocab.AddEOS && t.vocab.EOS != None {
		ids = append(ids, t.vocab.EOS)
	}
	return ids
}

// specialToken is a token matched whole in text.
type specialToken struct {
	text string
	id   int32
}

// specialMatcher finds special tokens in text, leftmost first and the
// longest of those that start at the same place, as Hugging Face's added
// vocabulary does.
type specialMatcher struct {
	first  [256]bool
	byByte [256][]specialToken // by first byte, longest first
}

func newSpecialMatcher(toks []specialToken) *specialMatcher {
	m := &specialMatcher{}
	for _, tk := range toks {
		b := tk.text[0]
		m.first[b] = true
		m.byByte[b] = append(m.byByte[b], tk)
	}
	for i := range m.byByte {
		sort.SliceStable(m.byByte[i], func(a, b int) bool {
			return len(m.byByte[i][a].text) > len(m.byByte[i][b].text)
		})
	}
	return m
}

// at is the token that starts at s[i] and its length, or 0.
func (m *specialMatcher) at(s string, i int) (int32, int) {
	if !m.first[s[i]] {
		return None, 0
	}
	for _, tk := range m.byByte[s[i]] {
		if strings.HasPrefix(s[i:], tk.text) {
			return tk.id, len(tk.text)
		}
	}
	return None, 0
}

// split calls fn for each run of plain text (id None) and each special
// token (its id, s its text) in s, in order.
func (m *specialMatcher) split(s string, fn func(s string, id int32)) {
	start := 0
	for i := 0; i < len(s); i++ {
		id, n := m.at(s, i)
		if n == 0 {
			continue
		}
		if i > start {
			fn(s[start:i], None)
		}
		fn(s[i:i+n], id)
		start = i + n
		i += n - 1
	}
	if start < len(s) {
		fn(s[start:], None)
	}
}
