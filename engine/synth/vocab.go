package synth

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// harmonyTemplate is the chat template of the gpt-oss family: harmony's
// turns, which engine/chat has no built-in of.
//
//go:embed harmony.jinja
var harmonyTemplate string

// corpus is the text the merges are learned from: a few KB of plain English
// prose written for this package, with digits, punctuation, a list and a
// few non-ASCII characters, so that every kind of pre-tokenizer split
// occurs.
//
//go:embed corpus.txt
var corpus string

// family is a tokenizer family: the vocabulary model, the special tokens
// its chat template needs and where they sit, and its flags.
type family struct {
	model string // tokenizer.ggml.model
	pre   string // tokenizer.ggml.pre, for BPE
	// head are the special tokens at the start of the vocabulary (ids 0…),
	// tail those after the learned tokens.
	head, tail []string
	// The special tokens' texts; "" for none. unk is SentencePiece's
	// unknown token, of type unknown; the others are control tokens.
	bos, eos, eot, unk, pad string
	addBOS                  bool
	addSpacePrefix          bool // SentencePiece's add_dummy_prefix
	// template names engine/chat's built-in template of the family;
	// templateSource is the template itself where engine/chat has none.
	template, templateSource string
}

const familyNames = "llama3, qwen, gemma, gemma3, phi3, gpt-oss"

// familyOf is the tokenizer family called name. The special tokens and
// flags are those of the real models' GGUF files; their ids differ.
func familyOf(name string) (family, bool) {
	switch name {
	case "llama3":
		return family{
			model: tokenizer.ModelBPE, pre: "llama-bpe",
			tail: []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
			bos:  "<|begin_of_text|>", eos: "<|end_of_text|>", eot: "<|eot_id|>",
			addBOS: true, template: "llama3",
		}, true
	case "qwen":
		// Qwen has no BOS of its own: bos_token_id is <|endoftext|>, and
		// add_bos_token is false.
		return family{
			model: tokenizer.ModelBPE, pre: "qwen2",
			tail: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
			bos:  "<|endoftext|>", eos: "<|endoftext|>", eot: "<|im_end|>", pad: "<|endoftext|>",
			template: "chatml",
		}, true
	case "gemma", "gemma3", "gemma4":
		// Gemma's SentencePiece model adds no dummy prefix. Gemma 3's
		// vocabulary adds the tokens that frame an image and stand for
		// its rows (ids 255999, 256000 and 262144 in the real one),
		// Gemma 4's its own (255999, 258882 and 258880).
		f := family{
			model: tokenizer.ModelSPM,
			head:  []string{"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"},
			bos:   "<bos>", eos: "<eos>", eot: "<end_of_turn>", unk: "<unk>", pad: "<pad>",
			addBOS: true, template: "gemma",
		}
		switch name {
		case "gemma3":
			f.tail = []string{"<start_of_image>", "<end_of_image>", "<image_soft_token>"}
		case "gemma4":
			f.tail = []string{"<|image>", "<image|>", "<|image|>"}
		}
		return f, true
	case "phi3":
		// Llama 2's SentencePiece model with Phi-3's chat tokens after it
		// (ids 32000 and up in the real vocabulary).
		return family{
			model: tokenizer.ModelSPM,
			head:  []string{"<unk>", "<s>", "</s>"},
			tail:  []string{"<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"},
			bos:   "<s>", eos: "<|endoftext|>", eot: "<|end|>", unk: "<unk>",
			addSpacePrefix: true, template: "phi3",
		}, true
	case "gpt-oss":
		// o200k_harmony's special tokens after the learned ones (ids
		// 199998 and up in the real vocabulary, the reserved ones among
		// them left out), and its pre-tokenizer, gpt-4o's. <|return|>
		// ends the assistant's final message and is the EOS; <|end|>
		// ends every message, the EOT llama.cpp's loader finds by its
		// text. No BOS is added.
		return family{
			model: tokenizer.ModelBPE, pre: "gpt-4o",
			tail: []string{"<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
				"<|start|>", "<|end|>", "<|message|>", "<|call|>"},
			bos: "<|startoftext|>", eos: "<|return|>", eot: "<|end|>", pad: "<|endoftext|>",
			template: "harmony", templateSource: harmonyTemplate,
		}, true
	}
	return family{}, false
}

// fixedTokens is how many tokens the family's vocabulary has before any
// merge: the special tokens and the base symbols (the 256 bytes, and for
// SentencePiece the corpus's characters as well).
func (f family) fixedTokens() int {
	n := len(f.head) + len(f.tail) + 256
	if f.model == tokenizer.ModelSPM {
		n += len(spmChars())
	}
	return n
}

// buildVocab makes the vocabulary of preset p: exactly p.Vocab tokens.
func buildVocab(p Preset) (*tokenizer.Vocab, error) {
	f, ok := familyOf(p.Tokenizer)
	if !ok {
		return nil, fmt.Errorf("synth: preset %q: tokenizer %q is not one of %s", p.Name, p.Tokenizer, familyNames)
	}
	budget := p.Vocab - f.fixedTokens()
	if budget < 0 {
		return nil, fmt.Errorf("synth: preset %q: vocab (%d) is smaller than the %d tokens the %s tokenizer cannot do without", p.Name, p.Vocab, f.fixedTokens(), p.Tokenizer)
	}
	v := tokenizer.NewVocab(f.model)
	v.Pre = f.pre
	v.AddBOS = f.addBOS
	v.AddSpacePrefix = f.addSpacePrefix
	v.Tokens = make([]string, 0, p.Vocab)
	v.Types = make([]tokenizer.TokenType, 0, p.Vocab)
	if f.model == tokenizer.ModelSPM {
		v.Scores = make([]float32, 0, p.Vocab)
	}
	add := func(text string, typ tokenizer.TokenType, score float32) {
		v.Tokens = append(v.Tokens, text)
		v.Types = append(v.Types, typ)
		if v.Scores != nil {
			v.Scores = append(v.Scores, score)
		}
	}
	addSpecials := func(texts []string) {
		for _, s := range texts {
			typ := tokenizer.Control
			if s == f.unk {
				typ = tokenizer.Unknown
			}
			add(s, typ, 0)
		}
	}

	addSpecials(f.head)
	switch f.model {
	case tokenizer.ModelBPE:
		bl := newByteLevel()
		for b := range 256 {
			add(string(bl[b]), tokenizer.Normal, 0)
		}
		merges, tokens := learnMerges(bpeWords(bl), budget)
		v.Merges = merges
		for _, t := range tokens {
			add(t, tokenizer.Normal, 0)
		}
	case tokenizer.ModelSPM:
		// Scores rank the pieces for sentencepiece's merge order: the
		// learned pieces by when they were learned, the characters below
		// them all; bytes and control tokens are never merged into.
		for b := range 256 {
			add(fmt.Sprintf("<0x%02X>", b), tokenizer.Byte, 0)
		}
		_, pieces := learnMerges(spmWords(), budget)
		chars := spmChars()
		for i, c := range chars {
			add(c, tokenizer.Normal, -float32(len(pieces)+i))
		}
		for i, t := range pieces {
			add(t, tokenizer.Normal, -float32(i))
		}
	}
	addSpecials(f.tail)
	var name []byte
	for i := 0; len(v.Tokens) < p.Vocab; i++ {
		name = strconv.AppendInt(append(name[:0], "<|reserved_"...), int64(i), 10)
		add(string(append(name, "|>"...)), tokenizer.Unused, 0)
	}

	id := func(text string) int32 {
		if text == "" {
			return tokenizer.None
		}
		return int32(slices.Index(v.Tokens, text))
	}
	v.BOS, v.EOS, v.EOT, v.UNK, v.PAD = id(f.bos), id(f.eos), id(f.eot), id(f.unk), id(f.pad)
	return v, nil
}

// byteLevel is GPT-2's bytes_to_unicode: byte b is written as the
// character bl[b], so that every byte-level token is printable. The
// printable Latin-1 bytes stand for themselves; the other 68 take U+0100
// onwards in byte order (a space is "Ġ").
type byteLevel [256]rune

func newByteLevel() *byteLevel {
	var bl byteLevel
	next := rune(0x100)
	for b := range 256 {
		c := rune(b)
		if !(c >= '!' && c <= '~' || c >= '¡' && c <= '¬' || c >= '®' && c <= 'ÿ') {
			c = next
			next++
		}
		bl[b] = c
	}
	return &bl
}

// bpeSplit approximates the GPT-2 family's pre-tokenizers (a contraction,
// a word or number with its leading space, a run of punctuation, a run of
// spaces): merges are learned within these pieces. The tokenizer that
// reads the file splits with its own pattern; merges learned on a slightly
// different split are still valid merges.
var bpeSplit = regexp.MustCompile(`'(?:[sdmt]|ll|ve|re)| ?\pL+| ?\pN{1,3}| ?[^\s\pL\pN]+|\s+`)

// bpeWords are the corpus's pre-tokenized words as byte-level symbols.
func bpeWords(bl *byteLevel) [][]string {
	var words [][]string
	for _, w := range bpeSplit.FindAllString(corpus, -1) {
		syms := make([]string, len(w))
		for i := range len(w) {
			syms[i] = string(bl[w[i]])
		}
		words = append(words, syms)
	}
	return words
}

// spmWords are the corpus's words as SentencePiece sees them: spaces
// become "▁" and start a word, newlines are words of their own; the
// symbols are characters.
func spmWords() [][]string {
	var words [][]string
	for _, line := range strings.SplitAfter(corpus, "\n") {
		body, nl := strings.CutSuffix(line, "\n")
		body = strings.ReplaceAll(body, " ", "▁")
		start := 0
		for i, r := range body {
			if r == '▁' && i > start {
				words = append(words, chars(body[start:i]))
				start = i
			}
		}
		if start < len(body) {
			words = append(words, chars(body[start:]))
		}
		if nl {
			words = append(words, []string{"\n"})
		}
	}
	return words
}

func chars(s string) []string {
	out := make([]string, 0, utf8.RuneCountInString(s))
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// spmChars are the distinct characters of the corpus as SentencePiece
// pieces ("▁" for the space), sorted.
func spmChars() []string {
	seen := map[string]bool{}
	for _, r := range strings.ReplaceAll(corpus, " ", "▁") {
		seen[string(r)] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// learnMerges learns byte-pair merges from words as BPE trainers do: count
// the adjacent symbol pairs, merge the most frequent (ties: the smaller
// pair, so the result is deterministic), repeat. It stops when no pair
// occurs twice or maxTokens new tokens exist. It returns the merges as
// "left right" and the new tokens in the order they were made; a merge
// that makes a token an earlier merge already made adds no token.
func learnMerges(words [][]string, maxTokens int) (merges, tokens []string) {
	// Identical words are merged alike: count them once, with a weight.
	type word struct {
		syms  []string
		count int
	}
	index := map[string]int{}
	var ws []word
	for _, w := range words {
		key := strings.Join(w, "\x00")
		if i, ok := index[key]; ok {
			ws[i].count++
			continue
		}
		index[key] = len(ws)
		ws = append(ws, word{syms: slices.Clone(w), count: 1})
	}

	type pair struct{ a, b string }
	counts := map[pair]int{}
	where := map[pair]map[int]bool{} // the words a pair occurs in
	addPairs := func(i, sign int) {
		s := ws[i].syms
		for j := 0; j+1 < len(s); j++ {
			pr := pair{s[j], s[j+1]}
			counts[pr] += sign * ws[i].count
			if sign > 0 {
				if where[pr] == nil {
					where[pr] = map[int]bool{}
				}
				where[pr][i] = true
			}
		}
	}
	for i := range ws {
		addPairs(i, 1)
	}

	made := map[string]bool{}
	for len(tokens) < maxTokens {
		var best pair
		bestN := 1
		for pr, n := range counts {
			if n > bestN || n == bestN && n > 1 && (pr.a < best.a || pr.a == best.a && pr.b < best.b) {
				best, bestN = pr, n
			}
		}
		if bestN < 2 {
			break
		}
		joined := best.a + best.b
		merges = append(merges, best.a+" "+best.b)
		if !made[joined] {
			made[joined] = true
			tokens = append(tokens, joined)
		}
		affected := make([]int, 0, len(where[best]))
		for i := range where[best] {
			affected = append(affected, i)
		}
		slices.Sort(affected)
		for _, i := range affected {
			addPairs(i, -1)
			s := ws[i].syms
			out := s[:0]
			for j := 0; j < len(s); j++ {
				if j+1 < len(s) && s[j] == best.a && s[j+1] == best.b {
					out = append(out, joined)
					j++
					continue
				}
				out = append(out, s[j])
			}
			ws[i].syms = out
			addPairs(i, 1)
		}
		for pr, n := range counts {
			if n <= 0 {
				delete(counts, pr)
				delete(where, pr)
			}
		}
	}
	return merges, tokens
}
