package arch

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// gemma4E2B are the keys llama.cpp's converter writes for Gemma 4 E2B
// (docs/gemma3n-gemma4.md, from its Gemma4Model.set_gguf_parameters and the
// model's config.json): 35 layers, one global in five, the last 20 sharing
// the caches of layers 13 (sliding) and 14 (global) with feed-forwards
// twice as wide.
func gemma4E2B() map[string]gguf.Value {
	ff := make([]uint32, 35)
	pattern := make([]bool, 35)
	for i := range ff {
		ff[i] = 6144
		if i >= 15 {
			ff[i] = 12288
		}
		pattern[i] = (i+1)%5 != 0
	}
	return map[string]gguf.Value{
		"general.architecture":                    gguf.ValueOf("gemma4"),
		"gemma4.embedding_length":                 gguf.ValueOf(uint32(1536)),
		"gemma4.block_count":                      gguf.ValueOf(uint32(35)),
		"gemma4.context_length":                   gguf.ValueOf(uint32(131072)),
		"gemma4.attention.head_count":             gguf.ValueOf(uint32(8)),
		"gemma4.attention.head_count_kv":          gguf.ValueOf(uint32(1)),
		"gemma4.attention.key_length":             gguf.ValueOf(uint32(512)),
		"gemma4.attention.value_length":           gguf.ValueOf(uint32(512)),
		"gemma4.attention.key_length_swa":         gguf.ValueOf(uint32(256)),
		"gemma4.attention.value_length_swa":       gguf.ValueOf(uint32(256)),
		"gemma4.rope.dimension_count":             gguf.ValueOf(uint32(512)),
		"gemma4.rope.dimension_count_swa":         gguf.ValueOf(uint32(256)),
		"gemma4.rope.freq_base":                   gguf.ValueOf(float32(1e6)),
		"gemma4.rope.freq_base_swa":               gguf.ValueOf(float32(1e4)),
		"gemma4.feed_forward_length":              gguf.ArrayOf(ff),
		"gemma4.attention.sliding_window_pattern": gguf.ArrayOf(pattern),
		"gemma4.attention.sliding_window":         gguf.ValueOf(uint32(512)),
		"gemma4.attention.shared_kv_layers":       gguf.ValueOf(uint32(20)),
		"gemma4.embedding_length_per_layer_input": gguf.ValueOf(uint32(256)),
		"gemma4.final_logit_softcapping":          gguf.ValueOf(float32(30)),
		"gemma4.attention.layer_norm_rms_epsilon": gguf.ValueOf(float32(1e-6)),
	}
}

func readKeys(t *testing.T, kvs map[string]gguf.Value) (Config, error) {
	t.Helper()
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	for k, v := range kvs {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return ReadConfig(f)
}

// TestGemma4E2BShapes: the per-layer widths, KV sources and RoPE of E2B's
// keys are the model's (llama.cpp's producers for E2B are 13 and 14).
func TestGemma4E2BShapes(t *testing.T) {
	c, err := readKeys(t, gemma4E2B())
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = 262144
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 512 || c.FF != 12288 || c.KVHeads != 1 || c.RopeDims != 512 || c.PerLayerInput != 256 {
		t.Errorf("widest: head %d ff %d kv %d rope %d ple %d", c.HeadDim, c.FF, c.KVHeads, c.RopeDims, c.PerLayerInput)
	}
	if c.AttnScale != 1 || !c.VNorm || c.FinalSoftcap != 30 || c.SlidingWindow != 512 {
		t.Errorf("scale %v vnorm %v softcap %v window %d", c.AttnScale, c.VNorm, c.FinalSoftcap, c.SlidingWindow)
	}
	for i := range c.Layers {
		s := c.Shape(i)
		global := (i+1)%5 == 0
		wantHD, wantFF, wantKV := 256, 6144, i
		if global {
			wantHD = 512
		}
		if i >= 15 {
			wantFF, wantKV = 12288, 13
			if global {
				wantKV = 14
			}
		}
		if s.HeadDim != wantHD || s.RopeDims != wantHD || s.FF != wantFF || s.KVLayer != wantKV || s.RopeFactors != global || c.Sliding(i) == global {
			t.Errorf("layer %d: %+v sliding %v; want head %d ff %d kv layer %d", i, s, c.Sliding(i), wantHD, wantFF, wantKV)
		}
		if base, _ := c.Rope(i); (base == 1e6) != global {
			t.Errorf("layer %d: rope base %v", i, base)
		}
		if c.OwnKV(i) != (i < 15) {
			t.Errorf("layer %d: own KV %v", i, c.OwnKV(i))
		}
	}
}

// TestGemma4BadKeys: keys that cannot describe a Gemma 4 are refused at
// load, naming the key.
func TestGemma4BadKeys(t *testing.T) {
	tests := []struct {
		name string
		edit func(map[string]gguf.Value)
		want string
	}{
		{"no pattern", func(k map[string]gguf.Value) { delete(k, "gemma4.attention.sliding_window_pattern") }, "sliding_window_pattern"},
		{"sharing past the layers", func(k map[string]gguf.Value) { k["gemma4.attention.shared_kv_layers"] = gguf.ValueOf(uint32(35)) }, "shared_kv_layers 35"},
		{"short ff array", func(k map[string]gguf.Value) { k["gemma4.feed_forward_length"] = gguf.ArrayOf([]uint32{6144, 6144}) }, "feed_forward_length"},
		{"short pattern", func(k map[string]gguf.Value) {
			k["gemma4.attention.sliding_window_pattern"] = gguf.ArrayOf([]bool{true, false})
		}, "2 bools for 35 layers"},
		{"no earlier global layer", func(k map[string]gguf.Value) {
			p := make([]bool, 35)
			for i := range p {
				p[i] = i != 34
			}
			k["gemma4.attention.sliding_window_pattern"] = gguf.ArrayOf(p)
		}, "global layer"},
		{"odd sliding head", func(k map[string]gguf.Value) {
			k["gemma4.attention.value_length_swa"] = gguf.ValueOf(uint32(128))
		}, "value_length_swa"},
	}
	for _, tc := range tests {
		keys := gemma4E2B()
		tc.edit(keys)
		c, err := readKeys(t, keys)
		if err == nil {
			c.Vocab = 262144
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// TestGemma4OptionalTensors: which of gemma4Block's tensors a layer has
// follows its sizes: the experts' eight with Experts (the 26B-A4B), no
// attn_v with KEqV (its global layers), no k, v or k's norm past the
// KV-sharing boundary, and none of the per-layer-embedding block, its
// hidden-wide norm included, without PerLayer (the 26B-A4B again).
func TestGemma4OptionalTensors(t *testing.T) {
	a, ok := Lookup("gemma4")
	if !ok {
		t.Fatal("no gemma4 record")
	}
	experts := []string{"ffn_gate_inp.weight", "ffn_gate_inp.scale", "ffn_down_exps.scale", "pre_ffw_norm_2.weight",
		"post_ffw_norm_1.weight", "post_ffw_norm_2.weight", "ffn_gate_up_exps.weight", "ffn_down_exps.weight"}
	ple := []string{"inp_gate.weight", "proj.weight", "post_norm.weight"}
	base := Sizes{Hidden: 16, FF: 24, Heads: 4, KVHeads: 2, HeadDim: 8, Layers: 2, PerLayer: 4, Vocab: 10, OwnKV: true}
	for _, c := range []struct {
		name       string
		edit       func(*Sizes)
		has, lacks []string
	}{
		{"E2B layer", func(*Sizes) {}, append(ple, "attn_v.weight", "attn_k_norm.weight"), experts},
		{"shared layer", func(s *Sizes) { s.OwnKV = false }, ple, []string{"attn_k.weight", "attn_v.weight", "attn_k_norm.weight"}},
		{"26B-A4B sliding layer", func(s *Sizes) { s.PerLayer, s.Experts, s.ExpertFF = 0, 8, 6 }, append(experts, "attn_v.weight"), ple},
		{"26B-A4B global layer", func(s *Sizes) { s.PerLayer, s.Experts, s.ExpertFF, s.KEqV = 0, 8, 6, true },
			append(experts, "attn_k.weight", "attn_k_norm.weight"), append(ple, "attn_v.weight")},
	} {
		s := base
		c.edit(&s)
		in := map[string]bool{}
		for _, x := range a.Block {
			in[x.GGUF] = x.In(s)
		}
		for _, n := range c.has {
			if !in[n] {
				t.Errorf("%s: no %s", c.name, n)
			}
		}
		for _, n := range c.lacks {
			if in[n] {
				t.Errorf("%s: has %s", c.name, n)
			}
		}
	}
	// The stacked experts are [experts, rows, cols], gate rows before up
	// rows in the one stack, as transformers holds them.
	s := Sizes{Hidden: 16, FF: 24, Heads: 4, KVHeads: 2, HeadDim: 8, Experts: 8, ExpertFF: 6}
	for _, x := range a.Block {
		want := map[string][]int64{
			"ffn_gate_up_exps.weight": {8, 12, 16}, "ffn_down_exps.weight": {8, 16, 6},
			"ffn_gate_inp.weight": {8, 16}, "ffn_down_exps.scale": {8}, "ffn_gate_inp.scale": {16},
		}[x.GGUF]
		if want != nil && !slices.Equal(x.Shape(s), want) {
			t.Errorf("%s: shape %v, want %v", x.GGUF, x.Shape(s), want)
		}
	}
}
