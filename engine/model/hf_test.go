package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/internal/logitstest"
)

// hfExpected is a fixture's expected.json, written by
// testdata/hf/make_fixtures.py from Hugging Face transformers.
type hfExpected struct {
	Family       string  `json:"family"`
	PromptIDs    []int32 `json:"prompt_ids"`
	LogitsShape  [2]int  `json:"logits_shape"`
	GreedyIDs    []int32 `json:"greedy_ids"`
	Transformers string  `json:"transformers_version"`
	// GreedyLogitsShape is [len(prompt)+len(greedy)-1, vocab]: the logits
	// of the prompt followed by the greedy tokens, every position.
	GreedyLogitsShape [2]int `json:"greedy_logits_shape"`
}

// hfTol bounds Hearth-vs-transformers logit differences relative to the
// logit range; see TestMatchesTransformers.
const hfTol = 1e-5

// hfTolUnscaled is hfTol for Gemma 4, which scores q·k unscaled (its q and k
// are RMS-normalised): sharp attention turns both sides' f32 rounding into
// larger logit differences. Measured on the gemma4 fixture: 1.7e-5 (CPU)
// and 1.5e-5 (GPU) of the range, scattered over the positions that attend
// over others, while Hearth's CPU and GPU agree to 5e-6 and position 0
// (no mixing of positions: the per-layer embeddings, norms, scales and
// feed-forwards alone) to 2.7e-7. transformers' own forward of the prompt
// and of the whole sequence differ by 2.9e-5 in logits (make_fixtures.log),
// where the other families' differ by ~1e-6. 5e-5 keeps a 3x margin; a
// wrong mask, rotation or shared cache moves logits by 1e-2 and up.
const hfTolUnscaled = 5e-5

// hfTolAltUp is hfTolUnscaled for Gemma 3n, whose AltUp routers (tanh of
// a projection, feeding coefficients that mix the four streams at every
// layer) add to the unscaled attention's sensitivity at some positions:
// on the gemma3n fixture position 27 is off by 2.0e-5 of the range on the
// CPU and by 3.5e-5 to 9.1e-5 on the GPU as the batching alone changes
// (one chain of 64 tokens, chains of 16, one token at a time), while the
// other positions stay within 1.5e-5 and Hearth's decode steps within
// 5e-5. 2e-4 keeps a 2x margin; leaving out any of AltUp's parts, LAuReL,
// the sparsity or the per-layer embeddings moves logits by 15 to 21 (the
// fixture's checks, about 0.7 of the range).
const hfTolAltUp = 2e-4

// hfTolFor is the Hearth-vs-transformers tolerance of m.
func hfTolFor(m *Model) float64 {
	switch {
	case m.Config.AltUp > 0:
		return hfTolAltUp
	case m.Config.AttnScale == 1 && m.Config.VNorm:
		return hfTolUnscaled
	}
	return hfTol
}

var readF32File = logitstest.ReadF32

// TestMatchesTransformers imports each tiny Hugging Face model (f16 weights,
// saved by transformers) with Hearth's importer and checks both backends
// against transformers' own float32 logits at every prompt position (the
// prompts are longer than the sliding windows), then the greedy
// continuation token for token through a session with its KV cache, and
// the logits of every decode step (one token at a time over the cache)
// against transformers' logits of the whole sequence.
func TestMatchesTransformers(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "hf", "*", "expected.json"))
	if err != nil || len(dirs) < 15 {
		t.Fatalf("want the 15 fixtures of testdata/hf (make_fixtures.py), found %d (%v)", len(dirs), err)
	}
	for _, exp := range dirs {
		dir := filepath.Dir(exp)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			e, m, want, runners := hfFixture(t, dir)
			for _, r := range runners {
				got, err := r.Forward(e.PromptIDs, 0, Output{All: true})
				if err != nil {
					t.Fatal(err)
				}
				// transformers and Hearth both compute in f32 from the
				// same f16 weights, in different orders (torch's blocked
				// GEMMs, Hearth's row dots and GPU trees). Measured: at
				// most 6.9e-7 of the logit range over the prompts and
				// 1.3e-6 over the decode steps (both backends, all eight
				// families); 1e-5 keeps an 8x margin, ten times tighter
				// than the 1e-4.
				if d, at := maxRelDiff(got.Logits, want); d > hfTolFor(m) {
					t.Errorf("%T: logits differ from transformers by %.3g of the range at position %d token %d", r, d, at/m.Config.Vocab, at%m.Config.Vocab)
				}
				ids, _ := collect(t, NewSession(r), greedyRequest(e.PromptIDs, len(e.GreedyIDs)))
				if !slices.Equal(ids, e.GreedyIDs) {
					t.Errorf("%T: greedy %v, transformers %v", r, ids, e.GreedyIDs)
				}
				if e.GreedyLogitsShape[0] > 0 {
					checkDecodeSteps(t, r, e, filepath.Join(dir, "greedy_logits.bin"))
				}
			}
		})
	}
}

// hfFixture imports the transformers fixture in dir and returns its
// expectations, the model, transformers' logits of the prompt, and a CPU
// and a GPU runner of it (closed with the test).
func hfFixture(t *testing.T, dir string) (hfExpected, *Model, []float32, []Runner) {
	t.Helper()
	var e hfExpected
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	want := readF32File(t, filepath.Join(dir, "logits.bin"), e.LogitsShape[0]*e.LogitsShape[1])
	path := filepath.Join(t.TempDir(), e.Family+".gguf")
	if err := hfimport.Import(dir, path, hfimport.Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if m.Config.Vocab != e.LogitsShape[1] {
		t.Fatalf("vocab %d, transformers %d", m.Config.Vocab, e.LogitsShape[1])
	}
	cpu, err := NewCPU(m, 64)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGPU(dev, m, GPUOptions{Context: 64, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return e, m, want, []Runner{cpu, g}
}

// checkDecodeSteps feeds the greedy tokens one at a time after the prompt
// and compares each step's logits with transformers' row for that position.
func checkDecodeSteps(t *testing.T, r Runner, e hfExpected, path string) {
	t.Helper()
	v := e.GreedyLogitsShape[1]
	want := readF32File(t, path, e.GreedyLogitsShape[0]*v)
	np := len(e.PromptIDs)
	tol := hfTolFor(r.Model())
	if _, err := r.Forward(e.PromptIDs, 0, Output{}); err != nil {
		t.Fatal(err)
	}
	for i, id := range e.GreedyIDs[:len(e.GreedyIDs)-1] {
		got, err := r.Forward([]int32{id}, np+i, Output{})
		if err != nil {
			t.Fatal(err)
		}
		row := want[(np+i)*v : (np+i+1)*v]
		if d, at := maxRelDiff(got.Logits, row); d > tol {
			t.Errorf("%T: decode step %d (position %d) differs from transformers by %.3g of the range at token %d", r, i, np+i, d, at)
		}
	}
}
