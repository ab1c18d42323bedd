package arch

import (
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// TestHFClassesBelongToOneRecord: a class two records listed would import
// as whichever HFClassByName met first.
func TestHFClassesBelongToOneRecord(t *testing.T) {
	seen := map[string]string{}
	for _, a := range All() {
		for _, c := range a.HF {
			for _, name := range append([]string{c.Name}, c.Multimodal...) {
				if other, dup := seen[name]; dup {
					t.Errorf("class %s is listed by %s and %s", name, other, a.Name)
				}
				seen[name] = a.Name
				got, class, prefixed, ok := HFClassByName(name)
				if !ok || got != a || class.Name != c.Name || prefixed != (name != c.Name) {
					t.Errorf("HFClassByName(%s) = %v %v %v %v, want %s's %s", name, got, class, prefixed, ok, a.Name, c.Name)
				}
			}
		}
	}
	if _, _, _, ok := HFClassByName("NoSuchForCausalLM"); ok {
		t.Error("HFClassByName found a class no record lists")
	}
}

// TestBlocksAreConsistent: each layer tensor is named once on either side,
// its two names agree on weight or bias, and exactly the projections carry
// LoRA targets.
func TestBlocksAreConsistent(t *testing.T) {
	for _, a := range All() {
		gg, hf := map[string]bool{}, map[string]bool{}
		for _, x := range a.Block {
			if gg[x.GGUF] || hf[x.HF] {
				t.Errorf("%s: %s / %s named twice", a.Name, x.GGUF, x.HF)
			}
			gg[x.GGUF], hf[x.HF] = true, true
			suffix := x.GGUF[strings.LastIndexByte(x.GGUF, '.'):]
			// transformers keeps Gemma 4's layer scale as a buffer named
			// layer_scalar and Gemma 3n's correct_output_scale as a bare
			// parameter, without ".weight".
			bare := !strings.HasSuffix(x.HF, ".weight") && !strings.HasSuffix(x.HF, ".bias")
			if !bare && !strings.HasSuffix(x.HF, suffix) || (suffix == ".bias") != (x.Kind == Bias) || bare && x.Kind == Bias {
				t.Errorf("%s: %s ↔ %s (kind %d): the names disagree on what the tensor is", a.Name, x.GGUF, x.HF, x.Kind)
			}
			// The per-layer-embedding gate and projection (Gemma 3n, 4),
			// AltUp's coefficients and router and LAuReL's matrices (3n),
			// and a mixture's router and experts are matrices that neither
			// PEFT's usual targets nor training adapt.
			side := x.Stack == DimExperts
			for _, d := range []Dim{x.Rows, x.Cols} {
				side = side || d == DimPerLayer || d == DimAltUp || d == DimAltUp2 || d == DimLaurel || d == DimExperts
			}
			if (x.Kind == Matrix && !side) != (len(x.LoRA) > 0) {
				t.Errorf("%s: %s: kind %d with LoRA targets %v; exactly the projections have targets", a.Name, x.GGUF, x.Kind, x.LoRA)
			}
			if (x.Kind == Matrix) != (x.Cols != DimNone) {
				t.Errorf("%s: %s: kind %d with shape %v × %v", a.Name, x.GGUF, x.Kind, x.Rows, x.Cols)
			}
		}
	}
}

// TestStandardBlockFollowsLayout: each flag of Layout adds or fuses the
// tensors it names, and the shapes follow the sizes.
func TestStandardBlockFollowsLayout(t *testing.T) {
	names := func(l Layout) map[string]bool {
		out := map[string]bool{}
		for _, x := range StandardBlock(l) {
			if !x.Optional {
				out[x.GGUF] = true
			}
		}
		return out
	}
	base := names(Layout{})
	for _, want := range []string{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"} {
		if !base[want] {
			t.Errorf("the base layer lacks %s", want)
		}
	}
	if len(base) != 9 {
		t.Errorf("the base layer has %d required tensors, want 9: %v", len(base), base)
	}
	tests := []struct {
		l          Layout
		add, leave []string
	}{
		{Layout{QKVBias: true}, []string{"attn_q.bias", "attn_k.bias", "attn_v.bias"}, nil},
		{Layout{QKNorm: true}, []string{"attn_q_norm.weight", "attn_k_norm.weight"}, nil},
		{Layout{PostNorms: true}, []string{"post_attention_norm.weight", "post_ffw_norm.weight"}, nil},
		{Layout{Fused: true}, []string{"attn_qkv.weight"}, []string{"attn_q.weight", "attn_k.weight", "attn_v.weight", "ffn_gate.weight"}},
	}
	for _, tc := range tests {
		got := names(tc.l)
		for _, n := range tc.add {
			if !got[n] || base[n] {
				t.Errorf("%+v: %s is not what the flag adds", tc.l, n)
			}
		}
		for _, n := range tc.leave {
			if got[n] {
				t.Errorf("%+v: %s is still there", tc.l, n)
			}
		}
	}
	s := Sizes{Hidden: 10, FF: 7, Heads: 4, KVHeads: 2, HeadDim: 6}
	for _, x := range StandardBlock(Layout{Fused: true}) {
		want := map[string][]int64{
			"attn_qkv.weight":    {4*6 + 2*2*6, 10},
			"attn_output.weight": {10, 24},
			"ffn_up.weight":      {14, 10},
			"ffn_down.weight":    {10, 7},
			"attn_norm.weight":   {10},
		}[x.GGUF]
		if got := x.Shape(s); want != nil && !slices.Equal(got, want) {
			t.Errorf("%s: shape %v, want %v", x.GGUF, got, want)
		}
	}
}

// TestReadConfigAppliesLayout: a file of each architecture, with only the
// common keys, reads into a Config whose graph flags are its record's.
func TestReadConfigAppliesLayout(t *testing.T) {
	for _, a := range All() {
		p := a.Name + "."
		keys := map[string]gguf.Value{
			"general.architecture":     gguf.ValueOf(a.Name),
			p + "embedding_length":     gguf.ValueOf(uint32(64)),
			p + "block_count":          gguf.ValueOf(uint32(2)),
			p + "context_length":       gguf.ValueOf(uint32(128)),
			p + "attention.head_count": gguf.ValueOf(uint32(4)),
			p + "feed_forward_length":  gguf.ValueOf(uint32(96)),
			// Gemma 4 needs it; the others read it or not.
			p + "attention.sliding_window_pattern": gguf.ValueOf(uint32(2)),
		}
		// A mixture of experts (Qwen 3 MoE) needs its experts.
		if slices.ContainsFunc(a.Block, func(t Tensor) bool { return t.Stack == DimExperts }) {
			keys[p+"expert_count"] = gguf.ValueOf(uint32(8))
			keys[p+"expert_used_count"] = gguf.ValueOf(uint32(2))
			keys[p+"expert_feed_forward_length"] = gguf.ValueOf(uint32(32))
		}
		c, err := readKeys(t, keys)
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		got := Layout{NeoX: c.NeoX, GELU: c.GELU, QKVBias: c.QKVBias, QKNorm: c.QKNorm, PostNorms: c.PostNorms, Fused: a.Layout.Fused}
		if got != a.Layout {
			t.Errorf("%s: Config's flags %+v, the record's layout %+v", a.Name, got, a.Layout)
		}
	}
}
