package vision

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/internal/logitstest"
)

// gemma3Fixture is testdata/gemma3/expected.json as the tower's tests read
// it: what transformers' Gemma3Processor and Gemma3ForConditionalGeneration
// computed for three PNGs (make_fixture.py; README.md there).
type gemma3Fixture struct {
	Processor struct {
		Backend string `json:"backend"`
		Size    struct{ Height, Width int }
		Mean    []float32 `json:"image_mean"`
		Std     []float32 `json:"image_std"`
	} `json:"processor"`
	Images []struct {
		File          string      `json:"file"`
		PixelValues   []float32   `json:"pixel_values"`
		ImageFeatures [][]float32 `json:"image_features"` // tokens × TextHidden
		VisionHidden  [][]float32 `json:"vision_hidden"`  // patches × Hidden, the first image's

	} `json:"images"`
}

// loadGemma3Fixture reads the fixture and opens its mmproj file, as
// llama.cpp's converter wrote it from the same checkpoint.
func loadGemma3Fixture(t *testing.T) (*gemma3Fixture, *Tower) {
	var f gemma3Fixture
	return &f, readFixture(t, "gemma3", &f)
}

// readFixture reads testdata/<name>/expected.json into f and opens the
// mmproj file beside it, which the test's cleanup closes.
func readFixture(t *testing.T, name string, f any) *Tower {
	t.Helper()
	dir := filepath.Join("testdata", name)
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, f); err != nil {
		t.Fatal(err)
	}
	tw, err := Open(filepath.Join(dir, "mmproj.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tw.Close() })
	return tw
}

// tolPixel bounds a preprocessed value against transformers': the same
// uint8 levels (torchvision's uint8 resize, which the fixture's host ran,
// reproduced to the bit), normalised by the same float32 operations. The
// float resize would miss by one level (2/255) on 15% of the resized
// images' values, PIL's on 0.6%.
const tolPixel = 1e-6

// tolFeatures bounds the tower's tokens against transformers', relative to
// their range. The mmproj's RMSNorm gain is 1 + w rounded to f16 by the
// converter (it adds in the checkpoint's f16), where transformers adds in
// f32: up to 2^-11 of each gain. The rest is f32 rounding through the
// blocks (the hidden states agree to tolHidden). Measured: 1.8e-4 on both
// paths. A wrong pool order, norm or projection moves the tokens by 1e-1.
const tolFeatures = 1e-3

// checkFeatures encodes pixels of grid gr on the CPU reference and on the
// GPU tower g, and holds both to want within tol of its range.
func checkFeatures(t *testing.T, tw *Tower, g *GPUTower, pixels []float32, gr Grid, want []float32, tol float64) {
	t.Helper()
	cpu, err := tw.EncodeCPU(pixels, gr)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := g.Encode(pixels, gr)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		name string
		got  []float32
	}{{"CPU", cpu}, {"GPU", gpu}} {
		d, at := logitstest.MaxRelDiff(r.got, want)
		t.Logf("%s features within %.3g of the range", r.name, d)
		if d > tol {
			t.Errorf("%s: image features differ by %.3g of the range at %d", r.name, d, at)
		}
	}
}

// tolHidden bounds the encoder's last hidden state (before the projector's
// norm) against transformers', relative to its range: f32 rounding alone,
// the weights being exact f16 values in both.
const tolHidden = 1e-5

// TestGemma3TowerMatchesTransformers: the fixture's PNGs preprocessed as
// Gemma3Processor does, and its pixel_values through the mmproj's tower on
// the CPU reference and the GPU, against transformers' pixel_values,
// vision tower output and image features.
func TestGemma3TowerMatchesTransformers(t *testing.T) {
	f, tw := loadGemma3Fixture(t)
	c := tw.Config
	if c.ImageSize != f.Processor.Size.Height || c.Tokens() != 16 || c.Merge != 2 || c.TextHidden != 64 {
		t.Fatalf("mmproj config %+v: want 32-pixel images pooled by 2 into 16 tokens of 64", c)
	}
	for ch := range 3 {
		if c.Mean[ch] != f.Processor.Mean[ch] || c.Std[ch] != f.Processor.Std[ch] {
			t.Fatalf("mmproj mean %v std %v, the processor's %v %v", c.Mean, c.Std, f.Processor.Mean, f.Processor.Std)
		}
	}
	if f.Processor.Backend != "torchvision" {
		t.Fatalf("the fixture's processor ran the %s backend; Preprocess's default follows torchvision's", f.Processor.Backend)
	}
	g, err := NewGPUTower(device.Device(t, "the GPU tower's tests"), tw)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	square := Grid{tw.Config.Side(), tw.Config.Side()}
	for _, im := range f.Images {
		t.Run(im.File, func(t *testing.T) {
			img, err := DecodeFile(filepath.Join("testdata", "gemma3", im.File))
			if err != nil {
				t.Fatal(err)
			}
			px, err := c.Preprocess().Pixels(img)
			if err != nil {
				t.Fatal(err)
			}
			worst, off := 0.0, 0
			for i, v := range px {
				d := math.Abs(float64(v - im.PixelValues[i]))
				worst = max(worst, d)
				if d > 1e-6 {
					off++
				}
			}
			t.Logf("pixels: %d of %d differ, by at most %.3g", off, len(px), worst)
			if worst > tolPixel {
				t.Errorf("pixels differ from transformers' by %.3g", worst)
			}

			// The tower on transformers' own pixels.
			if im.VisionHidden != nil {
				hidden, err := tw.HiddenCPU(im.PixelValues, square)
				if err != nil {
					t.Fatal(err)
				}
				if d, at := logitstest.MaxRelDiff(hidden, slices.Concat(im.VisionHidden...)); d > tolHidden {
					t.Errorf("the tower's hidden state differs by %.3g of the range at %d", d, at)
				}
			}
			checkFeatures(t, tw, g, im.PixelValues, square, slices.Concat(im.ImageFeatures...), tolFeatures)
		})
	}
}
