package model

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// perLayer is n copies of x as a GGUF array of T: the per-layer form of a
// key that llama.cpp reads with get_key_or_arr.
func perLayer[T gguf.Element](x T, n int) gguf.Value {
	return perLayerOf(n, func(int) T { return x })
}

// perLayerOf is an array of f(i) for each of n layers.
func perLayerOf[T gguf.Element](n int, f func(i int) T) gguf.Value {
	xs := make([]T, n)
	for i := range xs {
		xs[i] = f(i)
	}
	return gguf.ArrayOf(xs)
}

// sameConfig fails unless got describes the same model as want: every
// field equal, and the same layers sliding whichever form of the pattern
// each was read from.
func sameConfig(t *testing.T, got, want Config) {
	t.Helper()
	for i := range want.Layers {
		if got.Sliding(i) != want.Sliding(i) {
			t.Errorf("layer %d: sliding %v, want %v", i, got.Sliding(i), want.Sliding(i))
		}
	}
	if (got.YaRN == nil) != (want.YaRN == nil) || got.YaRN != nil && *got.YaRN != *want.YaRN {
		t.Errorf("YaRN %+v, want %+v", got.YaRN, want.YaRN)
	}
	if (got.MoE == nil) != (want.MoE == nil) || got.MoE != nil && *got.MoE != *want.MoE {
		t.Errorf("MoE %+v, want %+v", got.MoE, want.MoE)
	}
	got.SlidingLayers, got.SlidingPeriod, got.YaRN, got.MoE = nil, 0, nil, nil
	want.SlidingLayers, want.SlidingPeriod, want.YaRN, want.MoE = nil, 0, nil, nil
	if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
		t.Errorf("config\n got %s\nwant %s", g, w)
	}
}

// TestPerLayerKeyForms writes the per-layer keys of every tiny architecture
// in the other forms llama.cpp's loader accepts (one value per layer, as
// INT32 arrays the way gguf-py writes Python lists, or UINT32 arrays) and
// checks that each file loads to the same configuration as the scalar form.
func TestPerLayerKeyForms(t *testing.T) {
	for _, preset := range tinyPresets() {
		t.Run(preset, func(t *testing.T) {
			base := synthModel(t, preset, "F16")
			c := base.Config
			a := c.Arch + "."
			// Each layer's own widths (Gemma 4's differ).
			kv := func(i int) int { return c.Shape(i).KVHeads }
			ff := func(i int) int { return c.Shape(i).FF }
			forms := map[string]map[string]gguf.Value{
				"int32 arrays": {
					a + "attention.head_count":    perLayer(int32(c.Heads), c.Layers),
					a + "attention.head_count_kv": perLayerOf(c.Layers, func(i int) int32 { return int32(kv(i)) }),
					a + "feed_forward_length":     perLayerOf(c.Layers, func(i int) int32 { return int32(ff(i)) }),
				},
				"uint32 arrays": {
					a + "attention.head_count":    perLayer(uint32(c.Heads), c.Layers),
					a + "attention.head_count_kv": perLayerOf(c.Layers, func(i int) uint32 { return uint32(kv(i)) }),
					a + "feed_forward_length":     perLayerOf(c.Layers, func(i int) uint32 { return uint32(ff(i)) }),
				},
			}
			for name, set := range forms {
				t.Run(name, func(t *testing.T) {
					m, err := Load(rewrite(t, base.Path, set))
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					sameConfig(t, m.Config, c)
				})
			}
		})
	}
}

// TestSlidingPatternForms reads Gemma's sliding-window pattern in both of
// its forms: llama.cpp's integer period and Ollama's array of one bool per
// layer (true: sliding), which its converter writes from layer_types.
func TestSlidingPatternForms(t *testing.T) {
	for _, tc := range []struct {
		preset string
		period int
	}{{"tiny-gemma2", 2}, {"tiny-gemma3", 6}} {
		t.Run(tc.preset, func(t *testing.T) {
			base := synthModel(t, tc.preset, "F16")
			c := base.Config
			if c.SlidingWindow == 0 {
				t.Fatalf("%s has no sliding window: the pattern would not matter", tc.preset)
			}
			key := c.Arch + ".attention.sliding_window_pattern"
			bools := make([]bool, c.Layers)
			for i := range bools {
				bools[i] = (i+1)%tc.period != 0
			}
			for name, v := range map[string]gguf.Value{
				"period": gguf.ValueOf(uint32(tc.period)),
				"int32":  gguf.ValueOf(int32(tc.period)),
				"bools":  gguf.ArrayOf(bools),
				"no key": {},
			} {
				t.Run(name, func(t *testing.T) {
					m, err := Load(rewrite(t, base.Path, map[string]gguf.Value{key: v}))
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					sameConfig(t, m.Config, c)
				})
			}
			// A pattern no period can say: the bools are followed as written.
			odd := make([]bool, c.Layers)
			odd[0] = true
			m, err := Load(rewrite(t, base.Path, map[string]gguf.Value{key: gguf.ArrayOf(odd)}))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for i := range odd {
				if m.Config.Sliding(i) != odd[i] {
					t.Errorf("layer %d: sliding %v, the file says %v", i, m.Config.Sliding(i), odd[i])
				}
			}
		})
	}
}

// TestGemma3LocalBaseKeys reads the local layers' RoPE base under both
// names: llama.cpp's rope.freq_base_swa and Ollama's rope.local.freq_base.
func TestGemma3LocalBaseKeys(t *testing.T) {
	base := synthModel(t, "tiny-gemma3", "F16")
	for name, set := range map[string]map[string]gguf.Value{
		"llama.cpp": {"gemma3.rope.freq_base_swa": gguf.ValueOf(float32(2500))},
		"ollama":    {"gemma3.rope.freq_base_swa": {}, "gemma3.rope.local.freq_base": gguf.ValueOf(float32(2500))},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := Load(rewrite(t, base.Path, set))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Config.RopeBaseLocal != 2500 {
				t.Errorf("local RoPE base %v, the file says 2500", m.Config.RopeBaseLocal)
			}
		})
	}
}

// TestKeyFormErrors: a key in a form no loader accepts is refused with an
// error naming the key and the forms that would do.
func TestKeyFormErrors(t *testing.T) {
	g3 := synthModel(t, "tiny-gemma3", "F16")
	ll := synthModel(t, "tiny-llama", "F16")
	n := ll.Config.Layers
	uneven := make([]uint32, n)
	for i := range uneven {
		uneven[i] = uint32(ll.Config.FF + i*32)
	}
	for _, tc := range []struct {
		name string
		src  string
		set  map[string]gguf.Value
		want []string
	}{
		{"pattern of strings", g3.Path, map[string]gguf.Value{"gemma3.attention.sliding_window_pattern": gguf.ArrayOf([]string{"sliding"})},
			[]string{`"gemma3.attention.sliding_window_pattern"`, "ARRAY of STRING", "an array of one bool per layer"}},
		{"pattern too short", g3.Path, map[string]gguf.Value{"gemma3.attention.sliding_window_pattern": gguf.ArrayOf([]bool{true, false})},
			[]string{`"gemma3.attention.sliding_window_pattern"`, fmt.Sprintf("2 bools for %d layers", g3.Config.Layers)}},
		{"pattern a string", g3.Path, map[string]gguf.Value{"gemma3.attention.sliding_window_pattern": gguf.ValueOf("6")},
			[]string{`"gemma3.attention.sliding_window_pattern"`, "an integer period"}},
		{"heads array too short", ll.Path, map[string]gguf.Value{"llama.attention.head_count": perLayer(uint32(ll.Config.Heads), n-1)},
			[]string{`"llama.attention.head_count"`, fmt.Sprintf("%d values for %d layers", n-1, n)}},
		{"uneven feed-forward", ll.Path, map[string]gguf.Value{"llama.feed_forward_length": gguf.ArrayOf(uneven)},
			[]string{`"llama.feed_forward_length"`, "layers of different widths are not supported"}},
		{"heads array of floats", ll.Path, map[string]gguf.Value{"llama.attention.head_count_kv": perLayer(float32(2), n)},
			[]string{`"llama.attention.head_count_kv"`, "an array of one integer per layer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(rewrite(t, tc.src, tc.set))
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOptionalKeyDefaults: keys a converter may leave out take llama.cpp's
// defaults.
func TestOptionalKeyDefaults(t *testing.T) {
	g2 := synthModel(t, "tiny-gemma2", "F16")
	m, err := Load(rewrite(t, g2.Path, map[string]gguf.Value{"gemma2.attention.sliding_window": {}}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config.SlidingWindow != 4096 || !m.Config.Sliding(0) || m.Config.Sliding(1) {
		t.Errorf("gemma2 without attention.sliding_window: window %d, layers 0/1 sliding %v/%v; want 4096 on even layers",
			m.Config.SlidingWindow, m.Config.Sliding(0), m.Config.Sliding(1))
	}
}

// importFixture imports one of testdata/hf's Hugging Face folders as
// Hearth's importer writes it (llama.cpp's key forms) and returns the path.
func importFixture(t *testing.T, family string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), family+".gguf")
	if err := hfimport.Import(filepath.Join("testdata", "hf", family), path, hfimport.Options{}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRopeScalingKeyForms reads YaRN under llama.cpp's key names
// (rope.scaling.yarn_beta_fast, ...) and Ollama's (beta_fast, beta_slow,
// extrapolation_factor), and LongRoPE with or without the
// rope.scaling.type key (llama.cpp's newer converter writes "longrope",
// Ollama's and the older one nothing).
func TestRopeScalingKeyForms(t *testing.T) {
	yarn := importFixture(t, "qwen2_yarn")
	const q = "qwen2.rope.scaling."
	want := YaRN{Factor: 4, BetaFast: 32, BetaSlow: 1, ExtFactor: 1}
	for _, tc := range []struct {
		name string
		set  map[string]gguf.Value
		y    YaRN
		attn float64
	}{
		{"llama.cpp", nil, want, 1 + 0.1*math.Log(4)},
		{"ollama names", map[string]gguf.Value{q + "beta_fast": gguf.ValueOf(float32(32)), q + "beta_slow": gguf.ValueOf(float32(1)), q + "extrapolation_factor": gguf.ValueOf(float32(1))}, want, 1 + 0.1*math.Log(4)},
		{"ollama beta_fast 64", map[string]gguf.Value{q + "beta_fast": gguf.ValueOf(float32(64))}, YaRN{Factor: 4, BetaFast: 64, BetaSlow: 1, ExtFactor: 1}, 1 + 0.1*math.Log(4)},
		{"llama.cpp name wins", map[string]gguf.Value{q + "beta_fast": gguf.ValueOf(float32(64)), q + "yarn_beta_fast": gguf.ValueOf(float32(16))}, YaRN{Factor: 4, BetaFast: 16, BetaSlow: 1, ExtFactor: 1}, 1 + 0.1*math.Log(4)},
		{"attention factor given", map[string]gguf.Value{q + "yarn_attn_factor": gguf.ValueOf(float32(1.5))}, want, 1.5},
		{"times attn_factor", map[string]gguf.Value{q + "attn_factor": gguf.ValueOf(float32(2))}, want, 2 * (1 + 0.1*math.Log(4))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(rewrite(t, yarn, tc.set))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.Config
			if c.YaRN == nil || *c.YaRN != tc.y || c.RopeOrigContext != 16 || math.Abs(float64(c.RopeAttnFactor)-tc.attn) > 1e-6 {
				t.Errorf("YaRN %+v, original context %d, attention factor %v; want %+v, 16, %v", c.YaRN, c.RopeOrigContext, c.RopeAttnFactor, tc.y, tc.attn)
			}
			wantF := ref.YaRNFactors(float64(c.RopeBase), c.RopeDims, 4, 16, float64(tc.y.BetaFast), 1, 1)
			if !slices.Equal(m.RopeFactors, wantF) || m.RopeFactorsFor(64) == nil {
				t.Errorf("RoPE factors %v, want %v", m.RopeFactors, wantF)
			}
		})
	}

	long := importFixture(t, "phi3_longrope")
	for name, set := range map[string]map[string]gguf.Value{
		"llama.cpp": nil,
		"ollama":    {"phi3.rope.scaling.type": {}},
	} {
		t.Run("longrope "+name, func(t *testing.T) {
			m, err := Load(rewrite(t, long, set))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.Config
			if c.RopeOrigContext != 16 || math.Abs(float64(c.RopeAttnFactor)-math.Sqrt(1.5)) > 1e-6 {
				t.Errorf("original context %d, attention factor %v; want 16, sqrt(1.5)", c.RopeOrigContext, c.RopeAttnFactor)
			}
			// transformers' Phi-3 factors (config.json), as the fixture has them.
			short := []float32{1.0, 1.01, 1.03, 1.06, 1.1, 1.18, 1.3, 1.5}
			longF := []float32{1.0, 1.25, 1.6, 2.1, 2.8, 3.7, 5.0, 6.5}
			if !slices.Equal(m.RopeFactorsFor(16), short) || !slices.Equal(m.RopeFactorsFor(17), longF) {
				t.Errorf("factors at context 16 %v, at 17 %v; want the short ones, then the long", m.RopeFactorsFor(16), m.RopeFactorsFor(17))
			}
		})
	}

	for _, tc := range []struct {
		name string
		src  string
		set  map[string]gguf.Value
		drop []string
		want []string
	}{
		{"log multiplier", yarn, map[string]gguf.Value{q + "yarn_log_multiplier": gguf.ValueOf(float32(0.1))}, nil, []string{"rope.scaling.yarn_log_multiplier", "not supported"}},
		{"unknown type", yarn, map[string]gguf.Value{q + "type": gguf.ValueOf("dynamic")}, nil, []string{`rope.scaling.type "dynamic" is not supported`, "yarn and longrope"}},
		{"short factors missing", long, nil, []string{"rope_factors_short.weight"}, []string{"rope_factors_long.weight and rope_factors_short.weight", "only one"}},
		{"factors and yarn", long, map[string]gguf.Value{"phi3.rope.scaling.type": gguf.ValueOf("yarn")}, nil, []string{"rope_factors_long/short.weight", "yarn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(rewrite(t, tc.src, tc.set, tc.drop...))
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
