package training

// The fixtures of testdata/peft/quant/NAME/ (expected.json, adapter/,
// grads/, stepped/) were made on the H200 host by make_fixtures.py --base
// from the dequantized folders peft_quant_test.go writes; the log is
// testdata/peft/make_fixtures_quant.log.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/model"
)

// TestMatchesPEFTQuantizedBase is TestMatchesPEFT on quantized bases:
// PyTorch computed on the dequantized blocks (see this file's comment), the
// CPU and GPU steps on the blocks themselves. The tolerances and their
// reasons are TestMatchesPEFT's; the widened Llama's sums run over up to
// 512 terms rather than 128, which moves the f32 worst case to
// (512+4)·2⁻²⁴ ≈ 3e-5 of Σ|terms|, still a third of the 1e-4 allowed.
func TestMatchesPEFTQuantizedBase(t *testing.T) {
	for _, c := range quantBases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "peft", "quant", c.name)
			raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
			if err != nil {
				t.Fatalf("the fixture is part of the test; make_fixtures.py --base makes it (see peft_quant_test.go): %v", err)
			}
			var e peftExpected
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			if e.Family != c.name {
				t.Fatalf("%s/expected.json is of %q", dir, e.Family)
			}
			_, path := quantizedBase(t, c)
			checkManifest(t, c, dir, path)
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			matchPEFT(t, dir, m, &e)
		})
	}
}

// checkManifest fails when the quantized base is not the one the fixture
// was made from (base.json).
func checkManifest(t *testing.T, c quantBase, dir, path string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "base.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want quantManifest
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	got := manifestOf(t, c, path)
	if !slices.Equal(got.Tensors, want.Tensors) {
		for i := range min(len(got.Tensors), len(want.Tensors)) {
			if g, w := got.Tensors[i], want.Tensors[i]; g != w {
				t.Fatalf("%s is %s %s…, the fixture's base had %s %s %s…: the import or the quantizer changed; remake the fixture (see peft_quant_test.go)",
					g.Name, g.Type, g.SHA256[:12], w.Name, w.Type, w.SHA256[:12])
			}
		}
		t.Fatalf("%d tensors, the fixture's base had %d", len(got.Tensors), len(want.Tensors))
	}
}
