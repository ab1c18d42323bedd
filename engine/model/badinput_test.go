package model

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/ggufedit"
)

// rewrite copies the model file src to a new file with the keys of set
// replaced or added (a zero gguf.Value deletes the key) and the tensors in
// dropTensors left out, and returns its path.
func rewrite(t *testing.T, src string, set map[string]gguf.Value, dropTensors ...string) string {
	t.Helper()
	return rewriteAdding(t, src, set, nil, dropTensors...)
}

// addedTensor is a tensor rewriteAdding appends.
type addedTensor = ggufedit.Tensor

// rewriteAdding is rewrite that also appends the tensors of add.
func rewriteAdding(t *testing.T, src string, set map[string]gguf.Value, add []addedTensor, dropTensors ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.gguf")
	ggufedit.Rewrite(t, src, path, set, dropTensors, add)
	return path
}

func TestLoadRefusesBadFiles(t *testing.T) {
	good := synthModel(t, "tiny-qwen3", "F16")
	cases := []struct {
		name string
		path string
		want string // a part of the error that names what is wrong
	}{
		{"tensors do not match keys", rewrite(t, good.Path, map[string]gguf.Value{"qwen3.embedding_length": gguf.ValueOf(uint32(96))}),
			`tensor "token_embd.weight" has shape [128 768], but the model's keys imply [96`},
		{"missing tensor", rewrite(t, good.Path, nil, "blk.1.ffn_down.weight"), `tensor "blk.1.ffn_down.weight" is missing`},
		{"missing QK-norm", rewrite(t, good.Path, nil, "blk.0.attn_k_norm.weight"), `tensor "blk.0.attn_k_norm.weight" is missing`},
		{"unsupported architecture", rewrite(t, good.Path, map[string]gguf.Value{"general.architecture": gguf.ValueOf("mamba")}),
			`architecture "mamba" is not supported (supported: gemma, gemma-embedding, gemma2, gemma3, gemma3n, gemma4, gpt-oss, llama, phi3, qwen2, qwen3, qwen3moe)`},
		{"head count not dividing", rewrite(t, good.Path, map[string]gguf.Value{"qwen3.attention.head_count_kv": gguf.ValueOf(uint32(3))}),
			"must be a multiple of attention.head_count_kv (3)"},
		{"bad rope base", rewrite(t, good.Path, map[string]gguf.Value{"qwen3.rope.freq_base": gguf.ValueOf(float32(-1))}),
			"rope.freq_base -1 must be positive"},
		{"dynamic rope", rewrite(t, good.Path, map[string]gguf.Value{"qwen3.rope.scaling.type": gguf.ValueOf("dynamic")}),
			`rope.scaling.type "dynamic" is not supported`},
		{"experts in an architecture without them", rewrite(t, good.Path, map[string]gguf.Value{"qwen3.expert_count": gguf.ValueOf(uint32(8)),
			"qwen3.expert_used_count": gguf.ValueOf(uint32(2)), "qwen3.expert_feed_forward_length": gguf.ValueOf(uint32(64))}),
			"qwen3: expert_count 8: a mixture of experts is not supported for this architecture"},
		{"keys of another architecture", rewrite(t, good.Path, map[string]gguf.Value{"general.architecture": gguf.ValueOf("phi3")}),
			"phi3"}, // the keys are qwen3's: the error names the phi3 key it lacks
	}
	// Gemma 4's own parts: the per-layer embeddings, the per-layer arrays
	// and the KV sharing.
	g4 := synthModel(t, "tiny-gemma4", "F16")
	cases = append(cases, []struct {
		name string
		path string
		want string
	}{
		{"missing PLE table", rewrite(t, g4.Path, nil, "per_layer_token_embd.weight"), `tensor "per_layer_token_embd.weight" is missing`},
		{"missing PLE gate", rewrite(t, g4.Path, nil, "blk.3.inp_gate.weight"), `tensor "blk.3.inp_gate.weight" is missing`},
		{"missing rope_freqs", rewrite(t, g4.Path, nil, "rope_freqs.weight"), `tensor "rope_freqs.weight" is missing`},
		{"PLE width against its tensors", rewrite(t, g4.Path, map[string]gguf.Value{"gemma4.embedding_length_per_layer_input": gguf.ValueOf(uint32(8))}),
			`tensor "per_layer_token_embd.weight" has shape`},
		{"per-layer array of the wrong length", rewrite(t, g4.Path, map[string]gguf.Value{"gemma4.feed_forward_length": gguf.ArrayOf([]uint32{192, 192, 192})}),
			`key "gemma4.feed_forward_length": an array of 3 values for 6 layers`},
		{"KV sharing past the layers", rewrite(t, g4.Path, map[string]gguf.Value{"gemma4.attention.shared_kv_layers": gguf.ValueOf(uint32(6))}),
			"attention.shared_kv_layers 6"},
		{"shared layer's feed-forward against the key", rewrite(t, g4.Path, map[string]gguf.Value{"gemma4.feed_forward_length": gguf.ValueOf(uint32(192))}),
			`tensor "blk.4.ffn_gate.weight" has shape`},
	}...)
	// Gemma 3n's: AltUp's and LAuReL's tensors, its keys.
	g3n := synthModel(t, "tiny-gemma3n", "F16")
	cases = append(cases, []struct {
		name string
		path string
		want string
	}{
		{"missing AltUp projections", rewrite(t, g3n.Path, nil, "altup_proj.weight"), `tensor "altup_proj.weight" is missing`},
		{"missing AltUp router", rewrite(t, g3n.Path, nil, "blk.2.altup_router.weight"), `tensor "blk.2.altup_router.weight" is missing`},
		{"missing LAuReL", rewrite(t, g3n.Path, nil, "blk.5.laurel_r.weight"), `tensor "blk.5.laurel_r.weight" is missing`},
		{"streams against the tensors", rewrite(t, g3n.Path, map[string]gguf.Value{"gemma3n.altup.num_inputs": gguf.ValueOf(uint32(3))}),
			`tensor "altup_proj.weight" has shape`},
		{"active stream past the streams", rewrite(t, g3n.Path, map[string]gguf.Value{"gemma3n.altup.active_idx": gguf.ValueOf(uint32(4))}),
			"altup.active_idx 4 is not one of the 4 streams"},
		{"sparsity array of the wrong length", rewrite(t, g3n.Path, map[string]gguf.Value{"gemma3n.activation_sparsity_scale": gguf.ArrayOf([]float32{1.6, 1.6})}),
			`key "gemma3n.activation_sparsity_scale": 2 values for 6 layers`},
		{"sparsity NaN", rewrite(t, g3n.Path, map[string]gguf.Value{"gemma3n.activation_sparsity_scale": gguf.ArrayOf([]float32{float32(math.NaN()), 0, 0, 0, 0, 0})}),
			"layer 0 has NaN"},
		{"KV sharing past the layers", rewrite(t, g3n.Path, map[string]gguf.Value{"gemma3n.attention.shared_kv_layers": gguf.ValueOf(uint32(6))}),
			"attention.shared_kv_layers 6"},
	}...)
	// Qwen 3 MoE's: the experts' keys and tensors.
	moe := synthModel(t, "tiny-qwen3moe", "F16")
	cases = append(cases, []struct {
		name string
		path string
		want string
	}{
		{"missing router", rewrite(t, moe.Path, nil, "blk.1.ffn_gate_inp.weight"), `tensor "blk.1.ffn_gate_inp.weight" is missing`},
		{"missing experts", rewrite(t, moe.Path, nil, "blk.2.ffn_down_exps.weight"), `tensor "blk.2.ffn_down_exps.weight" is missing`},
		{"experts against their count", rewrite(t, moe.Path, map[string]gguf.Value{"qwen3moe.expert_count": gguf.ValueOf(uint32(6))}),
			`tensor "blk.0.ffn_gate_inp.weight" has shape`},
		{"expert width against the tensors", rewrite(t, moe.Path, map[string]gguf.Value{"qwen3moe.expert_feed_forward_length": gguf.ValueOf(uint32(96))}),
			`tensor "blk.0.ffn_down_exps.weight" has shape`},
		{"more chosen than experts", rewrite(t, moe.Path, map[string]gguf.Value{"qwen3moe.expert_used_count": gguf.ValueOf(uint32(9))}),
			"expert_used_count 9: want 1 to the 8 experts"},
		{"no chosen count", rewrite(t, moe.Path, map[string]gguf.Value{"qwen3moe.expert_used_count": {}}), `qwen3moe.expert_used_count`},
		{"unknown gating", rewrite(t, moe.Path, map[string]gguf.Value{"qwen3moe.expert_gating_func": gguf.ValueOf(uint32(3))}),
			"expert_gating_func 3 is not supported"},
		{"no experts", rewrite(t, moe.Path, map[string]gguf.Value{"qwen3moe.expert_count": gguf.ValueOf(uint32(0))}),
			"not a mixture-of-experts file"},
	}...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.path)
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not name the file and say %q", err, tc.want)
			}
		})
	}
}

func TestForwardRefusesBadCalls(t *testing.T) {
	m := synthModel(t, "tiny-llama", "Q8_0")
	cpu, err := NewCPU(m, 16)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGPU(dev, m, GPUOptions{Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	long := make([]int32, 17)
	for _, r := range []Runner{cpu, g} {
		for name, call := range map[string]func() error{
			"empty":          func() error { _, err := r.Forward(nil, 0, Output{}); return err },
			"past context":   func() error { _, err := r.Forward(long, 0, Output{}); return err },
			"bad token":      func() error { _, err := r.Forward([]int32{1, 512}, 0, Output{}); return err },
			"negative pos":   func() error { _, err := r.Forward([]int32{1}, -1, Output{}); return err },
			"all with top-k": func() error { _, err := r.Forward([]int32{1}, 0, Output{All: true, TopK: 3}); return err },
		} {
			if err := call(); err == nil {
				t.Errorf("%T %s: no error", r, name)
			}
		}
	}
	// A prompt longer than the context is refused by a session, with the
	// sizes, unless the caller chose to shift.
	_, err = NewSession(g).Generate(t.Context(), Request{Prompt: long, MaxTokens: 1}, func(Token) error { return nil })
	if !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "17 tokens, context 16") {
		t.Errorf("long prompt: %v", err)
	}
	if _, err := NewSession(g).Generate(t.Context(), Request{MaxTokens: 1}, func(Token) error { return nil }); err == nil || !strings.Contains(err.Error(), "empty prompt") {
		t.Errorf("empty prompt: %v", err)
	}
}

// TestNewGPURefusesModelOverBudget checks the estimate is enforced before
// anything is allocated, and that the error carries the estimate.
func TestNewGPURefusesModelOverBudget(t *testing.T) {
	m := synthModel(t, "tiny-llama", "Q8_0")
	est := m.Memory(2048, 512)
	_, err := NewGPU(dev, m, GPUOptions{Context: 2048, Budget: uint64(est.Total()) - 1})
	if err == nil || !strings.Contains(err.Error(), "over the") || !strings.Contains(err.Error(), "KV cache") {
		t.Fatalf("over budget: %v", err)
	}
	g, err := NewGPU(dev, m, GPUOptions{Context: 2048, Budget: uint64(est.Total())})
	if err != nil {
		t.Fatalf("at budget: %v", err)
	}
	g.Close()
}
