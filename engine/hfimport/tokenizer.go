package hfimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// The Split patterns of the byte-level BPE families a tokenizer.json is
// recognized by, as those models' tokenizer.json files write them (and
// engine/tokenizer runs them).
const (
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patTekken = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patGPT4o  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

var splitPre = map[string]string{
	patLlama3: "llama-bpe",
	patQwen2:  "qwen2",
	patTekken: "tekken",
	patGPT4o:  "gpt-4o",
}

// endOfTurn are the texts of the tokens that end a chat turn, by which a
// generation_config.json eos id that is not tokenizer_config.json's
// eos_token becomes tokenizer.ggml.eot_token_id (llama.cpp's loader matches
// the same texts).
var endOfTurn = []string{"<|eot_id|>", "<end_of_turn>", "<|im_end|>", "<|end|>", "<|end_of_turn|>"}

// tokenizerJSON is the part of tokenizer.json the choice of vocabulary
// reads.
type tokenizerJSON struct {
	Model struct {
		Type         string          `json:"type"`
		ByteFallback bool            `json:"byte_fallback"`
		Merges       json.RawMessage `json:"merges"`
	} `json:"model"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Decoder       json.RawMessage `json:"decoder"`
	PostProcessor json.RawMessage `json:"post_processor"`
	AddedTokens   []addedToken    `json:"added_tokens"`
}

type addedToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

// preStep is one pre-tokenizer of a (flattened) Sequence.
type preStep struct {
	Type             string          `json:"type"`
	UseRegex         *bool           `json:"use_regex"`
	IndividualDigits bool            `json:"individual_digits"`
	Pattern          json.RawMessage `json:"pattern"`
	PreTokenizers    []preStep       `json:"pretokenizers"`
}

func flattenPre(s preStep) []preStep {
	if s.Type != "Sequence" {
		return []preStep{s}
	}
	var out []preStep
	for _, p := range s.PreTokenizers {
		out = append(out, flattenPre(p)...)
	}
	return out
}

// isByteLevel reports whether tokenizer.json is a byte-level BPE (GPT-2's
// byte stand-ins), as opposed to a SentencePiece-style one.
func (t *tokenizerJSON) isByteLevel() bool {
	if t.Model.Type != "BPE" {
		return false
	}
	var pre, dec preStep
	json.Unmarshal(t.PreTokenizer, &pre)
	json.Unmarshal(t.Decoder, &dec)
	for _, s := range append(flattenPre(pre), flattenPre(dec)...) {
		if s.Type == "ByteLevel" {
			return true
		}
	}
	return false
}

// isSentencePieceBPE reports whether tokenizer.json is a BPE in
// SentencePiece's manner: byte fallback and a Sequence decoder
// (GemmaTokenizer's: Replace "▁" by " ", ByteFallback, Fuse), the form
// transformers' GemmaTokenizer writes and llama.cpp's converter reads with
// gguf-py's LlamaHfVocab, which checks just these. Gemma 2
// and 3's tokenizer.json has this form too; the class decides what the
// converter makes of it (Gemma 4's: a "gemma4" vocabulary).
func (t *tokenizerJSON) isSentencePieceBPE() bool {
	if t.Model.Type != "BPE" || !t.Model.ByteFallback {
		return false
	}
	var dec preStep
	json.Unmarshal(t.Decoder, &dec)
	return dec.Type == "Sequence"
}

// hasMerges reports whether tokenizer.json's model has a merge.
func (t *tokenizerJSON) hasMerges() bool {
	var merges []json.RawMessage
	return json.Unmarshal(t.Model.Merges, &merges) == nil && len(merges) > 0
}

// detectPre names the pre-tokenizer of a byte-level tokenizer.json as
// tokenizer.ggml.pre, by its steps and Split patterns; llama.cpp's converter
// hashes a test encoding instead, which needs the Python tokenizer.
func (t *tokenizerJSON) detectPre() (string, error) {
	var pre preStep
	if len(t.PreTokenizer) > 0 && string(t.PreTokenizer) != "null" {
		if err := json.Unmarshal(t.PreTokenizer, &pre); err != nil {
			return "", fmt.Errorf("pre_tokenizer: %w", err)
		}
	}
	steps := flattenPre(pre)
	regex := func(s preStep) bool { return s.UseRegex == nil || *s.UseRegex }
	switch {
	case len(steps) == 1 && steps[0].Type == "ByteLevel" && regex(steps[0]):
		return "gpt-2", nil
	case len(steps) == 2 && steps[0].Type == "Digits" && steps[0].IndividualDigits &&
		steps[1].Type == "ByteLevel" && regex(steps[1]):
		return "smollm", nil
	case len(steps) == 2 && steps[0].Type == "Split" && steps[1].Type == "ByteLevel" && !regex(steps[1]):
		var p struct {
			Regex string `json:"Regex"`
		}
		json.Unmarshal(steps[0].Pattern, &p)
		if name, ok := splitPre[p.Regex]; ok {
			return name, nil
		}
	}
	return "", errors.New("pre-tokenizer not recognized: name it (hearth import --pre NAME, a tokenizer.ggml.pre value such as llama-bpe, qwen2, gpt-2)")
}

// templateAdds reads the post_processor's TemplateProcessing: whether a
// single sequence gets a special token before and after it, and which.
func (t *tokenizerJSON) templateAdds() (first, last string, ok bool) {
	var pp struct {
		Type       string `json:"type"`
		Processors []json.RawMessage
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	}
	if json.Unmarshal(t.PostProcessor, &pp) != nil {
		return "", "", false
	}
	if pp.Type == "Sequence" {
		for _, p := range pp.Processors {
			sub := tokenizerJSON{PostProcessor: p}
			if f, l, ok := sub.templateAdds(); ok {
				return f, l, true
			}
		}
		return "", "", false
	}
	if pp.Type != "TemplateProcessing" || len(pp.Single) == 0 {
		return "", "", false
	}
	if s := pp.Single[0].SpecialToken; s != nil {
		first = s.ID
	}
	if s := pp.Single[len(pp.Single)-1].SpecialToken; s != nil && len(pp.Single) > 1 {
		last = s.ID
	}
	return first, last, true
}

// vocabInfo is the tokenizer part of an import.
type vocabInfo struct {
	vocab        *tokenizer.Vocab
	chatTemplate string
	source       string // "tokenizer.json" or "tokenizer.model"
}

// loadVocab builds the tokenizer.ggml.* metadata from the folder's
// tokenizer files as convert_hf_to_gguf.py does: a byte-level tokenizer.json
// as "gpt2"; Gemma 4's tokenizer.json (a Gemma 4 class with a
// SentencePiece-style BPE) as "gemma4", whether or not a tokenizer.model
// lies beside it; else tokenizer.model as "llama". Special tokens come from
// tokenizer_config.json, then config.json and generation_config.json; the
// vocabulary is padded with [PAD<id>] to the embedding's vocab_size.
func loadVocab(dir string, hp *hparams, pre string) (*vocabInfo, error) {
	tcfgPath := filepath.Join(dir, "tokenizer_config.json")
	tcfg := object{file: tcfgPath}
	if _, err := os.Stat(tcfgPath); err == nil {
		if tcfg, err = readObject(tcfgPath); err != nil {
			return nil, err
		}
	}
	info := &vocabInfo{}
	var tj tokenizerJSON
	tjPath := filepath.Join(dir, "tokenizer.json")
	tjData, tjErr := os.ReadFile(tjPath)
	if tjErr == nil {
		if err := json.Unmarshal(tjData, &tj); err != nil {
			return nil, fmt.Errorf("hfimport: %s: %w", tjPath, err)
		}
	} else if !errors.Is(tjErr, os.ErrNotExist) {
		return nil, fmt.Errorf("hfimport: %w", tjErr)
	}
	spmPath := filepath.Join(dir, "tokenizer.model")
	spmData, spmErr := os.ReadFile(spmPath)
	if spmErr != nil && !errors.Is(spmErr, os.ErrNotExist) {
		return nil, fmt.Errorf("hfimport: %w", spmErr)
	}

	var v *tokenizer.Vocab
	var err error
	switch {
	case tjErr == nil && tj.isByteLevel():
		if pre == "" {
			if pre, err = tj.detectPre(); err != nil {
				return nil, fmt.Errorf("hfimport: %s: %w", tjPath, err)
			}
		}
		if v, err = tokenizer.FromHFTokenizerJSON(tjData, pre); err != nil {
			return nil, fmt.Errorf("hfimport: %s: %w", tjPath, err)
		}
		info.source = "tokenizer.json"
	case tjErr == nil && hp.fam != nil && hp.fam.arch.Name == "gemma4" && tj.isSentencePieceBPE():
		// The converter would write the vocabulary without merges, which
		// llama.cpp then refuses to load.
		if !tj.hasMerges() {
			return nil, fmt.Errorf("hfimport: %s: model.merges is empty; a %s vocabulary needs its merges (%s)", tjPath, tokenizer.ModelGemma4, tokenizer.KeyMerges)
		}
		specials, err := allSpecialTokens(tcfg)
		if err != nil {
			return nil, err
		}
		if v, err = tokenizer.FromGemma4TokenizerJSON(tjData, specials); err != nil {
			return nil, fmt.Errorf("hfimport: %s: %w", tjPath, err)
		}
		info.source = "tokenizer.json"
	case spmErr == nil:
		if v, err = tokenizer.FromSentencePiece(spmData); err != nil {
			return nil, fmt.Errorf("hfimport: %s: %w", spmPath, err)
		}
		info.source = "tokenizer.model"
		if err := addSPMTokens(v, tj.AddedTokens, tcfg); err != nil {
			return nil, err
		}
	case tjErr == nil:
		return nil, fmt.Errorf("hfimport: %s: a %s model without a ByteLevel pre-tokenizer needs the tokenizer.model it was made from, which %s lacks", tjPath, tj.Model.Type, dir)
	default:
		return nil, fmt.Errorf("hfimport: %s has neither tokenizer.json nor tokenizer.model", dir)
	}

	// The embedding has vocab_size rows; the tokenizer may have fewer
	// (Qwen, Gemma 3 pad for alignment), never more.
	if len(v.Tokens) > hp.vocab {
		return nil, fmt.Errorf("hfimport: the tokenizer (%s) has %d tokens, more than vocab_size %d in config.json", info.source, len(v.Tokens), hp.vocab)
	}
	for id := len(v.Tokens); id < hp.vocab; id++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("[PAD%d]", id))
		if v.Types != nil {
			v.Types = append(v.Types, tokenizer.Unused)
		}
		if v.Scores != nil {
			v.Scores = append(v.Scores, -1000)
		}
	}

	if err := setSpecials(v, hp, tcfg, &tj, dir); err != nil {
		return nil, err
	}
	if v.Model == tokenizer.ModelGemma4 {
		// The converter writes add_bos_token true for Gemma 4 over what
		// tokenizer_config.json says (false, as transformers saves it).
		v.AddBOS = true
	}
	if info.chatTemplate, err = chatTemplate(dir, tcfg); err != nil {
		return nil, err
	}
	info.vocab = v
	return info, nil
}

// addSPMTokens applies the added tokens of tokenizer.json and
// tokenizer_config.json's added_tokens_decoder to a SentencePiece
// vocabulary, as the converter does: a token past the model's pieces is
// appended, and a special one is control, another user-defined.
func addSPMTokens(v *tokenizer.Vocab, added []addedToken, tcfg object) error {
	dec, err := tcfg.obj("added_tokens_decoder")
	if err != nil {
		return err
	}
	for key := range dec.m {
		id, err := strconv.Atoi(key)
		if err != nil || id < 0 {
			return dec.errorf(key, "is not a token id")
		}
		e, err := dec.obj(key)
		if err != nil {
			return err
		}
		content, err := e.str("content", "")
		if err != nil {
			return err
		}
		special, err := e.bool("special", false)
		if err != nil {
			return err
		}
		added = append(added, addedToken{ID: id, Content: content, Special: special})
	}
	// Lower ids first, so that appending past the end stays in id order.
	slices.SortStableFunc(added, func(a, b addedToken) int { return a.ID - b.ID })
	for _, a := range added {
		if a.ID > len(v.Tokens) {
			return fmt.Errorf("hfimport: added token %q has id %d, past the %d tokens of tokenizer.model with a gap", a.Content, a.ID, len(v.Tokens))
		}
		typ := tokenizer.UserDefined
		if a.Special {
			typ = tokenizer.Control
		}
		if a.ID == len(v.Tokens) {
			v.Tokens = append(v.Tokens, a.Content)
			v.Types = append(v.Types, typ)
			v.Scores = append(v.Scores, -1000)
			continue
		}
		v.Tokens[a.ID], v.Types[a.ID] = a.Content, typ
	}
	return nil
}

// allSpecialTokens are transformers' all_special_tokens (v5) as
// tokenizer_config.json gives them: the text of every KEY_token (bos_token
// and the other named ones, and model-specific names such as Gemma 4's
// eot_token), and of the extra_special_tokens (a list, or named as a map)
// and additional_special_tokens (v4's name for them).
func allSpecialTokens(tcfg object) ([]string, error) {
	var out []string
	add := func(o object, key string) error {
		text, ok, err := tokenText(o, key)
		if ok {
			out = append(out, text)
		}
		return err
	}
	for key, val := range tcfg.m {
		switch {
		case key == "extra_special_tokens" || key == "additional_special_tokens":
			list := object{file: tcfg.file, m: map[string]any{}}
			switch x := val.(type) {
			case []any:
				for i, e := range x {
					list.m[strconv.Itoa(i)] = e
				}
			case map[string]any:
				list.m = x
			case nil:
			default:
				return nil, tcfg.errorf(key, "is %T, want a list or map of tokens", x)
			}
			for k := range list.m {
				if err := add(list, k); err != nil {
					return nil, err
				}
			}
		case strings.HasSuffix(key, "_token"):
			switch val.(type) {
			case string, map[string]any:
				if err := add(tcfg, key); err != nil {
					return nil, err
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// tokenText reads tokenizer_config.json's KEY_token: a string, or an
// AddedToken object with the string in content.
func tokenText(tcfg object, key string) (string, bool, error) {
	switch x := tcfg.m[key].(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case map[string]any:
		o, _ := tcfg.obj(key)
		s, err := o.str("content", "")
		return s, s != "", err
	default:
		return "", false, tcfg.errorf(key, "is %v, want a token", x)
	}
}

// setSpecials sets the special token ids and add_bos/add_eos.
func setSpecials(v *tokenizer.Vocab, hp *hparams, tcfg object, tj *tokenizerJSON, dir string) error {
	ids := map[string]int32{}
	for i := len(v.Tokens) - 1; i >= 0; i-- { // the lowest id of a text wins
		ids[v.Tokens[i]] = int32(i)
	}
	inRange := func(id int) bool { return id >= 0 && id < len(v.Tokens) }
	for _, s := range []struct {
		key    string
		dst    *int32
		config []int
	}{
		{"bos_token", &v.BOS, hp.bos},
		{"eos_token", &v.EOS, hp.eos},
		{"unk_token", &v.UNK, nil},
		{"pad_token", &v.PAD, hp.pad},
		{"mask_token", &v.MASK, nil},
	} {
		text, ok, err := tokenText(tcfg, s.key)
		if err != nil {
			return err
		}
		if id, found := ids[text]; ok && found {
			*s.dst = id
			continue
		}
		if *s.dst == tokenizer.None && len(s.config) > 0 && inRange(s.config[0]) {
			*s.dst = int32(s.config[0])
		}
	}

	gen, err := readOptional(filepath.Join(dir, "generation_config.json"))
	if err != nil {
		return err
	}
	genEOS, err := gen.ints("eos_token_id")
	if err != nil {
		return err
	}
	if v.EOS == tokenizer.None && len(genEOS) > 0 && inRange(genEOS[0]) {
		v.EOS = int32(genEOS[0])
	}
	if v.BOS == tokenizer.None {
		genBOS, err := gen.ints("bos_token_id")
		if err != nil {
			return err
		}
		if len(genBOS) > 0 && inRange(genBOS[0]) {
			v.BOS = int32(genBOS[0])
		}
	}
	// An instruct model stops on its end-of-turn token, which
	// generation_config.json lists beside the plain EOS.
	for _, id := range append(slices.Clone(hp.eos), genEOS...) {
		if !inRange(id) || int32(id) == v.EOS {
			continue
		}
		switch text := v.Tokens[id]; {
		case text == "<|eom_id|>" && v.EOM == tokenizer.None:
			v.EOM = int32(id)
		case slices.Contains(endOfTurn, text) && v.EOT == tokenizer.None:
			v.EOT = int32(id)
		}
	}

	if first, last, ok := tj.templateAdds(); ok {
		v.AddBOS = first != "" && v.BOS != tokenizer.None && v.Tokens[v.BOS] == first
		v.AddEOS = last != "" && v.EOS != tokenizer.None && v.Tokens[v.EOS] == last
	}
	if tcfg.has("add_bos_token") {
		if v.AddBOS, err = tcfg.bool("add_bos_token", false); err != nil {
			return err
		}
	}
	if tcfg.has("add_eos_token") {
		if v.AddEOS, err = tcfg.bool("add_eos_token", false); err != nil {
			return err
		}
	}
	return nil
}

func readOptional(path string) (object, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return object{file: path}, nil
	}
	return readObject(path)
}

// chatTemplate is tokenizer_config.json's chat_template (a string, or a
// list of named templates of which "default" is the model's), else the
// chat_template.jinja or chat_template.json that newer transformers save
// beside it.
func chatTemplate(dir string, tcfg object) (string, error) {
	switch x := tcfg.m["chat_template"].(type) {
	case nil:
	case string:
		return x, nil
	case []any:
		var first string
		for _, e := range x {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			tmpl, _ := m["template"].(string)
			if name == "default" {
				return tmpl, nil
			}
			if first == "" {
				first = tmpl
			}
		}
		return first, nil
	default:
		return "", tcfg.errorf("chat_template", "is %T, want a string or a list of templates", x)
	}
	data, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if err == nil {
		return string(data), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("hfimport: %w", err)
	}
	ct, err := readOptional(filepath.Join(dir, "chat_template.json"))
	if err != nil {
		return "", err
	}
	return ct.str("chat_template", "")
}
