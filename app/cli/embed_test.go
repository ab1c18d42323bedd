package cli

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestEmbedCommand: hearth embed prints a unit vector a text, the same in
// JSON and as text, on both backends (the GPU with --f32-activations
// within the backends' f32 difference; by default, on 8-bit activations
// where the device takes dot4I8Packed, within their quantization), and
// takes a text from standard input; a text past the context is refused
// unless --truncate.
func TestEmbedCommand(t *testing.T) {
	m := tinyModel(t, "tiny-qwen3")
	var vecs [3][][]float32
	for i, args := range [][]string{{"--backend", "cpu"}, {"--backend", "gpu", "--f32-activations"}, {"--backend", "gpu"}} {
		backend := strings.Join(args, " ")
		out, log, err := runModelCmd(t, "Rayleigh scattering.", append([]string{"embed", "-m", m, "--json", "Why is the sky blue?", "-"}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", backend, err, log)
		}
		var r embedReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s: %v\n%s", backend, err, out)
		}
		if len(r.Embeddings) != 2 || r.Tokens == 0 || r.Model != m {
			t.Fatalf("%s: %+v", backend, r)
		}
		for j, v := range r.Embeddings {
			var n float64
			for _, x := range v {
				n += float64(x) * float64(x)
			}
			if len(v) != 128 || math.Abs(math.Sqrt(n)-1) > 1e-5 {
				t.Errorf("%s: vector %d: %d values of norm %v", backend, j, len(v), math.Sqrt(n))
			}
		}
		vecs[i] = r.Embeddings
	}
	// The GPU's f32 sums round otherwise than the CPU's: about 1e-6 on
	// values near 0.1; 1e-4 still catches a vector of another text. 8-bit
	// activations move each product's input by up to half a step, ~0.7%
	// of its rms (engine/model's tolQ8), which reaches the unit vector's
	// values (rms 1/√128 ≈ 0.09) as a few 1e-3 after the layers (2.5e-3
	// measured on lavapipe): 0.01 leaves a factor 4 and still catches
	// another text's vector, whose values differ by ~0.1.
	for j := range vecs[0] {
		for k := range vecs[0][j] {
			if d := math.Abs(float64(vecs[0][j][k] - vecs[1][j][k])); d > 1e-4 {
				t.Fatalf("vector %d value %d: cpu %v, gpu --f32-activations %v", j, k, vecs[0][j][k], vecs[1][j][k])
			}
			if d := math.Abs(float64(vecs[0][j][k] - vecs[2][j][k])); d > 0.01 {
				t.Fatalf("vector %d value %d: cpu %v, gpu %v", j, k, vecs[0][j][k], vecs[2][j][k])
			}
		}
	}

	// Text: one line a vector, the same numbers as the JSON.
	out, _, err := runModelCmd(t, "", "embed", "-m", m, "--backend", "cpu", "Why is the sky blue?")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(strings.TrimSpace(out))
	if strings.Count(strings.TrimSpace(out), "\n") != 0 || len(fields) != 128 {
		t.Fatalf("text output: %d lines, %d values", strings.Count(out, "\n"), len(fields))
	}
	for k, f := range fields {
		x, err := strconv.ParseFloat(f, 32)
		if err != nil || float32(x) != vecs[0][0][k] {
			t.Fatalf("value %d: %q, want %v", k, f, vecs[0][0][k])
		}
	}

	long := strings.Repeat("sky ", 200)
	if _, _, err := runModelCmd(t, "", "embed", "-m", m, "--backend", "cpu", "--ctx", "32", long); err == nil || !strings.Contains(err.Error(), "context") {
		t.Errorf("a text past the context: %v, want a refusal naming the context", err)
	}
	if _, _, err := runModelCmd(t, "", "embed", "-m", m, "--backend", "cpu", "--ctx", "32", "--truncate", long); err != nil {
		t.Errorf("--truncate: %v", err)
	}
	if _, _, err := runModelCmd(t, "", "embed", "-m", m); err == nil {
		t.Error("no text was accepted")
	}
	if _, _, err := runModelCmd(t, "sky", "embed", "-m", m, "--backend", "cpu", "-", "-"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("- given twice: %v, want a refusal", err)
	}
}
