package kokoro

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/pth/pthtest"
)

// The oracle: testdata/styletts2, made by testdata/make_style_fixture.py
// with StyleTTS2's own StyleEncoder (dim_in 16, max_conv_dim 48, random
// spectral-norm weights saved by torch.save in the checkpoint's layout)
// on two synthetic vowels, 89 frames and 65 (the fewest the encoder
// takes).
type styleFixture struct {
	Torch     string `json:"torch"`
	MelSource string `json:"mel_source"`
	DimIn     int    `json:"dim_in"`
	MaxConv   int    `json:"max_conv_dim"`
	Cases     map[string]struct {
		Samples, Frames int
	} `json:"cases"`
	F64Err map[string]float64 `json:"f64_err"`
	Arrays map[string]struct {
		Shape  []int `json:"shape"`
		Offset int   `json:"offset"`
	} `json:"arrays"`
	bin []byte
}

const styleFixtureDir = "testdata/styletts2"

func loadStyleFixture(t *testing.T) *styleFixture {
	t.Helper()
	js, err := os.ReadFile(filepath.Join(styleFixtureDir, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := &styleFixture{}
	if err := json.Unmarshal(js, f); err != nil {
		t.Fatal(err)
	}
	if f.bin, err = os.ReadFile(filepath.Join(styleFixtureDir, "fixture.bin")); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != 2 {
		t.Fatalf("fixture has cases %v, want vowel and short", f.Cases)
	}
	return f
}

func (f *styleFixture) array(t *testing.T, name string) []float32 {
	t.Helper()
	a, ok := f.Arrays[name]
	if !ok {
		t.Fatalf("fixture has no array %q", name)
	}
	return fixtureF32s(f.bin, a.Offset, a.Shape)
}

// maxDiff is the largest |a-b| and the largest |b|.
func maxDiff(t *testing.T, what string, a, b []float32) (diff, scale float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values, want %d", what, len(a), len(b))
	}
	for i := range a {
		diff = math.Max(diff, math.Abs(float64(a[i])-float64(b[i])))
		scale = math.Max(scale, math.Abs(float64(b[i])))
	}
	return diff, scale
}

func loadFixtureEncoder(t *testing.T) *StyleEncoder {
	t.Helper()
	e, err := LoadStyleEncoder(filepath.Join(styleFixtureDir, "encoder.pth"))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLoadStyleEncoderFixture reads the file torch.save wrote: the
// {'net': {...}} nesting, the module. prefix, the optimizer and other
// modules passed over, and the widths taken from the shapes.
func TestLoadStyleEncoderFixture(t *testing.T) {
	f := loadStyleFixture(t)
	e := loadFixtureEncoder(t)
	for _, n := range []*StyleNet{e.Acoustic, e.Prosodic} {
		if n.Stem.Out != f.DimIn || len(n.Blocks) != 4 {
			t.Fatalf("%s: stem %d channels, %d blocks; want %d, 4", n.Name, n.Stem.Out, len(n.Blocks), f.DimIn)
		}
		c := f.DimIn
		for i, b := range n.Blocks {
			out := min(2*c, f.MaxConv)
			if b.In != c || b.Out != out || (b.Shortcut != nil) != (c != out) {
				t.Errorf("%s block %d: %d → %d (shortcut %v), want %d → %d", n.Name, i, b.In, b.Out, b.Shortcut != nil, c, out)
			}
			c = out
		}
		if n.Out.In != c || n.Out.Out != 128 {
			t.Errorf("%s: unshared %d → %d", n.Name, n.Out.In, n.Out.Out)
		}
	}
}

// TestLogMelMatchesTorch: LogMel against the fixture's float64 mel and
// the oracle's own (torchaudio's, or torch.stft's, in float32).
func TestLogMelMatchesTorch(t *testing.T) {
	f := loadStyleFixture(t)
	for name, c := range f.Cases {
		mel, frames, err := LogMel(f.array(t, name+".wave"))
		if err != nil {
			t.Fatal(err)
		}
		if frames != c.Frames {
			t.Fatalf("%s: %d frames, want %d", name, frames, c.Frames)
		}
		d64, _ := maxDiff(t, name+" mel", mel, f.array(t, name+".mel@f64"))
		d32, _ := maxDiff(t, name+" mel", mel, f.array(t, name+".mel"))
		t.Logf("%s (%s): mel off by %.3g from the f64 run, %.3g from the f32 one (its own f64 error %.3g)", name, f.MelSource, d64, d32, f.F64Err[name+".mel"])
		// Against the float64 run: both float64, the window f32 here and
		// f64 there (1e-7 relative in the power, 2.5e-8 after log/4), and
		// the two roundings to f32 of values up to 3 (2.4e-7 each).
		if d64 > 1e-6 {
			t.Errorf("%s: LogMel is %g from the float64 oracle", name, d64)
		}
		// Against the f32 oracle: its own rounding, recorded as f64_err
		// (3e-6), twice over, plus the f32 steps above.
		if tol := 2*f.F64Err[name+".mel"] + 1e-6; d32 > tol {
			t.Errorf("%s: LogMel is %g from the f32 oracle (tolerance %g)", name, d32, tol)
		}
	}
}

// styleTol is the tolerance of an encoder output or activation against the
// torch f32 oracle: the oracle's own rounding (its distance to the float64
// run, f64_err, ~1e-7 of values ~0.2–3) counted four times, for ours and
// the compounding of f32 storage between layers, plus 1e-6 of the scale
// for the GPU's f32 sums of up to 48·25 products. A wrong σ, a missing
// repeated column or a swapped shortcut moves outputs by 1e-3 or more.
func styleTol(f *styleFixture, key string, scale float64) float64 {
	return 4*f.F64Err[key] + 1e-6*scale + 1e-7
}

func TestStyleEncoderMatchesTorch(t *testing.T) {
	f := loadStyleFixture(t)
	e := loadFixtureEncoder(t)
	for name, c := range f.Cases {
		mel := f.array(t, name+".mel")
		for _, n := range []*StyleNet{e.Acoustic, e.Prosodic} {
			got, err := n.forward(mel, c.Frames, func(layer string, x []float32) {
				key := fmt.Sprintf("%s.%s.%s", name, n.Name, layer)
				if _, ok := f.Arrays[key]; !ok {
					return // the fixture keeps the first case's activations only
				}
				d, s := maxDiff(t, key, x, f.array(t, key))
				if tol := styleTol(f, key, s); d > tol {
					t.Errorf("%s: off by %g (scale %g, tolerance %g)", key, d, s, tol)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			key := name + "." + n.Name
			d, s := maxDiff(t, key, got, f.array(t, key))
			t.Logf("%s: off by %.3g of %.3g (torch's f32 vs f64: %.3g)", key, d, s, f.F64Err[key])
			if tol := styleTol(f, key, s); d > tol {
				t.Errorf("%s: off by %g (scale %g, tolerance %g)", key, d, s, tol)
			}
		}
		refS, err := e.Style(mel, c.Frames)
		if err != nil {
			t.Fatal(err)
		}
		want := f.array(t, name+".ref_s")
		d, s := maxDiff(t, name+".ref_s", refS, want)
		if tol := styleTol(f, name+".style_encoder", s) + styleTol(f, name+".predictor_encoder", s); d > tol {
			t.Errorf("%s ref_s: off by %g (tolerance %g)", name, d, tol)
		}
	}
}

func TestStyleEncoderGPUMatchesTorch(t *testing.T) {
	f := loadStyleFixture(t)
	e := loadFixtureEncoder(t)
	g, err := NewGPUStyleEncoder(testDevice(t), e)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	for name, c := range f.Cases {
		got, err := g.Style(f.array(t, name+".mel"), c.Frames)
		if err != nil {
			t.Fatal(err)
		}
		want := f.array(t, name+".ref_s")
		d, s := maxDiff(t, name+" ref_s", got, want)
		t.Logf("%s: GPU ref_s off by %.3g of %.3g", name, d, s)
		if tol := styleTol(f, name+".style_encoder", s) + styleTol(f, name+".predictor_encoder", s); d > tol {
			t.Errorf("%s: GPU ref_s off by %g (tolerance %g)", name, d, tol)
		}
	}
}

// randomStyleTensors draws a StyleEncoder's checkpoint tensors (spectral
// norm parts included, no module. prefix) for module mod: weights of
// kaiming scale times wscale (which spectral norm undoes), biases up to
// 0.1·wscale (which it does not), u and v from power iteration.
func randomStyleTensors(rng *rand.Rand, ts map[string]*Tensor, mod string, dimIn, maxConv int, wscale float64) {
	add := func(name string, shape ...int) []float32 {
		n := 1
		for _, d := range shape {
			n *= d
		}
		t := &Tensor{Name: mod + "." + name, Shape: shape, DType: "F32", Data: make([]float32, n)}
		ts[t.Name] = t
		return t.Data
	}
	fill := func(x []float32, scale float64) {
		for i := range x {
			x[i] = float32(scale * (2*rng.Float64() - 1))
		}
	}
	unit := func(x []float32) {
		s := 0.0
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			s += float64(x[i]) * float64(x[i])
		}
		for i := range x {
			x[i] /= float32(math.Sqrt(s))
		}
	}
	// u and v as training leaves them: a few power iterations from random
	// vectors (v = Wᵀu/‖Wᵀu‖, u = Wv/‖Wv‖), so that σ = uᵀWv is near W's
	// largest singular value; random u and v would give a σ near 0.
	conv := func(name string, out, in, k int, bias bool) {
		w := add(name+".weight_orig", out, in, k, k)
		fill(w, wscale/math.Sqrt(float64(in*k*k)))
		u, v := add(name+".weight_u", out), add(name+".weight_v", in*k*k)
		unit(u)
		cols := in * k * k
		norm := func(x []float64, dst []float32) {
			s := 0.0
			for _, e := range x {
				s += e * e
			}
			for i, e := range x {
				dst[i] = float32(e / math.Sqrt(s))
			}
		}
		for range 5 {
			wtu := make([]float64, cols)
			for i := range out {
				for j := range cols {
					wtu[j] += float64(w[i*cols+j]) * float64(u[i])
				}
			}
			norm(wtu, v)
			wv := make([]float64, out)
			for i := range out {
				for j := range cols {
					wv[i] += float64(w[i*cols+j]) * float64(v[j])
				}
			}
			norm(wv, u)
		}
		if bias {
			fill(add(name+".bias", out), 0.1*wscale)
		}
	}
	conv("shared.0", dimIn, 1, 3, true)
	c := dimIn
	for i := 1; i <= 4; i++ {
		out := min(2*c, maxConv)
		p := fmt.Sprintf("shared.%d.", i)
		conv(p+"conv1", c, c, 3, true)
		conv(p+"downsample_res.conv", c, 1, 3, true)
		conv(p+"conv2", out, c, 3, true)
		if out != c {
			conv(p+"conv1x1", out, c, 1, false)
		}
		c = out
	}
	conv("shared.6", c, c, 5, true)
	fill(add("unshared.weight", 128, c), wscale/math.Sqrt(float64(c)))
	fill(add("unshared.bias", 128), 0.1*wscale)
}

func randomStyleEncoder(t *testing.T, seed uint64, dimIn, maxConv int, wscale float64) *StyleEncoder {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	ts := map[string]*Tensor{}
	randomStyleTensors(rng, ts, "style_encoder", dimIn, maxConv, wscale)
	randomStyleTensors(rng, ts, "predictor_encoder", dimIn, maxConv, wscale)
	e, err := NewStyleEncoder("random", ts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestStyleEncoderGPUMatchesCPU runs the GPU forward against the CPU
// reference on widths that are odd and even at different blocks (65: odd
// at every block; 70: 70, 35, 18, 9; 96: even throughout), and again at
// wide magnitudes (the mel ×100 and biases ×10: spectral norm keeps each
// convolution's gain near 1, so the input's scale is what carries through).
func TestStyleEncoderGPUMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	for _, tc := range []struct {
		name          string
		wscale, mscal float64
	}{{"unit", 1, 1}, {"wide", 100, 100}} {
		e := randomStyleEncoder(t, 3, 8, 20, tc.wscale)
		g, err := NewGPUStyleEncoder(dev, e)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 5))
		for _, frames := range []int{65, 70, 96} {
			mel := make([]float32, MelBins*frames)
			for i := range mel {
				mel[i] = float32(tc.mscal * (rng.NormFloat64() - 0.5))
			}
			want, err := e.Style(mel, frames)
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Style(mel, frames)
			if err != nil {
				t.Fatal(err)
			}
			d, s := maxDiff(t, "ref_s", got, want)
			t.Logf("%s, %d frames: GPU off by %.3g of %.3g", tc.name, frames, d, s)
			// f32 sums of up to 20·25 products on the GPU against float64
			// sums rounded once per layer on the CPU, over eleven layers:
			// measured 3e-7 (unit) and 5e-7 (wide) of the scale. 5e-6 of
			// it is 10x that; a wrong column or offset moves the output by
			// 1e-2 of it.
			if d > 5e-6*s {
				t.Errorf("%s, %d frames: GPU off by %g of %g", tc.name, frames, d, s)
			}
		}
		g.Release()
		if _, err := g.Style(make([]float32, MelBins*70), 70); err == nil {
			t.Error("Style after Release: no error")
		}
	}
}

func TestStyleEncoderInputErrors(t *testing.T) {
	e := randomStyleEncoder(t, 1, 4, 8, 1)
	g, err := NewGPUStyleEncoder(testDevice(t), e)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	for _, tc := range []struct {
		frames, values int
	}{{MinStyleFrames - 1, MelBins * (MinStyleFrames - 1)}, {70, MelBins*70 - 1}, {MaxStyleFrames + 1, MelBins * (MaxStyleFrames + 1)}, {0, 0}} {
		mel := make([]float32, tc.values)
		if _, err := e.Style(mel, tc.frames); err == nil {
			t.Errorf("CPU, %d frames of %d values: no error", tc.frames, tc.values)
		}
		if _, err := g.Style(mel, tc.frames); err == nil {
			t.Errorf("GPU, %d frames of %d values: no error", tc.frames, tc.values)
		}
	}
	// MinStyleFrames is the boundary: 65 works on both (checked above),
	// and the head's input is then exactly 5×5.
	if MinStyleFrames != 65 || MinStyleSamples != 19200 {
		t.Errorf("MinStyleFrames %d, MinStyleSamples %d; want 65, 19200", MinStyleFrames, MinStyleSamples)
	}
}

// TestFoldSpectralNorm checks σ = uᵀWv by hand, in both state dict
// layouts.
func TestFoldSpectralNorm(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6} // [2][3]
	// u = (0.6, 0.8), v = (0, 1, 0): Wv = (2, 5), σ = 1.2 + 4 = 5.2.
	for _, names := range [][3]string{
		{"m.c.weight_orig", "m.c.weight_u", "m.c.weight_v"},
		{"m.c.parametrizations.weight.original", "m.c.parametrizations.weight.0._u", "m.c.parametrizations.weight.0._v"},
	} {
		ts := map[string]*Tensor{
			names[0]: {Shape: []int{2, 1, 3, 1}, Data: append([]float32(nil), w...)},
			names[1]: {Shape: []int{2}, Data: []float32{0.6, 0.8}},
			names[2]: {Shape: []int{3}, Data: []float32{0, 1, 0}},
		}
		if err := foldSpectralNorm(ts); err != nil {
			t.Fatal(err)
		}
		got := ts["m.c.weight"]
		if got == nil || len(ts) != 1 {
			t.Fatalf("%s: after folding %v", names[0], ts)
		}
		for i, x := range got.Data {
			if want := w[i] / 5.2; math.Abs(float64(x-want)) > 1e-7 {
				t.Errorf("%s: weight %d = %g, want %g", names[0], i, x, want)
			}
		}
	}
	for _, tc := range []struct {
		name string
		ts   map[string]*Tensor
	}{
		{"no v", map[string]*Tensor{"c.weight_orig": {Shape: []int{1, 1}, Data: []float32{1}}, "c.weight_u": {Shape: []int{1}, Data: []float32{1}}}},
		{"u of the wrong size", map[string]*Tensor{"c.weight_orig": {Shape: []int{2, 1}, Data: []float32{1, 1}}, "c.weight_u": {Shape: []int{1}, Data: []float32{1}}, "c.weight_v": {Shape: []int{1}, Data: []float32{1}}}},
		{"σ = 0", map[string]*Tensor{"c.weight_orig": {Shape: []int{1, 1}, Data: []float32{0}}, "c.weight_u": {Shape: []int{1}, Data: []float32{1}}, "c.weight_v": {Shape: []int{1}, Data: []float32{1}}}},
	} {
		if err := foldSpectralNorm(tc.ts); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// Before torch 1.1 there was no v, and the normalised weight was stored.
	old := map[string]*Tensor{"c.weight_orig": {Shape: []int{1, 1}, Data: []float32{3}}, "c.weight_u": {Shape: []int{1}, Data: []float32{1}}, "c.weight": {Shape: []int{1, 1}, Data: []float32{1}}}
	if err := foldSpectralNorm(old); err != nil || len(old) != 1 || old["c.weight"].Data[0] != 1 {
		t.Errorf("pre-1.1 layout: %v, %v", err, old)
	}
}

func TestLoadStyleEncoderErrors(t *testing.T) {
	// Kokoro's own checkpoint: no style encoders, and a hint saying so.
	kokoro := writeTemp(t, "kokoro-v1_0.pth", pthtest.Fixture().Bytes(t))
	if _, err := LoadStyleEncoder(kokoro); err == nil || !strings.Contains(err.Error(), "not a StyleTTS2 checkpoint") || !strings.Contains(err.Error(), "Kokoro") {
		t.Errorf("Kokoro's checkpoint: %v", err)
	}
	if _, err := LoadStyleEncoder(filepath.Join(t.TempDir(), "missing.pth")); err == nil {
		t.Error("a missing file: no error")
	}
	if _, err := LoadStyleEncoder(writeTemp(t, "junk.pth", []byte("not a checkpoint at all"))); err == nil {
		t.Error("junk: no error")
	}
	// A truncated copy of the real checkpoint.
	data, err := os.ReadFile(filepath.Join(styleFixtureDir, "encoder.pth"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadStyleEncoder(writeTemp(t, "cut.pth", data[:len(data)/2])); err == nil {
		t.Error("half a checkpoint: no error")
	}

	edit := func(f func(ts map[string]*Tensor)) error {
		ts := map[string]*Tensor{}
		rng := rand.New(rand.NewPCG(1, 1))
		randomStyleTensors(rng, ts, "style_encoder", 4, 8, 1)
		randomStyleTensors(rng, ts, "predictor_encoder", 4, 8, 1)
		f(ts)
		_, err := NewStyleEncoder("edited", ts)
		return err
	}
	if err := edit(func(map[string]*Tensor) {}); err != nil {
		t.Fatalf("unedited: %v", err)
	}
	for _, tc := range []struct {
		name, want string
		f          func(ts map[string]*Tensor)
	}{
		{"no conv2 of block 3", "conv2", func(ts map[string]*Tensor) {
			for _, s := range []string{"weight_orig", "weight_u", "weight_v"} {
				delete(ts, "predictor_encoder.shared.3.conv2."+s)
			}
		}},
		{"a stem of 2 input channels", "shared.0.weight", func(ts map[string]*Tensor) {
			ts["style_encoder.shared.0.weight_orig"].Shape = []int{4, 2, 3, 1}
			ts["style_encoder.shared.0.weight_v"].Shape = []int{6}
		}},
		{"a 3-D unshared weight", "unshared.weight has shape", func(ts map[string]*Tensor) {
			w := ts["predictor_encoder.unshared.weight"]
			w.Shape = []int{128, w.Shape[1], 1}
		}},
		{"style_dim 64", "[64 8]", func(ts map[string]*Tensor) {
			w := ts["style_encoder.unshared.weight"]
			w.Shape[0], w.Data = 64, w.Data[:64*w.Shape[1]]
		}},
		{"a bias of the wrong length", "shared.6.bias", func(ts map[string]*Tensor) {
			b := ts["style_encoder.shared.6.bias"]
			b.Shape, b.Data = []int{3}, b.Data[:3]
		}},
		{"an extra tensor", "no layer takes", func(ts map[string]*Tensor) {
			ts["style_encoder.shared.9.weight"] = &Tensor{Shape: []int{1}, Data: []float32{1}}
		}},
		{"no predictor_encoder", "predictor_encoder", func(ts map[string]*Tensor) {
			for n := range ts {
				if strings.HasPrefix(n, "predictor_encoder.") {
					delete(ts, n)
				}
			}
		}},
	} {
		if err := edit(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want an error naming %q)", tc.name, err, tc.want)
		}
	}
}

// TestLoadStyleEncoderSafetensors: the same weights as safetensors, named
// as a conversion of the checkpoint would name them ("net." and
// "module." kept, other modules beside), give the same encoder.
func TestLoadStyleEncoderSafetensors(t *testing.T) {
	ts := map[string]*Tensor{}
	rng := rand.New(rand.NewPCG(9, 9))
	randomStyleTensors(rng, ts, "style_encoder", 4, 8, 1)
	randomStyleTensors(rng, ts, "predictor_encoder", 4, 8, 1)
	named := map[string]*Tensor{"net.decoder.module.x": {Shape: []int{2}, Data: []float32{1, 2}}}
	for n, v := range ts {
		mod, rest, _ := strings.Cut(n, ".")
		named["net."+mod+".module."+rest] = v
	}
	path := writeTemp(t, "styletts2.safetensors", safetensorsBytes(t, named, "F32"))
	got, err := LoadStyleEncoder(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewStyleEncoder("direct", ts)
	if err != nil {
		t.Fatal(err)
	}
	mel := make([]float32, MelBins*66)
	for i := range mel {
		mel[i] = float32(math.Sin(float64(i) * 0.01))
	}
	a, err := got.Style(mel, 66)
	if err != nil {
		t.Fatal(err)
	}
	b, err := want.Style(mel, 66)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := maxDiff(t, "safetensors", a, b); d != 0 {
		t.Errorf("safetensors encoder differs by %g", d)
	}
	// Without the encoders: the error lists what the file has.
	other := writeTemp(t, "other.safetensors", safetensorsBytes(t, map[string]*Tensor{"decoder.x": {Shape: []int{1}, Data: []float32{1}}}, "F32"))
	if _, err := LoadStyleEncoder(other); err == nil || !strings.Contains(err.Error(), "decoder") {
		t.Errorf("a safetensors file without encoders: %v", err)
	}
}

// TestVoiceFromAudio makes a voice from the fixture's vowel at 44.1 kHz
// (resampled), on the CPU and the GPU, and blends it with a stock voice.
func TestVoiceFromAudio(t *testing.T) {
	f := loadStyleFixture(t)
	e := loadFixtureEncoder(t)
	wave, err := Resample(f.array(t, "vowel.wave"), MelRate, 44100)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.VoiceFromAudio(wave, 44100)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := v.Style(1)
	last, _ := v.Style(VoiceRows)
	if d, _ := maxDiff(t, "rows", first, last); d != 0 || len(v.Pack) != VoiceRows*VoiceDim {
		t.Fatalf("rows differ by %g; %d values", d, len(v.Pack))
	}
	// Through 44.1 kHz and back the vowel is nearly the fixture's, whose
	// style the encoders give as ref_s: the resampler's error (1e-5 of the
	// signal) and the trim of the faded ends move it a little, not more
	// than a tenth of its size.
	want := f.array(t, "vowel.ref_s")
	if d, s := maxDiff(t, "style", first, want); d > 0.1*s {
		t.Errorf("the voice's style is %g from the fixture's ref_s (scale %g)", d, s)
	}
	g, err := NewGPUStyleEncoder(testDevice(t), e)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	vg, err := g.VoiceFromAudio(wave, 44100)
	if err != nil {
		t.Fatal(err)
	}
	if d, s := maxDiff(t, "gpu voice", vg.Pack, v.Pack); d > 2e-5*s {
		t.Errorf("the GPU's voice differs from the CPU's by %g of %g", d, s)
	}
	if _, err := e.VoiceFromAudio(make([]float32, 48000), 24000); err == nil {
		t.Error("silence: no error")
	}
	if _, err := g.VoiceFromAudio(wave[:20000], 44100); err == nil {
		t.Error("0.45 s: no error")
	}

	heart, err := LoadVoice(filepath.Join(voicesDir(t), "af_heart.bin"))
	if err != nil {
		t.Fatal(err)
	}
	mix, err := BlendVoices([]*Voice{v, heart}, []float64{0.25, 0.75})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []int{0, 99, VoiceRows - 1} {
		for j := 0; j < VoiceDim; j += 37 {
			i := row*VoiceDim + j
			want := 0.25*float64(v.Pack[i]) + 0.75*float64(heart.Pack[i])
			if math.Abs(float64(mix.Pack[i])-want) > 1e-6 {
				t.Errorf("blend row %d col %d: %g, want %g", row, j, mix.Pack[i], want)
			}
		}
	}
	if _, err := VoiceFromStyle("x", make([]float32, 255)); err == nil {
		t.Error("a style of 255 values: no error")
	}
	nan := make([]float32, VoiceDim)
	nan[3] = float32(math.NaN())
	if _, err := VoiceFromStyle("x", nan); err == nil {
		t.Error("a NaN style: no error")
	}
}

// TestConv2dMatchesReference holds Conv2d.apply to ref.Conv2D on awkward
// shapes: every kind of convolution the encoder has (3×3 padded, the
// depthwise stride-2 downsampling, 1×1 without bias, the 5×5 head), odd
// and even sizes, and a stride larger than the padding allows for.
func TestConv2dMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	rnd := func(n int, scale float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(scale * rng.NormFloat64())
		}
		return x
	}
	for _, c := range []struct {
		in, out, k, s, p, g, h, w int
		bias                      bool
	}{
		{1, 5, 3, 1, 1, 1, 7, 9, true},
		{6, 6, 3, 2, 1, 6, 7, 9, true},
		{6, 6, 3, 2, 1, 6, 8, 4, true},
		{5, 7, 1, 1, 0, 1, 3, 5, false},
		{4, 4, 5, 1, 0, 1, 5, 7, true},
		{6, 4, 3, 3, 2, 2, 10, 11, true},
	} {
		conv := &Conv2d{In: c.in, Out: c.out, Kernel: c.k, Stride: c.s, Padding: c.p, Groups: c.g,
			W: rnd(c.out*c.in/c.g*c.k*c.k, 1)}
		if c.bias {
			conv.B = rnd(c.out, 1)
		}
		x := rnd(c.in*c.h*c.w, 100)
		got, ho, wo := conv.apply(x, c.h, c.w)
		want := ref.Conv2D(x, conv.W, conv.B, conv.args(c.h, c.w))
		if wh, ww := conv.args(c.h, c.w).OutSize(); ho != wh || wo != ww {
			t.Fatalf("%+v: output %dx%d, want %dx%d", c, ho, wo, wh, ww)
		}
		// The same products summed in the same order in float64: equal,
		// unless the compiler fuses a multiply-add in one loop and not in
		// the other (Go may on arm64), which moves the f64 sum by an ulp
		// and its f32 rounding by at most one f32 ulp (6e-8 relative).
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1.2e-7*math.Abs(float64(want[i])) {
				t.Fatalf("%+v: output %d = %g, want %g", c, i, got[i], want[i])
			}
		}
	}
}

// TestLoadStyleEncoderBareDict: a torch.save of {'style_encoder': sd,
// 'predictor_encoder': sd} without 'net' or 'module.' (what one would
// save of the two encoders alone), some tensors in F16.
func TestLoadStyleEncoderBareDict(t *testing.T) {
	ts := map[string]*Tensor{}
	rng := rand.New(rand.NewPCG(2, 3))
	randomStyleTensors(rng, ts, "style_encoder", 4, 8, 1)
	randomStyleTensors(rng, ts, "predictor_encoder", 4, 8, 1)
	f := &pthtest.File{Archive: "encoders", Storages: map[string]pthtest.Storage{}}
	for _, mod := range styleModules {
		m := pthtest.Module{Name: mod}
		for name, tensor := range ts {
			rest, ok := strings.CutPrefix(name, mod+".")
			if !ok {
				continue
			}
			key := fmt.Sprint(len(f.Storages))
			dtype := "F32"
			if strings.HasSuffix(rest, ".bias") {
				// F16 storage: the loader converts; the reference below
				// gets the same rounded values.
				dtype = "F16"
				for i, x := range tensor.Data {
					tensor.Data[i] = float16From(x)
				}
			}
			f.Storages[key] = pthtest.Storage{DType: dtype, Data: tensor.Data}
			m.Tensors = append(m.Tensors, pthtest.Tensor{Name: rest, Storage: key, Size: tensor.Shape})
		}
		f.Modules = append(f.Modules, m)
	}
	got, err := LoadStyleEncoder(writeTemp(t, "encoders.pth", f.Bytes(t)))
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewStyleEncoder("direct", ts)
	if err != nil {
		t.Fatal(err)
	}
	mel := make([]float32, MelBins*65)
	for i := range mel {
		mel[i] = float32(math.Cos(float64(i) * 0.003))
	}
	a, err := got.Style(mel, 65)
	if err != nil {
		t.Fatal(err)
	}
	b, err := want.Style(mel, 65)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := maxDiff(t, "bare dict", a, b); d != 0 {
		t.Errorf("the bare-dict checkpoint's encoder differs by %g", d)
	}
}

// float16From rounds x to the nearest f16, as torch's .half() does.
func float16From(x float32) float32 {
	return float16.Fromfloat32(x).Float32()
}
