package tokenizer

import (
	"fmt"
	"strings"
)

// patNewlines is llama.cpp's only pre-tokenizer pattern for Gemma 4: runs of
// newlines and runs of anything else. Gemma 4 merges across spaces ("▁"),
// so a whole line is one word.
const patNewlines = `[^\n]+|[\n]+`

// newGemma4Model reads a "gemma4" vocabulary as llama.cpp does: a BPE whose
// merges (required) rank pairs of raw UTF-8 texts, with <0xXX> byte tokens
// to fall back on. tokenizer.ggml.pre plays no part: llama.cpp sets it to
// "gemma4" whatever the file says.
func newGemma4Model(v *Vocab, toID map[string]int32) (*bpeModel, error) {
	if len(v.Merges) == 0 {
		return nil, fmt.Errorf("tokenizer: %s = %q needs merges, and %s is missing or empty", KeyModel, ModelGemma4, KeyMerges)
	}
	pt, err := compilePreTokenizer(ModelGemma4, []string{patNewlines}, true)
	if err != nil {
		return nil, err
	}
	m := &bpeModel{pre: pt, gemma4: true, words: toID, nTokens: int32(len(v.Tokens))}
	for i := range m.byteID {
		m.byteID[i] = None
		// llama.cpp looks the byte up by this text, in upper case.
		if id, ok := toID[fmt.Sprintf("<0x%02X>", i)]; ok {
			m.byteID[i] = id
		}
	}
	// llama.cpp ranks merges by text and never asks whether a text is a
	// token. A text that is none gets an id past the vocabulary, so that it
	// merges as in llama.cpp, and falls back to its bytes if it is left at
	// the end. (Hugging Face refuses such a merge, so llama.cpp's converter
	// never writes one.)
	next := m.nTokens
	err = m.readMerges(v.Merges, func(s string) (int32, bool) {
		if id, ok := toID[s]; ok {
			return id, true
		}
		id, ok := m.extra[s]
		if !ok {
			if m.extra == nil {
				m.extra = make(map[string]int32)
			}
			id, next = next, next+1
			m.extra[s] = id
		}
		return id, true
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// gemma4Pieces sets pieces to what the tokens of a gemma4 vocabulary
// decode to, as llama.cpp's token_to_piece writes them: a byte token its
// byte, a normal token its text with "▁" as a space, a control or
// user-defined one its text as it is, and an unused one nothing.
func gemma4Pieces(pieces [][]byte, tokens []string, typeOf func(int32) TokenType) error {
	for id, text := range tokens {
		switch typeOf(int32(id)) {
		case Byte:
			b, ok := parseByteToken(text)
			if !ok {
				return fmt.Errorf("tokenizer: token %d %q has type byte but is not <0xXX>", id, text)
			}
			pieces[id] = []byte{b}
		case Control, UserDefined, Unknown:
			pieces[id] = []byte(text)
		case Unused:
		default:
			pieces[id] = []byte(strings.ReplaceAll(text, spaceMarker, " "))
		}
	}
	return nil
}

// endOfGeneration are the texts of the tokens llama.cpp's loader takes as
// ends of generation in any vocabulary (llama-vocab.cpp); it makes each a
// control token if the file does not.
var endOfGeneration = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
	"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
	"<｜end▁of▁sentence｜>",
}

// gemma4Retyped are the tokens of a gemma4 vocabulary whose type llama.cpp
// changes when it loads the file, and to what. Its end-of-generation tokens
// become control tokens: llama.cpp's converter writes <|tool_response> as
// user-defined, so that a chat parser sees it, but llama.cpp then reads it
// in text only with special tokens parsed, and decodes it to nothing
// without them. And since Gemma 4's </s> is no end of generation where
// <|tool_response> is one, llama.cpp makes it a normal token.
func gemma4Retyped(v *Vocab, toID map[string]int32) map[int32]TokenType {
	retyped := make(map[int32]TokenType)
	for _, text := range endOfGeneration {
		if id, ok := toID[text]; ok && v.TypeOf(int(id)) != Control {
			retyped[id] = Control
		}
	}
	if _, ok := toID["<|tool_response>"]; ok {
		if id, ok := toID["</s>"]; ok {
			retyped[id] = Normal
		}
	}
	return retyped
}
