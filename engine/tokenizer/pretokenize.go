package tokenizer

import (
	"fmt"
	"strings"

	"github.com/dlclark/regexp2"
)

// A preSpec is one tokenizer.ggml.pre: the regular expressions that split
// text into words before BPE, applied in sequence (each one splits every
// piece the previous left, keeping both the matches and the text between
// them, as Hugging Face's Split pre-tokenizer with behavior "Isolated" does),
// and whether a word that is itself in the vocabulary skips the merges
// (Hugging Face's ignore_merges, which llama.cpp sets by pre-tokenizer name
// because GGUF does not store it), and whether BOS is added when the file
// does not say.
type preSpec struct {
	patterns     []string
	ignoreMerges bool
	addBOS       bool // llama.cpp's add_bos default for this pre-tokenizer
}

// The patterns, written in the syntax of the vocabularies' own
// tokenizer.json files (Oniguruma's, which regexp2 accepts unchanged), and
// the same regular expressions llama.cpp's llm_tokenizer_bpe uses. Where
// llama.cpp rewrote a pattern because std::regex lacks case-insensitive
// groups or \p{Lu} (llama3, qwen2, tekken, gpt-4o), the original is used:
// it is what the reference tokenizer runs.
const (
	patGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patTekken = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patGPT4o  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patBloom  = ` ?[^(\s|.,!?…。，、।۔،)]+`
	patCJK    = `[一-龥ࠀ-一가-퟿]+`
)

// deepSeekLetters is DeepSeek LLM's letter class: the cased scripts listed
// explicitly, so that CJK, which a later pattern takes, stays out of words.
// It is built from code points because several of them (U+1F7D, U+1FBE,
// U+2126, U+212A, …) are singletons that Unicode normalization turns into
// other characters, so a literal in the source is one editor away from a
// different class.
var deepSeekLetters = [][2]rune{
	{0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
	{0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
	{0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
	{0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
	{0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
	{0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
	{0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
	{0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
	{0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
	{0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
	{0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
	{0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
	{0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
	{0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
	{0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
	{0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
	{0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
	{0x1E900, 0x1E943},
}

// charClass writes ranges as a regular expression character class.
func charClass(ranges [][2]rune) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for _, r := range ranges {
		sb.WriteRune(r[0])
		if r[1] != r[0] {
			sb.WriteByte('-')
			sb.WriteRune(r[1])
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

// preSpecFor is the pre-tokenizer a tokenizer.ggml.pre value names. The
// names are llama.cpp's (llama-vocab.cpp); "" and "default" are its default
// for a BPE file that names none.
func preSpecFor(name string) (preSpec, bool) {
	switch name {
	case "", "default":
		return preSpec{patterns: []string{
			`[\p{P}\$\+<=>\^~\|]+`,
			patGPT2,
			`\p{N}+`,
			`[0-9][0-9][0-9]`,
		}}, true
	case "llama-bpe", "llama3":
		return preSpec{patterns: []string{patLlama3}, ignoreMerges: true, addBOS: true}, true
	case "dbrx", "smaug-bpe", "chatglm-bpe", "glm4":
		return preSpec{patterns: []string{patLlama3}}, true
	case "qwen2", "deepseek-r1-qwen", "megrez", "kormo", "stablelm2", "hunyuan", "grok-2":
		return preSpec{patterns: []string{patQwen2}}, true
	case "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4",
		"jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe",
		"gigachat", "a.x-4.0", "mellum":
		return preSpec{patterns: []string{patGPT2}}, true
	case "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b":
		return preSpec{patterns: []string{`\p{N}`, patGPT2}}, true
	case "falcon":
		return preSpec{patterns: []string{
			`[\p{P}\$\+<=>\^~\|` + "`" + `]+`,
			patGPT2,
			`[0-9][0-9][0-9]`,
		}}, true
	case "deepseek-llm":
		return preSpec{patterns: []string{
			`[\r\n]`,
			`\s?` + charClass(deepSeekLetters) + `+`,
			`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
			`\s+$`,
			patCJK,
			`\p{N}+`,
		}}, true
	case "deepseek-coder":
		return preSpec{patterns: []string{
			`[\r\n]`,
			`\s?\p{L}+`,
			`\s?\p{P}+`,
			patCJK,
			`\p{N}`,
		}}, true
	case "deepseek-v3", "hunyuan-dense":
		return preSpec{patterns: []string{
			`\p{N}{1,3}`,
			`[一-龥぀-ゟ゠-ヿ]+`,
			`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		}}, true
	case "poro-chat", "bloom", "gpt3-finnish":
		return preSpec{patterns: []string{patBloom}}, true
	case "viking":
		return preSpec{patterns: []string{patBloom, `\p{N}`}}, true
	case "tekken":
		return preSpec{patterns: []string{patTekken}, ignoreMerges: true, addBOS: true}, true
	case "gpt-4o", "llama4", "minimax-m2":
		return preSpec{patterns: []string{patGPT4o}}, true
	}
	return preSpec{}, false
}

// preTokenizer splits text into the words BPE merges within. Each stage is
// a compiled pattern, or its hand-written matcher where there is one.
type preTokenizer struct {
	stages []preStage
}

type preStage struct {
	re   *regexp2.Regexp
	fast runeMatcher
}

func newPreTokenizer(name string) (*preTokenizer, error) {
	spec, ok := preSpecFor(name)
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s = %q: unknown pre-tokenizer", KeyPre, name)
	}
	return compilePreTokenizer(name, spec.patterns, true)
}

// compilePreTokenizer compiles patterns, with the hand-written matchers
// where fast is set and one exists.
func compilePreTokenizer(name string, patterns []string, fast bool) (*preTokenizer, error) {
	p := &preTokenizer{}
	for _, pat := range patterns {
		if m := fastMatcher(pat); fast && m != nil {
			p.stages = append(p.stages, preStage{fast: m})
			continue
		}
		re, err := regexp2.Compile(pat, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s = %q: pattern %q: %w", KeyPre, name, pat, err)
		}
		p.stages = append(p.stages, preStage{re: re})
	}
	return p, nil
}

// split calls fn with each word of text, in order, as runes. Invalid UTF-8
// bytes are U+FFFD, one per byte, as in llama.cpp (the reference libraries
// take only valid strings).
func (p *preTokenizer) split(text string, fn func(word []rune)) {
	pieces := [][]rune{[]rune(text)}
	for i, st := range p.stages {
		last := i == len(p.stages)-1
		var next [][]rune
		emit := func(w []rune) {
			if last {
				fn(w)
			} else {
				next = append(next, w)
			}
		}
		for _, piece := range pieces {
			st.splitPiece(piece, emit)
		}
		pieces = next
	}
}

// splitPiece emits the matches of the stage's pattern in piece and the
// text between them, in order.
func (st preStage) splitPiece(piece []rune, emit func([]rune)) {
	pos := 0
	if st.fast != nil {
		gap := 0
		for pos < len(piece) {
			n := st.fast(piece, pos)
			if n == 0 {
				pos++
				continue
			}
			if pos > gap {
				emit(piece[gap:pos])
			}
			emit(piece[pos : pos+n])
			pos += n
			gap = pos
		}
		if gap < len(piece) {
			emit(piece[gap:])
		}
		return
	}
	m, err := st.re.FindRunesMatch(piece)
	for err == nil && m != nil {
		if m.Index > pos {
			emit(piece[pos:m.Index])
		}
		if m.Length > 0 {
			emit(piece[m.Index : m.Index+m.Length])
		}
		pos = m.Index + m.Length
		m, err = st.re.FindNextMatch(m)
	}
	// regexp2 fails only on a match timeout, and none is set.
	if pos < len(piece) {
		emit(piece[pos:])
	}
}
