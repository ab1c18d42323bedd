package training

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/training/data"
)

// TestNewLoRAInitializesAsPEFT: A uniform within ±1/√cols (kaiming_uniform_
// with a = √5), B zero, the same draw for the same seed, names as the GGUF
// file names the weights.
func TestNewLoRAInitializesAsPEFT(t *testing.T) {
	m := loadSynth(t, "tiny-qwen3", "F32")
	l, err := NewLoRA(m, LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"q", "down"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Pairs) != 2*m.Config.Layers || l.Pairs[1].Name != "blk.0.ffn_down.weight" || l.Config.Scale() != 2 {
		t.Fatalf("%d pairs, second %q, scale %v", len(l.Pairs), l.Pairs[1].Name, l.Config.Scale())
	}
	again, _ := NewLoRA(m, l.Config, 3)
	for k, p := range l.Pairs {
		bound := 1 / math.Sqrt(float64(p.Cols))
		lo, hi := 0.0, 0.0
		for j, v := range p.A {
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			if v != again.Pairs[k].A[j] {
				t.Fatalf("%s: the same seed drew another A", p.Name)
			}
		}
		// The draw spans nearly all of ±bound (thousands of values).
		if lo < -bound || hi > bound || lo > -0.95*bound || hi < 0.95*bound {
			t.Errorf("%s: A in [%v, %v], want U(±%v)", p.Name, lo, hi, bound)
		}
		for _, v := range p.B {
			if v != 0 {
				t.Fatalf("%s: B is not zero", p.Name)
			}
		}
	}
	// The runner accepts the pairs: names and shapes are its targets'.
	if err := m.CheckLoRA([]model.LoRA{l.Runtime()}); err != nil {
		t.Fatal(err)
	}
	if a := l.Adapter(m.Config.Arch); len(a.Pairs) != len(l.Pairs) || a.Alpha != 16 {
		t.Fatalf("adapter: %d pairs, alpha %v", len(a.Pairs), a.Alpha)
	}
}

// TestFusedTensorsAreAdaptedWhole: Phi-3's q, k, v (one attn_qkv) and
// gate, up (one ffn_up) get one pair each, as PEFT's qkv_proj and
// gate_up_proj, whichever of their projections are named.
func TestFusedTensorsAreAdaptedWhole(t *testing.T) {
	m := loadSynth(t, "tiny-phi3", "F32")
	c := &m.Config
	l, err := NewLoRA(m, LoRAConfig{Rank: 4, Alpha: 4, Targets: []string{"k", "up"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Pairs) != 2*c.Layers {
		t.Fatalf("%d pairs, want 2 a layer", len(l.Pairs))
	}
	qkv, gateUp := l.Pairs[0], l.Pairs[1]
	if qkv.Name != "blk.0.attn_qkv.weight" || qkv.Target != "q+k+v" || qkv.Rows != c.QDim()+2*c.KVDim() || len(qkv.B) != qkv.Rows*4 {
		t.Errorf("qkv pair %q (%s) of %d rows", qkv.Name, qkv.Target, qkv.Rows)
	}
	if gateUp.Name != "blk.0.ffn_up.weight" || gateUp.Target != "gate+up" || gateUp.Rows != 2*c.FF {
		t.Errorf("gate-up pair %q (%s) of %d rows", gateUp.Name, gateUp.Target, gateUp.Rows)
	}
	if _, s := l.pair(0, tV); s.k != 0 || s.row0 != c.QDim()+c.KVDim() || s.rows != c.KVDim() {
		t.Errorf("v slot %+v", s)
	}
	if err := m.CheckLoRA([]model.LoRA{l.Runtime()}); err != nil {
		t.Fatal(err)
	}
}

func TestBadConfigsAreRefused(t *testing.T) {
	m := loadSynth(t, "tiny-llama", "F32")
	for _, c := range []struct {
		cfg  LoRAConfig
		want string
	}{
		{LoRAConfig{Rank: 0, Alpha: 1}, "rank 0"},
		{LoRAConfig{Rank: 4, Alpha: float32(math.NaN())}, "alpha NaN"},
		{LoRAConfig{Rank: 4, Alpha: 8, Dropout: 1}, "dropout 1"},
		{LoRAConfig{Rank: 4, Alpha: 8, Dropout: -0.1}, "dropout -0.1"},
		{LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"qkv"}}, `target "qkv"`},
	} {
		if _, err := NewLoRA(m, c.cfg, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one saying %q", c.cfg, err, c.want)
		}
	}
	// Gemma 3n's and 4's per-layer embeddings read the token embeddings:
	// their pair (and the tied head's, the same tensor) is refused, by
	// name; the layer targets are not.
	for _, preset := range []string{"tiny-gemma4", "tiny-gemma3n"} {
		m := loadSynth(t, preset, "F32")
		for _, tgt := range []string{"embed", "output"} {
			if _, err := NewLoRA(m, LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", tgt}}, 1); err == nil || !strings.Contains(err.Error(), "token_embd.weight") {
				t.Errorf("%s %s: %v", preset, tgt, err)
			}
		}
		if _, err := NewLoRA(m, LoRAConfig{Rank: 4, Alpha: 8}, 1); err != nil {
			t.Errorf("%s's layer targets: %v", preset, err)
		}
	}
	other := loadSynth(t, "tiny-llama", "F32")
	other.Config.Arch = "mamba"
	if _, err := NewCPU(other); err == nil || !strings.Contains(err.Error(), `"mamba"`) {
		t.Errorf("mamba: %v", err)
	}
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := NewLoRA(m, LoRAConfig{Rank: 2, Alpha: 2}, 1)
	for _, e := range []Example{
		{Tokens: []int32{1, 2}, Targets: []int32{2}},
		{Tokens: []int32{1, 9999}, Targets: []int32{2, 3}},
		{Tokens: []int32{1, 2}, Targets: []int32{2, 9999}},
		{},
	} {
		if _, _, err := step.Loss(l, []Example{e}); err == nil {
			t.Errorf("%+v: no error", e)
		}
	}
}

// TestExamplesSplitPackedSequences: each packed sample becomes its own
// example and the padding is dropped.
func TestExamplesSplitPackedSequences(t *testing.T) {
	s := &data.Sequence{
		Tokens:  []int32{1, 2, 3, 4, 5, 0, 0},
		Targets: []int32{-1, 3, -1, -1, 6, -1, -1},
		Bounds:  []int32{0, 2, 5},
	}
	ex := Examples([]*data.Sequence{s})
	if len(ex) != 2 || len(ex[0].Tokens) != 2 || len(ex[1].Tokens) != 3 || ex[1].Tokens[0] != 3 || Trained(ex) != 2 {
		t.Fatalf("%+v", ex)
	}
}

// TestFromAdapterRoundTrip: an adapter exported with Adapter comes back
// as the same LoRA (targets, alpha, A and B), on separate and fused
// tensors; an adapter of a target on some layers only is refused.
func TestFromAdapterRoundTrip(t *testing.T) {
	for _, c := range []struct {
		preset  string
		targets []string
	}{{"tiny-qwen2", []string{"v", "o", "down"}}, {"tiny-phi3", []string{"q", "gate", "down"}}} {
		m := loadSynth(t, c.preset, "F32")
		l := newTestLoRA(t, m, 0.1, 3)
		l2, err := NewLoRA(m, LoRAConfig{Rank: 4, Alpha: 8, Targets: c.targets}, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []*LoRA{l, l2} {
			back, err := FromAdapter(m, l.Adapter(m.Config.Arch))
			if err != nil {
				t.Fatalf("%s: %v", c.preset, err)
			}
			if back.Config.Scale() != l.Config.Scale() || len(back.Pairs) != len(l.Pairs) {
				t.Fatalf("%s: %+v, %d pairs; want %+v, %d", c.preset, back.Config, len(back.Pairs), l.Config, len(l.Pairs))
			}
			for k, p := range l.Pairs {
				q := back.Pairs[k]
				if q.Name != p.Name || !slices.Equal(q.A, p.A) || !slices.Equal(q.B, p.B) {
					t.Fatalf("%s: pair %d %q came back as %q or with other values", c.preset, k, p.Name, q.Name)
				}
			}
		}
	}
	m := loadSynth(t, "tiny-llama", "F32")
	a := newTestLoRA(t, m, 0.1, 3).Adapter("llama")
	delete(a.Pairs, "blk.1.attn_q.weight")
	if _, err := FromAdapter(m, a); err == nil || !strings.Contains(err.Error(), "pairs") {
		t.Errorf("q on layer 0 only: %v", err)
	}
}
