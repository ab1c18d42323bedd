package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fastPatterns are the patterns with hand-written matchers.
var fastPatterns = []string{patGPT2, patLlama3, patQwen2, patNewlines}

// splitBoth splits text with pattern through regexp2 and through the
// hand-written matcher.
func splitBoth(t testing.TB, pattern, text string) (slow, fast []string) {
	for i, useFast := range []bool{false, true} {
		p, err := compilePreTokenizer("test", []string{pattern}, useFast)
		if err != nil {
			t.Fatal(err)
		}
		if useFast != (p.stages[0].fast != nil) {
			t.Fatalf("pattern %q: fast matcher %v, want %v", pattern, p.stages[0].fast != nil, useFast)
		}
		var out []string
		p.split(text, func(w []rune) { out = append(out, string(w)) })
		if i == 0 {
			slow = out
		} else {
			fast = out
		}
	}
	return slow, fast
}

// trickyRunes are the characters the patterns treat differently: cases,
// digits of several scripts, apostrophes and contraction letters, every
// kind of whitespace, CJK, combining marks, emoji, punctuation.
var trickyRunes = []rune("aZsStTrReEvVmMlLdD'' ’0९٣½Ⅻ \t\n\r\v\f\u0085\u00a0\u2028\u3000日本語Åéǅʰ\u0301\u200d🙂!?.,-/<>|_$+=~^`\"\\")

func randomText(r *rand.Rand) string {
	var sb strings.Builder
	n := r.IntN(24)
	for range n {
		if r.IntN(6) == 0 {
			sb.WriteString([]string{"'s", "'RE", "'ll", " 's", "  ", "\r\n", " \n ", "123456", " x"}[r.IntN(9)])
			continue
		}
		sb.WriteRune(trickyRunes[r.IntN(len(trickyRunes))])
	}
	return sb.String()
}

// TestFastPreTokenizersMatchRegexp2 checks the hand-written matchers against
// regexp2 on the reference texts and on random strings of tricky characters.
func TestFastPreTokenizersMatchRegexp2(t *testing.T) {
	texts := []string{"", " ", "\n", "  x", "x  ", "'", "'S", "a'll", "\t\tb", " \t\n\t x", "1234567", "Hello  world!! 'tis"}
	for _, cases := range loadRefs(t) {
		for _, c := range cases {
			texts = append(texts, c.Text)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		texts = append(texts, randomText(r))
	}
	for _, pat := range fastPatterns {
		bad := 0
		for _, text := range texts {
			slow, fast := splitBoth(t, pat, text)
			if !slices.Equal(slow, fast) {
				if bad++; bad <= 5 {
					t.Errorf("pattern %q on %q:\nregexp2 %q\n   fast %q", pat, text, slow, fast)
				}
			}
		}
	}
}

// FuzzFastPreTokenizers compares the hand-written matchers with regexp2 on
// any input: go test ./engine/tokenizer -run '^$' -fuzz FuzzFastPreTokenizers
func FuzzFastPreTokenizers(f *testing.F) {
	for _, s := range []string{"Hello world's 123", "\t\n  x", "日本語🙂 'RE", "a\xffb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, pat := range fastPatterns {
			if slow, fast := splitBoth(t, pat, text); !slices.Equal(slow, fast) {
				t.Fatalf("pattern %q on %q:\nregexp2 %q\n   fast %q", pat, text, slow, fast)
			}
		}
	})
}
