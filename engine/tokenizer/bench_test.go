package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
)

// benchText is about 3 MB of prose: the War and Peace excerpts and hard
// strings of the shared references, repeated.
func benchText(b testing.TB) string {
	b.Helper()
	var sb strings.Builder
	refs := loadRefs(b)
	for sb.Len() < 3<<20 {
		for _, c := range refs["llama3-bpe"] {
			sb.WriteString(c.Text)
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// BenchmarkEncode reports tokens per second encoding ~3 MB of text with
// each reference vocabulary (see docs/performance.md, "## tokenizer").
func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, r := range refTokenizers {
		b.Run(r.name, func(b *testing.B) {
			tok := refTok(b, r.name)
			opts := refOptions(tok)
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			n := 0
			for i := 0; i < b.N; i++ {
				n = len(tok.Encode(text, opts))
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.Logf("%s: %d bytes, %d tokens, ids %s", r.name, len(text), n, idsDigest(tok.Encode(text, opts)))
		})
	}
}

// idsDigest is testdata/bench_reference.py's digest of a tokenization: the
// first 16 hex digits of the SHA-256 of the ids joined by commas.
func idsDigest(ids []int32) string {
	var sb strings.Builder
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(int(id)))
	}
	sum := sha256.Sum256([]byte(sb.String()))
	return hex.EncodeToString(sum[:])[:16]
}

// BenchmarkDecode reports tokens per second streaming the tokens back.
func BenchmarkDecode(b *testing.B) {
	text := benchText(b)
	for _, r := range refTokenizers {
		b.Run(r.name, func(b *testing.B) {
			tok := refTok(b, r.name)
			ids := tok.Encode(text, refOptions(tok))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := tok.NewDecoder(DecodeOptions{})
				for _, id := range ids {
					if _, err := d.Next(id); err != nil {
						b.Fatal(err)
					}
				}
				d.Flush()
			}
			b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// TestLongTextMatchesReference encodes the 3 MiB benchmark text and
// compares the token count and digest with what the reference libraries
// gave for the same text (testdata/bench_reference.py, run with Hugging
// Face tokenizers 0.23.2 and sentencepiece 0.2.2 on the H200 host).
func TestLongTextMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes 3 MiB four times")
	}
	want := map[string]struct {
		tokens int
		digest string
	}{
		"llama3-bpe": {761007, "b2e834510dd428bc"},
		"qwen2-bpe":  {1213758, "50443ca99bedae83"},
		"gemma-spm":  {1122121, "eee28f75f8df988f"},
		"llama-spm":  {1153243, "b54943563f4b6548"},
	}
	text := benchText(t)
	for _, r := range refTokenizers {
		tok := refTok(t, r.name)
		ids := tok.Encode(text, refOptions(tok))
		if w := want[r.name]; len(ids) != w.tokens || idsDigest(ids) != w.digest {
			t.Errorf("%s: %d tokens, digest %s; reference %d, %s", r.name, len(ids), idsDigest(ids), w.tokens, w.digest)
		}
	}
}
