package vocoder

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// torchFixture is testdata/torch/kokoro-tiny.json, written by
// testdata/make_fixture.py from the model PyTorch built and saved.
type torchFixture struct {
	Torch   string `json:"torch"`
	Tensors map[string]struct {
		Shape  []int   `json:"shape"`
		Sum    float64 `json:"sum"` // of the folded weight, in float64
		AbsSum float64 `json:"abs_sum"`
	} `json:"tensors"`
}

// checkTorchFixture opens the PyTorch-written checkpoint and its
// safetensors twin and compares every tensor's shape and sums with what
// torch computed (its own weight-norm folding included).
func checkTorchFixture(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "kokoro-tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx torchFixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "config.json")); err != nil {
		t.Error(err)
	}
	for _, file := range []string{"kokoro-tiny.pth", "kokoro-tiny.safetensors"} {
		w, err := OpenWeights(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		names := w.Names()
		for name, want := range fx.Tensors {
			if !slices.Contains(names, name) {
				t.Errorf("%s: %s missing", file, name)
				continue
			}
			got, err := w.Tensor(name, want.Shape...)
			if err != nil {
				t.Error(err)
				continue
			}
			var sum, abs float64
			for _, x := range got.Data {
				sum += float64(x)
				abs += math.Abs(float64(x))
			}
			// f32 values summed in f64 on both sides; the folding
			// rounds once per element (torch in f32, here in f64).
			tol := 1e-5 * (want.AbsSum + 1)
			if math.Abs(sum-want.Sum) > tol || math.Abs(abs-want.AbsSum) > tol {
				t.Errorf("%s: %s sums %g / %g, torch %g / %g", file, name, sum, abs, want.Sum, want.AbsSum)
			}
		}
		if len(names) != len(fx.Tensors) {
			t.Errorf("%s: %d tensors, torch saved %d", file, len(names), len(fx.Tensors))
		}
	}
}
