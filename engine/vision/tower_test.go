package vision

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/ggufedit"
	"github.com/hearthstudio/hearth/internal/gputest"
	"github.com/hearthstudio/hearth/internal/logitstest"
)

// device is the one GPU device the package's tests share.
var device gputest.Shared

func TestMain(m *testing.M) { device.Main(m) }

// tinyTower writes synth's tiny projector of preset name and opens it.
func tinyTower(t *testing.T, name string) *Tower {
	t.Helper()
	p, _ := synth.ProjectorPresetByName(name)
	path := filepath.Join(t.TempDir(), "mmproj.gguf")
	if err := synth.WriteProjector(path, p, 3); err != nil {
		t.Fatal(err)
	}
	tw, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tw.Close() })
	return tw
}

// testPixels are smooth pixel values in [-1, 1] that differ by channel,
// for an image of w × h pixels.
func testPixels(w, h int) []float32 {
	px := make([]float32, 3*w*h)
	for c := range 3 {
		for y := range h {
			for x := range w {
				px[(c*h+y)*w+x] = float32(math.Sin(float64(3*x+5*y+7*c)/9 + float64(x*y)/50))
			}
		}
	}
	return px
}

// tolTower bounds the GPU tower's tokens against the reference's, relative
// to their range: both are f32 over the same weights, the GPU summing in
// other orders (tiled products, the attention's online softmax). The tiny
// tower measured under 1e-6 on lavapipe; a wrong norm, pool order or
// attention moves the tokens by 1e-2 and more.
const tolTower = 1e-5

// TestGPUTowerMatchesCPU encodes an image on both paths.
func TestGPUTowerMatchesCPU(t *testing.T) {
	tw := tinyTower(t, "tiny-gemma3-vision")
	c := tw.Config
	if c.Tokens() != 16 || c.Patches() != 64 || c.TextHidden != 128 || c.Merge != 2 {
		t.Fatalf("config %+v: want 64 patches pooled to 16 tokens of 128", c)
	}
	gr := Grid{8, 8}
	g := checkGPUTower(t, tw, gr)
	if _, err := g.Encode(testPixels(32, 32)[1:], gr); err == nil {
		t.Error("encoded pixels of the wrong size")
	}
	if _, err := g.Encode(testPixels(32, 64), Grid{8, 16}); err == nil {
		t.Error("Gemma 3's tower encoded a grid other than its square")
	}
}

// TestGemma4GPUTowerMatchesCPU encodes images of Gemma 4's grids, wide and
// tall, with the tiny tower's clamps and standardisation, on both paths.
func TestGemma4GPUTowerMatchesCPU(t *testing.T) {
	tw := tinyTower(t, "tiny-gemma4-vision")
	c := tw.Config
	if c.Projector != "gemma4v" || c.Merge != 3 || c.HeadDim() != 16 || c.PositionSize != 64 || tw.StdBias == nil || !tw.Blocks4[1].Down.clamped() {
		t.Fatalf("config %+v: want the tiny Gemma 4 tower with clamps and standardisation", c)
	}
	var g *GPUTower
	for _, gr := range []Grid{{6, 9}, {12, 3}, {3, 3}} {
		t.Run(fmt.Sprintf("%dx%d", gr.Cols, gr.Rows), func(t *testing.T) {
			if g != nil {
				g.Release()
			}
			g = checkGPUTower(t, tw, gr)
		})
	}
	defer g.Release()
	if _, err := g.Encode(testPixels(16, 16), Grid{4, 4}); err == nil || !strings.Contains(err.Error(), "multiples of the pool") {
		t.Errorf("a grid of 4×4 patches: %v, want the pool's refusal", err)
	}
	if _, err := g.Encode(testPixels(4*66, 12), Grid{3, 66}); err == nil || !strings.Contains(err.Error(), "positions a side") {
		t.Errorf("a grid past the position tables: %v, want their refusal", err)
	}
}

// checkGPUTower encodes test pixels of grid gr on the CPU and twice on the
// GPU (the second run reuses the activations), and returns the GPU tower.
func checkGPUTower(t *testing.T, tw *Tower, gr Grid) *GPUTower {
	t.Helper()
	c := tw.Config
	px := testPixels(gr.Cols*c.PatchSize, gr.Rows*c.PatchSize)
	want, err := tw.EncodeCPU(px, gr)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != c.TokensFor(gr)*c.TextHidden {
		t.Fatalf("the reference gave %d values, want %d tokens of %d", len(want), c.TokensFor(gr), c.TextHidden)
	}
	g, err := NewGPUTower(device.Device(t, "the GPU tower's tests"), tw)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		got, err := g.Encode(px, gr)
		if err != nil {
			g.Release()
			t.Fatal(err)
		}
		if len(got) != len(want) {
			g.Release()
			t.Fatalf("%d values, want %d", len(got), len(want))
		}
		d, at := logitstest.MaxRelDiff(got, want)
		if d > tolTower {
			t.Errorf("run %d: tokens differ from the reference by %.3g of the range at %d", run, d, at)
		}
		t.Logf("run %d: tokens within %.3g of the range of the reference's", run, d)
	}
	return g
}

// TestPatchRows: a patch holds its pixels channel by channel, row by row,
// and patches run along the grid's rows.
func TestPatchRows(t *testing.T) {
	c := Config{ImageSize: 4, PatchSize: 2}
	px := make([]float32, 3*16)
	for i := range px {
		px[i] = float32(i)
	}
	rows, err := c.PatchRows(px, Grid{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	// Patch 1 (top right): channel 0 rows 0-1 columns 2-3, then channels 1, 2.
	want := []float32{2, 3, 6, 7, 18, 19, 22, 23, 34, 35, 38, 39}
	got := rows[12:24]
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("patch 1 is %v, want %v", got, want)
		}
	}
}

// TestOpenRefuses: files that are not Gemma 3 projectors, or whose tensors
// do not match their keys, are refused by name.
func TestOpenRefuses(t *testing.T) {
	p, _ := synth.ProjectorPresetByName("tiny-gemma3-vision")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := synth.WriteProjector(good, p, 1); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "text.gguf")
	tp, _ := synth.PresetByName("tiny-llama")
	if err := synth.WriteFile(text, tp, synth.Options{Quant: "F32", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(text); !errors.Is(err, ErrNotProjector) {
		t.Errorf("a language model: %v, want ErrNotProjector", err)
	}
	for _, tc := range []struct {
		name string
		key  string
		v    gguf.Value
		drop string
		want string
	}{
		{"llava projector", "clip.projector_type", gguf.ValueOf("mlp"), "", `projector type "mlp" is not supported`},
		{"no vision encoder", "clip.has_vision_encoder", gguf.ValueOf(false), "", "no vision encoder"},
		{"patch not dividing", "clip.vision.patch_size", gguf.ValueOf(uint32(5)), "", "not a multiple of the patch size"},
		{"bad merge", "clip.vision.projector.scale_factor", gguf.ValueOf(uint32(3)), "", "does not pool by 3"},
		{"zero std", "clip.vision.image_std", gguf.ArrayOf([]float32{0.5, 0, 0.5}), "", "has a zero"},
		{"two means", "clip.vision.image_mean", gguf.ArrayOf([]float32{0.5, 0.5}), "", "one per RGB channel"},
		{"missing tensor", "", gguf.Value{}, "v.blk.1.attn_k.bias", `"v.blk.1.attn_k.bias" is missing`},
		{"wide ffn", "clip.vision.feed_forward_length", gguf.ValueOf(uint32(100)), "", `"v.blk.0.ffn_up.weight" has shape [48 96]`},
		// A size whose patch count overflows 32 bits matched an empty
		// position table; it is bounded before any count is made.
		{"huge image", "clip.vision.image_size", gguf.ValueOf(uint32(1 << 31)), "", "over the 4096"},
		{"negative eps", "clip.vision.attention.layer_norm_epsilon", gguf.ValueOf(float32(-1)), "", "want a finite number"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".gguf")
		var set map[string]gguf.Value
		if tc.key != "" {
			set = map[string]gguf.Value{tc.key: tc.v}
		}
		ggufedit.Rewrite(t, good, path, set, []string{tc.drop}, nil)
		tw, err := Open(path)
		if err == nil {
			tw.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming the file and saying %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkGPUTower encodes one 896×896 image on the GPU with a projector
// of synth's preset named by HEARTH_VISION_PRESET (tiny-gemma3-vision when
// unset; gemma-3-4b-vision is the real Gemma 3 tower, 4096 patches;
// gemma-4-e2b-vision and gemma-4-31b-vision Gemma 4's, a 48×48-patch
// grid): the time from pixels to the tokens read back. HEARTH_VISION_TILE
// (e.g. 16x16: queries × keys) sets the attention's tile in place of the
// dispatcher's.
//
//	HEARTH_VISION_PRESET=gemma-3-4b-vision go test ./engine/vision -run '^$' -bench GPUTower -benchtime 10x
func BenchmarkGPUTower(b *testing.B) {
	name := os.Getenv("HEARTH_VISION_PRESET")
	if name == "" {
		name = "tiny-gemma3-vision"
	}
	p, ok := synth.ProjectorPresetByName(name)
	if !ok {
		b.Fatalf("no projector preset %q", name)
	}
	path := filepath.Join(b.TempDir(), "mmproj.gguf")
	if err := synth.WriteProjector(path, p, 1); err != nil {
		b.Fatal(err)
	}
	tw, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer tw.Close()
	g, err := NewGPUTower(device.Device(b, "the GPU tower's benchmark"), tw)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Release()
	if s := os.Getenv("HEARTH_VISION_TILE"); s != "" {
		if _, err := fmt.Sscanf(s, "%dx%d", &g.attTile.BQ, &g.attTile.BK); err != nil {
			b.Fatalf("HEARTH_VISION_TILE=%q: want queries x keys, e.g. 16x16", s)
		}
	}
	gr, err := tw.Config.GridFor(896, 896)
	if err != nil {
		b.Fatal(err)
	}
	px := testPixels(gr.Cols*tw.Config.PatchSize, gr.Rows*tw.Config.PatchSize)
	if _, err := g.Encode(px, gr); err != nil { // compiles the kernels
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := g.Encode(px, gr); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/image")
}

// TestOpenRefusesGemma4: Gemma 4 projector files whose clamps, heads,
// standardisation or tensors are wrong are refused by name.
func TestOpenRefusesGemma4(t *testing.T) {
	p, _ := synth.ProjectorPresetByName("tiny-gemma4-vision")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := synth.WriteProjector(good, p, 1); err != nil {
		t.Fatal(err)
	}
	// scalar replaces the one-value tensor name with v.
	scalar := func(name string, v float32) []ggufedit.Tensor {
		return []ggufedit.Tensor{{Name: name, Type: gguf.TypeF32, Shape: []uint64{1}, Data: gpu.F32Bytes([]float32{v})}}
	}
	for _, tc := range []struct {
		name string
		key  string
		v    gguf.Value
		drop string
		add  []ggufedit.Tensor
		want string
	}{
		{"heads 2 wide", "clip.vision.attention.head_count", gguf.ValueOf(uint32(16)), "", nil, "multiple of 4 wide"},
		{"zero pool", "clip.vision.projector.scale_factor", gguf.ValueOf(uint32(0)), "", nil, "want a positive pool side"},
		{"std bias alone", "", gguf.Value{}, "v.std_scale", nil, `"v.std_scale" is missing`},
		{"missing post norm", "", gguf.Value{}, "v.blk.1.ffn_post_norm.weight", nil, `"v.blk.1.ffn_post_norm.weight" is missing`},
		{"reversed clamp", "", gguf.Value{}, "v.blk.0.ffn_up.input_min", scalar("v.blk.0.ffn_up.input_min", 10), "v.blk.0.ffn_up: clamps"},
		{"NaN clamp", "", gguf.Value{}, "v.blk.1.attn_k.output_max", scalar("v.blk.1.attn_k.output_max", float32(math.NaN())), `"v.blk.1.attn_k.output_max" is NaN`},
		{"Ollama's packed clamps", "", gguf.Value{}, "", scalar("v.clamp_data", 0), `"v.clamp_data"`},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".gguf")
		var set map[string]gguf.Value
		if tc.key != "" {
			set = map[string]gguf.Value{tc.key: tc.v}
		}
		ggufedit.Rewrite(t, good, path, set, []string{tc.drop}, tc.add)
		tw, err := Open(path)
		if err == nil {
			tw.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming the file and saying %q", tc.name, err, tc.want)
		}
	}
}
