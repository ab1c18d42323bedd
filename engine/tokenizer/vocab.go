package tokenizer

import (
	"fmt"
	"strings"

	"github.com/hearthstudio/hearth/gguf"
)

// The GGUF metadata keys a tokenizer is read from and written to, as
// llama.cpp's converter writes them (gguf-py's constants). "seperator" is
// misspelt in the format itself.
const (
	KeyModel          = "tokenizer.ggml.model"
	KeyPre            = "tokenizer.ggml.pre"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyScores         = "tokenizer.ggml.scores"
	KeyTokenType      = "tokenizer.ggml.token_type"
	KeyMerges         = "tokenizer.ggml.merges"
	KeyBOS            = "tokenizer.ggml.bos_token_id"
	KeyEOS            = "tokenizer.ggml.eos_token_id"
	KeyEOT            = "tokenizer.ggml.eot_token_id"
	KeyEOM            = "tokenizer.ggml.eom_token_id"
	KeyUNK            = "tokenizer.ggml.unknown_token_id"
	KeySEP            = "tokenizer.ggml.seperator_token_id"
	KeyPAD            = "tokenizer.ggml.padding_token_id"
	KeyMASK           = "tokenizer.ggml.mask_token_id"
	KeyAddBOS         = "tokenizer.ggml.add_bos_token"
	KeyAddEOS         = "tokenizer.ggml.add_eos_token"
	KeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
	KeyRemoveExtraWS  = "tokenizer.ggml.remove_extra_whitespaces"
	KeyChatTemplate   = "tokenizer.chat_template"
)

// The tokenizer.ggml.model values this package implements.
const (
	ModelSPM    = "llama"  // SentencePiece BPE with byte fallback: Llama 1/2, Mistral, Gemma 1–3
	ModelBPE    = "gpt2"   // byte-level BPE: GPT-2, Llama 3, Qwen, Mistral Tekken, …
	ModelGemma4 = "gemma4" // BPE by merge rank over "▁"-escaped UTF-8, with byte fallback: Gemma 4
)

// TokenType is a token's tokenizer.ggml.token_type: the SentencePiece piece
// types, which llama.cpp uses for every vocabulary.
type TokenType int32

// The token types. A zero type (a file without token_type) counts as Normal.
const (
	Normal      TokenType = 1
	Unknown     TokenType = 2
	Control     TokenType = 3 // <s>, <|eot_id|>: never produced from plain text
	UserDefined TokenType = 4 // always matched whole in text, even without special parsing
	Unused      TokenType = 5
	Byte        TokenType = 6 // <0x0A>: SentencePiece byte fallback
)

// String is the type's name as hearth tokenize --json prints it.
func (t TokenType) String() string {
	switch t {
	case 0, Normal:
		return "normal"
	case Unknown:
		return "unknown"
	case Control:
		return "control"
	case UserDefined:
		return "user-defined"
	case Unused:
		return "unused"
	case Byte:
		return "byte"
	}
	return fmt.Sprintf("type(%d)", int32(t))
}

// None marks a special token a vocabulary does not have.
const None int32 = -1

// Vocab is a tokenizer as GGUF metadata describes it: the arrays and flags
// under tokenizer.ggml.*. It is plain data; New checks it and builds the
// lookup tables of a Tokenizer.
type Vocab struct {
	Model  string      // tokenizer.ggml.model: ModelSPM, ModelBPE or ModelGemma4
	Pre    string      // tokenizer.ggml.pre, the pre-tokenizer of a byte-level BPE vocabulary; "" is "default"
	Tokens []string    // token texts by id
	Scores []float32   // SentencePiece merge scores by id; may be nil for BPE
	Types  []TokenType // by id; nil means every token is Normal
	Merges []string    // BPE merges, "left right", highest priority first

	// Special token ids, None where the file has none.
	BOS, EOS, EOT, EOM, UNK, SEP, PAD, MASK int32

	AddBOS, AddEOS bool // put BOS/EOS around an encoding that asks for special tokens
	// AddSpacePrefix is SentencePiece's add_dummy_prefix: "▁" before the text.
	AddSpacePrefix bool
	// RemoveExtraWhitespaces is SentencePiece's normalizer flag: strip leading
	// and trailing spaces, collapse runs of spaces to one.
	RemoveExtraWhitespaces bool
}

// NewVocab returns a Vocab of the given model with no special tokens and
// llama.cpp's defaults for the model's flags: a SentencePiece vocabulary adds
// BOS and a space prefix, a byte-level BPE one adds neither, and Gemma 4's
// adds BOS.
func NewVocab(model string) *Vocab {
	v := &Vocab{Model: model, BOS: None, EOS: None, EOT: None, EOM: None, UNK: None, SEP: None, PAD: None, MASK: None}
	switch model {
	case ModelSPM:
		v.AddBOS = true
		v.AddSpacePrefix = true
	case ModelGemma4:
		v.AddBOS = true
	}
	return v
}

// specialKey is the metadata key of one special token id of a Vocab.
type specialKey struct {
	key string
	id  *int32
}

// specials are v's special token ids with their keys, in the order they are
// written.
func (v *Vocab) specials() []specialKey {
	return []specialKey{
		{KeyBOS, &v.BOS}, {KeyEOS, &v.EOS}, {KeyEOT, &v.EOT}, {KeyEOM, &v.EOM},
		{KeyUNK, &v.UNK}, {KeySEP, &v.SEP}, {KeyPAD, &v.PAD}, {KeyMASK, &v.MASK},
	}
}

// TypeOf is the type of token id; Normal where Types is nil.
func (v *Vocab) TypeOf(id int) TokenType {
	if v.Types == nil || v.Types[id] == 0 {
		return Normal
	}
	return v.Types[id]
}

// VocabFromGGUF reads the tokenizer.ggml.* metadata of f. A key that is
// present with the wrong type is an error naming the key; optional keys that
// are missing take llama.cpp's defaults (NewVocab).
func VocabFromGGUF(f *gguf.File) (*Vocab, error) {
	model, err := f.String(KeyModel)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	v := NewVocab(model)
	if model == ModelSPM {
		v.AddSpacePrefix = spmSpacePrefix(f.Architecture())
	}
	if v.Pre, err = f.StringOr(KeyPre, ""); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if spec, ok := preSpecFor(v.Pre); ok && model == ModelBPE {
		v.AddBOS = spec.addBOS
	}
	if v.Tokens, err = f.Strings(KeyTokens); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if _, ok := f.Value(KeyScores); ok {
		if v.Scores, err = f.Float32s(KeyScores); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	if _, ok := f.Value(KeyTokenType); ok {
		types, err := f.Int32s(KeyTokenType)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		v.Types = make([]TokenType, len(types))
		for i, t := range types {
			v.Types[i] = TokenType(t)
		}
	}
	if _, ok := f.Value(KeyMerges); ok {
		if v.Merges, err = f.Strings(KeyMerges); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	for _, s := range v.specials() {
		if _, ok := f.Value(s.key); !ok {
			continue
		}
		// The converter writes ids as UINT32; -1 (no token) never appears, but
		// a signed type is accepted too.
		id, err := f.Int64(s.key)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		if id < -1 || id >= int64(len(v.Tokens)) {
			return nil, fmt.Errorf("tokenizer: %s = %d is outside the vocabulary of %d tokens", s.key, id, len(v.Tokens))
		}
		*s.id = int32(id)
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{
		{KeyAddBOS, &v.AddBOS}, {KeyAddEOS, &v.AddEOS},
		{KeyAddSpacePrefix, &v.AddSpacePrefix}, {KeyRemoveExtraWS, &v.RemoveExtraWhitespaces},
	} {
		if *b.dst, err = f.BoolOr(b.key, *b.dst); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	if model == ModelGemma4 {
		// llama.cpp adds BOS to every Gemma 4 prompt whatever the file
		// says (its PR 21500): transformers saves Gemma 4's tokenizer with
		// add_bos_token false, and files converted from it say false,
		// but the model was trained with <bos> first.
		v.AddBOS = true
	}
	if err := v.check(); err != nil {
		return nil, err
	}
	return v, nil
}

// spmSpacePrefix is add_space_prefix for a SentencePiece vocabulary whose
// file does not say: the add_dummy_prefix of the model family's own
// tokenizer.model. GGUF keeps no normalizer, so the architecture decides.
// Gemma's models (every generation) have it off and its tokenizer puts no
// "▁" before the first word; llama.cpp's converter writes false for them,
// but Ollama's writes no key, and llama.cpp's default of true would make the
// first token of every Gemma prompt wrong. Llama 1/2, Mistral and Phi-3's
// models have it on, which is llama.cpp's default for "llama" vocabularies.
func spmSpacePrefix(arch string) bool {
	return !strings.HasPrefix(arch, "gemma")
}

// check validates the lengths and ids of v.
func (v *Vocab) check() error {
	n := len(v.Tokens)
	if n == 0 {
		return fmt.Errorf("tokenizer: %s is empty", KeyTokens)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return fmt.Errorf("tokenizer: %s has %d entries for %d tokens", KeyScores, len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return fmt.Errorf("tokenizer: %s has %d entries for %d tokens", KeyTokenType, len(v.Types), n)
	}
	for _, s := range v.specials() {
		if *s.id < None || int(*s.id) >= n {
			return fmt.Errorf("tokenizer: %s = %d is outside the vocabulary of %d tokens", s.key, *s.id, n)
		}
	}
	return nil
}

// WriteGGUF sets v's tokenizer.ggml.* keys on w, with the types llama.cpp's
// converter uses (ids as UINT32, token types as INT32). Special ids that are
// None and empty optional arrays are left out.
func (v *Vocab) WriteGGUF(w *gguf.Writer) error {
	if err := v.check(); err != nil {
		return err
	}
	set := func(err error) error {
		if err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		return nil
	}
	if err := set(w.SetString(KeyModel, v.Model)); err != nil {
		return err
	}
	if v.Pre != "" {
		if err := set(w.SetString(KeyPre, v.Pre)); err != nil {
			return err
		}
	}
	if err := set(w.SetStrings(KeyTokens, v.Tokens)); err != nil {
		return err
	}
	if v.Scores != nil {
		if err := set(w.SetFloat32s(KeyScores, v.Scores)); err != nil {
			return err
		}
	}
	if v.Types != nil {
		types := make([]int32, len(v.Types))
		for i, t := range v.Types {
			types[i] = int32(t)
		}
		if err := set(w.SetInt32s(KeyTokenType, types)); err != nil {
			return err
		}
	}
	if len(v.Merges) > 0 {
		if err := set(w.SetStrings(KeyMerges, v.Merges)); err != nil {
			return err
		}
	}
	for _, s := range v.specials() {
		if *s.id == None {
			continue
		}
		if err := set(w.SetUint32(s.key, uint32(*s.id))); err != nil {
			return err
		}
	}
	if err := set(w.SetBool(KeyAddBOS, v.AddBOS)); err != nil {
		return err
	}
	if err := set(w.SetBool(KeyAddEOS, v.AddEOS)); err != nil {
		return err
	}
	// llama.cpp's converter writes add_space_prefix (false) for Gemma 4
	// too, though no "▁" is ever put in front of its text.
	if v.Model == ModelSPM || v.Model == ModelGemma4 {
		if err := set(w.SetBool(KeyAddSpacePrefix, v.AddSpacePrefix)); err != nil {
			return err
		}
	}
	if v.Model == ModelSPM {
		if err := set(w.SetBool(KeyRemoveExtraWS, v.RemoveExtraWhitespaces)); err != nil {
			return err
		}
	}
	return nil
}
