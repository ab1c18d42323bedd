package data

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/tokenizer"
)

func TestPromptCompletionLossOnCompletionAndEOS(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	d, rep, err := readString(t, "pc.jsonl", `{"prompt": "Where is the hearth?", "completion": " In the first room."}`, tok, f, Options{SeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	s := d.Train.Samples[0]
	if got := trainedText(t, tok, s); !slices.Equal(got, []string{" In the first room.<|end_of_text|>"}) {
		t.Errorf("trains on %q", got)
	}
	if s.Tokens[0] != tok.BOS() {
		t.Errorf("the sample starts with %q, not BOS", decode(t, tok, s.Tokens[:1]))
	}
	if rep.Resegmented != 0 {
		t.Errorf("%d resegmented; the boundary is a token edge", rep.Resegmented)
	}
}

// A prompt that ends inside a word its completion finishes: tokenized
// together, one token would hold both sides, so the sample is the prompt's
// tokens then the completion's, as inference sees them.
func TestPromptCompletionBoundaryInsideAToken(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	prompt, completion := "The baker lit th", "e oven."
	whole := tok.Encode(prompt+completion, tokenizer.EncodeOptions{})
	alone := tok.Encode(prompt, tokenizer.EncodeOptions{})
	if slices.Equal(alone, whole[:min(len(alone), len(whole))]) {
		t.Fatalf("the synth vocabulary has no token across %q|%q; the test needs one", prompt, completion)
	}
	d, rep, err := readString(t, "pc.jsonl", `{"prompt": "`+prompt+`", "completion": "`+completion+`"}`, tok, f, Options{SeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Resegmented != 1 {
		t.Errorf("%d resegmented, want 1", rep.Resegmented)
	}
	s := d.Train.Samples[0]
	want := append(append([]int32{tok.BOS()}, alone...), tok.Encode(completion, tokenizer.EncodeOptions{})...)
	want = append(want, tok.EOS())
	if !slices.Equal(s.Tokens, want) {
		t.Errorf("tokens %v, want %v", s.Tokens, want)
	}
	if got := trainedText(t, tok, s); !slices.Equal(got, []string{completion + "<|end_of_text|>"}) {
		t.Errorf("trains on %q", got)
	}
}

func TestTextLossOnEveryToken(t *testing.T) {
	for _, preset := range []string{"tiny-llama", "tiny-qwen3"} {
		t.Run(preset, func(t *testing.T) {
			tok, f := tinyModel(t, preset)
			text := "A good fire asks for three things."
			d, _, err := readString(t, "t.jsonl", `{"text": "`+text+`"}`, tok, f, Options{SeqLen: 64})
			if err != nil {
				t.Fatal(err)
			}
			s := d.Train.Samples[0]
			eos := tok.Token(tok.EOS())
			// Every token but the first is a target; BOS (Llama) is read,
			// never predicted.
			if got := trainedText(t, tok, s); !slices.Equal(got, []string{text + eos}) && !slices.Equal(got, []string{text[1:] + eos}) {
				t.Errorf("trains on %q", got)
			}
			if s.Trained() != len(s.Tokens)-1 {
				t.Errorf("%d of %d positions trained, want all but the last", s.Trained(), len(s.Tokens))
			}
		})
	}
}

func TestPlainTextFileIsCutIntoSequences(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	text, err := os.ReadFile("../../engine/synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(path, append([]byte("\xef\xbb\xbf"), text...), 0o644); err != nil {
		t.Fatal(err)
	}
	const seqLen = 100
	d, rep, err := Load(path, tok, f, Options{SeqLen: seqLen, Valid: -1})
	if err != nil {
		t.Fatal(err)
	}
	whole := append([]int32{tok.BOS()}, tok.Encode(string(text), tokenizer.EncodeOptions{ParseSpecial: true})...)
	whole = append(whole, tok.EOS())
	if want := (len(whole) - 1 + seqLen - 1) / seqLen; rep.Samples != want {
		t.Fatalf("%d pieces of %d tokens, want %d", rep.Samples, len(whole), want)
	}
	// The pieces, in order, are the whole text; each position predicts
	// the next token of the whole, across the pieces' edges.
	var toks, targets []int32
	for _, s := range d.Train.Samples {
		if len(s.Tokens) > seqLen {
			t.Fatalf("piece of %d tokens", len(s.Tokens))
		}
		toks = append(toks, s.Tokens...)
		targets = append(targets, s.Targets...)
	}
	if !slices.Equal(toks, whole[:len(toks)]) || len(toks) < len(whole)-1 {
		t.Fatalf("the pieces are not the text's %d tokens", len(whole))
	}
	for i, tg := range targets {
		want := int32(-1)
		if i+1 < len(whole) {
			want = whole[i+1]
		}
		if tg != want {
			t.Fatalf("target %d is %d, want %d", i, tg, want)
		}
	}
	if rep.TrainedTokens != len(whole)-1 {
		t.Errorf("%d trained tokens, want %d", rep.TrainedTokens, len(whole)-1)
	}
}

func TestBOMBlankLinesAndCRLF(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	data := "\xef\xbb\xbf{\"text\": \"one\"}\r\n\r\n   \n{\"text\": \"two\"}\r\n"
	_, rep, err := readString(t, "b.jsonl", data, tok, f, Options{SeqLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != 2 || rep.Samples != 2 {
		t.Errorf("%d lines, %d samples; want 2 and 2", rep.Lines, rep.Samples)
	}
}

func TestSampleDatasetLoads(t *testing.T) {
	for _, preset := range []string{"tiny-llama", "tiny-qwen3", "tiny-gemma3"} {
		tok, f := tinyModel(t, preset)
		d, rep, err := Load("../../assets/datasets/answer-format.jsonl", tok, f, Options{SeqLen: 256})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Lines != 30 || rep.Samples != 30 || rep.Skipped+rep.Truncated+rep.Resegmented+rep.PerTurn != 0 {
			t.Errorf("%s: %s", preset, rep)
		}
		if len(d.Valid.Samples) == 0 || len(d.Train.Sequences) == 0 {
			t.Errorf("%s: no validation or training sequences: %s", preset, rep)
		}
		packed := 0
		for _, set := range []*Set{d.Train, d.Valid} {
			for _, q := range set.Sequences {
				packed += q.Len()
			}
		}
		if packed != rep.Tokens || rep.Padding != (rep.TrainSequences+rep.ValidSequences)*256-rep.Tokens {
			t.Errorf("%s: %d tokens packed of %d", preset, packed, rep.Tokens)
		}
		for _, s := range d.Train.Samples {
			for _, run := range trainedText(t, tok, s) {
				if !strings.HasPrefix(run, "ANSWER: ") {
					t.Errorf("%s: line %d trains on %q, not the answer format", preset, s.Line, run)
				}
			}
		}
	}
}
