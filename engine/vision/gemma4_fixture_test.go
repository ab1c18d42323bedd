package vision

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/internal/logitstest"
)

// gemma4Fixture is testdata/gemma4/expected.json as the tower's tests read
// it: what transformers' Gemma4Processor and Gemma4ForConditionalGeneration
// computed for four PNGs (make_fixture.py; README.md there).
type gemma4Fixture struct {
	Config struct {
		MaxSoftTokens int `json:"max_soft_tokens"`
	} `json:"config"`
	Processor struct {
		Backend string `json:"backend"`
	} `json:"processor"`
	Images []struct {
		File    string `json:"file"`
		Width   int    `json:"width"`
		Height  int    `json:"height"`
		Resized struct {
			Height, Width int
		} `json:"resized"`
		Grid struct {
			Rows, Cols int
		} `json:"grid"`
		Tokens int `json:"num_soft_tokens"`
		// Levels are the resized image's uint8 levels in the processor's
		// patch order: patches along the grid's rows, each row by row,
		// pixel by pixel, channel by channel.
		Levels        []int       `json:"pixel_levels"`
		Pooled        [][]float32 `json:"pooled"`
		ImageFeatures [][]float32 `json:"image_features"`
		VisionHidden  [][]float32 `json:"vision_hidden"` // the first image's
	} `json:"images"`
}

// loadGemma4Fixture reads the fixture and opens its mmproj file, as
// llama.cpp's converter wrote it from the same checkpoint, with the
// fixture's token budget.
func loadGemma4Fixture(t *testing.T) (*gemma4Fixture, *Tower) {
	var f gemma4Fixture
	tw := readFixture(t, "gemma4", &f)
	if err := tw.SetBudget(f.Config.MaxSoftTokens); err != nil {
		t.Fatal(err)
	}
	return &f, tw
}

// gemma4Pixels are the tower's pixels (channels first, rescaled as
// transformers does: the level times float32(1/255)) from the fixture's
// levels in the processor's patch order, for grid g of patch side p.
func gemma4Pixels(levels []int, g Grid, p int) []float32 {
	w, h := g.Cols*p, g.Rows*p
	px := make([]float32, 3*w*h)
	scale := float32(1.0 / 255)
	i := 0
	for gy := range g.Rows {
		for gx := range g.Cols {
			for y := range p {
				for x := range p {
					for ch := range 3 {
						px[(ch*h+gy*p+y)*w+gx*p+x] = float32(levels[i]) * scale
						i++
					}
				}
			}
		}
	}
	return px
}

// tolGemma4Hidden bounds Gemma 4's encoder output against transformers',
// relative to its range: the weights are the same f16 values and the norm
// gains the same f32 (Gemma 4's are plain, with no 1 + w for the converter
// to round), so only f32 rounding through the blocks remains, in other
// orders of summation. Measured: 4.5e-7. QuickGELU in the MLP (llama.cpp's
// fork, Ollama) moves the features by 0.018 and more, dropping the clamps
// by 0.49 (make_fixture.py's variants).
const tolGemma4Hidden = 1e-5

// tolGemma4Features bounds the image features likewise; the pool, the
// standardisation and the projector add their f32 rounding. Measured:
// 1.7e-7 on the CPU, 2.2e-7 on the GPU (lavapipe).
const tolGemma4Features = 1e-5

// TestGemma4TowerMatchesTransformers: the fixture's PNGs preprocessed as
// Gemma4Processor does (grid, resize and levels), and its levels through
// the mmproj's tower on the CPU reference and the GPU, against
// transformers' encoder output and image features.
func TestGemma4TowerMatchesTransformers(t *testing.T) {
	f, tw := loadGemma4Fixture(t)
	c := tw.Config
	if c.Projector != "gemma4v" || c.PatchSize != 4 || c.Merge != 3 || c.TextHidden != 64 || tw.StdBias == nil {
		t.Fatalf("mmproj config %+v: want Gemma 4's tiny tower of 4-pixel patches pooled by 3 into tokens of 64", c)
	}
	if f.Processor.Backend != "torchvision" {
		t.Fatalf("the fixture's processor ran the %s backend; PreprocessFor follows torchvision's", f.Processor.Backend)
	}
	g, err := NewGPUTower(device.Device(t, "the GPU tower's tests"), tw)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	for _, im := range f.Images {
		t.Run(im.File, func(t *testing.T) {
			img, err := DecodeFile(filepath.Join("testdata", "gemma4", im.File))
			if err != nil {
				t.Fatal(err)
			}
			gr, err := c.GridFor(im.Width, im.Height)
			if err != nil {
				t.Fatal(err)
			}
			if gr != (Grid{im.Grid.Rows, im.Grid.Cols}) || c.TokensFor(gr) != im.Tokens {
				t.Fatalf("a %d×%d image: grid %+v of %d tokens, the processor's %+v of %d", im.Width, im.Height, gr, c.TokensFor(gr), im.Grid, im.Tokens)
			}
			pre := c.PreprocessFor(gr)
			if pre.Width != im.Resized.Width || pre.Height != im.Resized.Height {
				t.Fatalf("resized to %d×%d, the processor to %d×%d", pre.Width, pre.Height, im.Resized.Width, im.Resized.Height)
			}
			px, err := pre.Pixels(img)
			if err != nil {
				t.Fatal(err)
			}
			// The same uint8 levels, to the bit.
			want := gemma4Pixels(im.Levels, gr, c.PatchSize)
			off := 0
			for i, v := range px {
				if math.Round(float64(v)*255) != math.Round(float64(want[i])*255) {
					off++
				}
			}
			if off > 0 {
				t.Errorf("%d of %d resized levels differ from the processor's", off, len(px))
			}

			// The tower on transformers' own levels.
			if im.VisionHidden != nil {
				hidden, err := tw.HiddenCPU(want, gr)
				if err != nil {
					t.Fatal(err)
				}
				d, at := logitstest.MaxRelDiff(hidden, slices.Concat(im.VisionHidden...))
				t.Logf("encoder output within %.3g of the range", d)
				if d > tolGemma4Hidden {
					t.Errorf("the encoder's output differs by %.3g of the range at %d", d, at)
				}
			}
			checkFeatures(t, tw, g, want, gr, slices.Concat(im.ImageFeatures...), tolGemma4Features)
		})
	}
}
