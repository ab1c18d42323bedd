package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file converts the tokenizer files models ship with into a Vocab, the
// way llama.cpp's convert_hf_to_gguf.py does, so that a model imported from
// Hugging Face (and this package's tests) get the same GGUF metadata a
// llama.cpp conversion would.

// FromSentencePiece reads a SentencePiece model (tokenizer.model, a
// ModelProto in protobuf wire format) into a Vocab of model "llama": the
// pieces, their scores and types as they are (user-defined symbols stay
// user-defined, which the converter takes from the added tokens of
// tokenizer_config.json that list them), the special ids and the
// normalizer's add_dummy_prefix and remove_extra_whitespaces. Only BPE
// models are accepted; a Unigram model is llama.cpp's "t5" vocabulary,
// which this package does not implement.
func FromSentencePiece(data []byte) (*Vocab, error) {
	v := NewVocab(ModelSPM)
	v.Types = []TokenType{}
	v.Scores = []float32{}
	modelType := int64(1) // TrainerSpec.model_type: UNIGRAM = 1, BPE = 2
	bosID, eosID, unkID, padID := int64(1), int64(2), int64(0), int64(-1)
	// The normalizer defaults of sentencepiece's proto.
	v.AddSpacePrefix, v.RemoveExtraWhitespaces = true, true

	err := protoFields(data, func(num protowire.Number, typ protowire.Type, b []byte, _ uint64) error {
		switch num {
		case 1: // repeated SentencePiece pieces
			piece, score, ptype := "", float32(0), int64(Normal)
			err := protoFields(b, func(num protowire.Number, typ protowire.Type, b []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					piece = string(b)
				case num == 2 && typ == protowire.Fixed32Type:
					score = math.Float32frombits(uint32(x))
				case num == 3 && typ == protowire.VarintType:
					ptype = int64(x)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("piece %d: %w", len(v.Tokens), err)
			}
			v.Tokens = append(v.Tokens, piece)
			v.Scores = append(v.Scores, score)
			v.Types = append(v.Types, TokenType(ptype))
		case 2: // TrainerSpec
			return protoFields(b, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if typ != protowire.VarintType {
					return nil
				}
				switch num {
				case 3:
					modelType = int64(x)
				case 40:
					unkID = int64(int32(x))
				case 41:
					bosID = int64(int32(x))
				case 42:
					eosID = int64(int32(x))
				case 43:
					padID = int64(int32(x))
				}
				return nil
			})
		case 3: // NormalizerSpec
			// The rule set's name and charsmap (fields 1, 2) are not kept:
			// GGUF has no key for them and llama.cpp tokenizes every
			// "llama" vocabulary as identity-normalized.
			return protoFields(b, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				switch {
				case num == 3 && typ == protowire.VarintType:
					v.AddSpacePrefix = x != 0
				case num == 4 && typ == protowire.VarintType:
					v.RemoveExtraWhitespaces = x != 0
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: sentencepiece model: %w", err)
	}
	if modelType != 2 {
		return nil, fmt.Errorf("tokenizer: sentencepiece model: model_type %d is not BPE (2)", modelType)
	}
	n := int64(len(v.Tokens))
	for _, s := range []struct {
		id  int64
		dst *int32
	}{{bosID, &v.BOS}, {eosID, &v.EOS}, {unkID, &v.UNK}, {padID, &v.PAD}} {
		if s.id >= 0 && s.id < n {
			*s.dst = int32(s.id)
		}
	}
	if err := v.check(); err != nil {
		return nil, err
	}
	return v, nil
}

// protoFields calls fn with each field of a protobuf message: its number,
// wire type, and the bytes (length-delimited) or the integer (varint,
// fixed32, fixed64) it holds. Groups are skipped.
func protoFields(b []byte, fn func(num protowire.Number, typ protowire.Type, b []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var (
			data []byte
			x    uint64
		)
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			x = uint64(v)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, data, x); err != nil {
			return err
		}
	}
	return nil
}

// hfTokenizer is the part of a Hugging Face tokenizer.json a BPE vocabulary
// needs.
type hfTokenizer struct {
	Model struct {
		Type         string           `json:"type"`
		Vocab        map[string]int32 `json:"vocab"`
		Merges       json.RawMessage  `json:"merges"`
		ByteFallback bool             `json:"byte_fallback"`
	} `json:"model"`
	AddedTokens []hfAddedToken `json:"added_tokens"`
}

type hfAddedToken struct {
	ID      int32  `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

// readHFBPE parses a tokenizer.json whose model is a BPE.
func readHFBPE(data []byte) (*hfTokenizer, error) {
	var hf hfTokenizer
	if err := json.Unmarshal(data, &hf); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	if hf.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model type %q is not BPE", hf.Model.Type)
	}
	return &hf, nil
}

// fill sets v's tokens, types and merges from hf as llama.cpp's converter
// writes them: the model's vocabulary by id with the added tokens over it,
// each of the type typ gives (added is nil for a token of the model's
// vocabulary alone), and an id without a token "[PAD<id>]" of type unused;
// the merges "left right", where in the newer pair form a space inside a
// token becomes U+0120 ("Ġ"), as gguf-py's SpecialVocab writes them.
func (hf *hfTokenizer) fill(v *Vocab, typ func(id int32, text string, added *hfAddedToken) TokenType) error {
	size := int32(0)
	for _, id := range hf.Model.Vocab {
		size = max(size, id+1)
	}
	for _, a := range hf.AddedTokens {
		size = max(size, a.ID+1)
	}
	v.Tokens = make([]string, size)
	v.Types = make([]TokenType, size)
	have := make([]bool, size)
	for text, id := range hf.Model.Vocab {
		if id < 0 {
			return fmt.Errorf("tokenizer: tokenizer.json: token %q has id %d", text, id)
		}
		v.Tokens[id], have[id] = text, true
	}
	added := make(map[int32]*hfAddedToken, len(hf.AddedTokens))
	for i, a := range hf.AddedTokens {
		if a.ID < 0 {
			return fmt.Errorf("tokenizer: tokenizer.json: added token %q has id %d", a.Content, a.ID)
		}
		v.Tokens[a.ID], have[a.ID] = a.Content, true
		added[a.ID] = &hf.AddedTokens[i]
	}
	for id := range v.Tokens {
		if !have[id] {
			v.Tokens[id], v.Types[id] = fmt.Sprintf("[PAD%d]", id), Unused
			continue
		}
		v.Types[id] = typ(int32(id), v.Tokens[id], added[int32(id)])
	}
	// Merges are "a b" strings in older files and ["a", "b"] pairs in newer.
	var asStrings []string
	if err := json.Unmarshal(hf.Model.Merges, &asStrings); err == nil {
		v.Merges = asStrings
		return nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(hf.Model.Merges, &pairs); err != nil {
		return fmt.Errorf("tokenizer: tokenizer.json: merges: %w", err)
	}
	v.Merges = make([]string, len(pairs))
	for i, p := range pairs {
		v.Merges[i] = strings.ReplaceAll(p[0], " ", "\u0120") + " " + strings.ReplaceAll(p[1], " ", "\u0120")
	}
	return nil
}

// FromHFTokenizerJSON reads a Hugging Face tokenizer.json of a byte-level
// BPE model into a Vocab of model "gpt2" with tokenizer.ggml.pre = pre, as
// convert_hf_to_gguf.py's get_vocab_base does: tokens by id, an added token
// is control if it is special and user-defined otherwise, ids without a
// token become "[PAD<id>]" of type unused, and the merges are "left right".
// The converter recognizes pre by hashing a test encoding; here the caller
// names it. Special ids (BOS, EOS, …) live in tokenizer_config.json, which
// the caller sets on the result.
func FromHFTokenizerJSON(data []byte, pre string) (*Vocab, error) {
	hf, err := readHFBPE(data)
	if err != nil {
		return nil, err
	}
	if _, ok := preSpecFor(pre); !ok {
		return nil, fmt.Errorf("tokenizer: %s = %q: unknown pre-tokenizer", KeyPre, pre)
	}
	v := NewVocab(ModelBPE)
	v.Pre = pre
	if spec, _ := preSpecFor(pre); spec.addBOS {
		v.AddBOS = true
	}
	err = hf.fill(v, func(_ int32, _ string, added *hfAddedToken) TokenType {
		switch {
		case added == nil:
			return Normal
		case added.Special:
			return Control
		}
		return UserDefined
	})
	if err != nil {
		return nil, err
	}
	return v, v.check()
}

// gemma4Visible are the tokens llama.cpp's converter makes user-defined in a
// Gemma 4 vocabulary, "so that the chat parser can read them": decoding
// always writes them.
var gemma4Visible = []string{"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", `<|"|>`}

// FromGemma4TokenizerJSON reads the tokenizer.json of a Gemma 4 checkpoint
// (transformers' GemmaTokenizer: a BPE with byte fallback over text whose
// spaces are "▁") into a Vocab of model "gemma4", as convert_hf_to_gguf.py's
// Gemma4Model.set_vocab does through gguf-py's LlamaHfVocab: the tokens by
// id, each scored -1000; of the model's vocabulary, <0xXX> tokens of type
// byte, those of specials control and the rest normal; added tokens past
// it control if in specials, else user-defined; then the tokens a chat
// parser must see (<|tool_call>, <|"|>, …) user-defined; and the merges.
// specials are transformers' all_special_tokens, which tokenizer_config.json
// names. Like the converter it writes no tokenizer.ggml.pre, which llama.cpp
// does not read for Gemma 4. Special ids are the caller's to set, as for
// FromHFTokenizerJSON.
func FromGemma4TokenizerJSON(data []byte, specials []string) (*Vocab, error) {
	hf, err := readHFBPE(data)
	if err != nil {
		return nil, err
	}
	if !hf.Model.ByteFallback {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model.byte_fallback is off; a %q vocabulary falls back to byte tokens", ModelGemma4)
	}
	base := int32(len(hf.Model.Vocab))
	special := make(map[string]bool, len(specials))
	for _, s := range specials {
		special[s] = true
	}
	v := NewVocab(ModelGemma4)
	err = hf.fill(v, func(id int32, text string, _ *hfAddedToken) TokenType {
		_, isByte := parseByteToken(text)
		switch {
		case slices.Contains(gemma4Visible, text):
			return UserDefined
		case id < base && isByte:
			return Byte
		case special[text]:
			return Control
		case id < base:
			return Normal
		}
		return UserDefined
	})
	if err != nil {
		return nil, err
	}
	v.Scores = make([]float32, len(v.Tokens))
	for i := range v.Scores {
		v.Scores[i] = -1000
	}
	return v, v.check()
}
