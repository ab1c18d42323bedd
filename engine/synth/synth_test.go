package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// mustPreset is the built-in preset called name.
func mustPreset(t testing.TB, name string) Preset {
	t.Helper()
	p, ok := PresetByName(name)
	if !ok {
		t.Fatalf("no preset %q", name)
	}
	return p
}

// writeModel writes p as o says and reads it back.
func writeModel(t testing.TB, p Preset, o Options) (*gguf.File, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, p, o); err != nil {
		t.Fatalf("Write %s %s: %v", p.Name, o.Quant, err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatalf("%s %s: read back: %v", p.Name, o.Quant, err)
	}
	return f, buf.Bytes()
}

// dequantized is the whole of tensor name of f as float32.
func dequantized(t testing.TB, f *gguf.File, name string) ([]float32, gguf.TensorInfo) {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	data, err := f.Data(ti)
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, ti.Elements())
	if err := gguf.Dequantize(ti.Type, data, vals); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return vals, ti
}

func meanStd(xs []float32) (mean, std float64) {
	var s, s2 float64
	for _, x := range xs {
		s += float64(x)
		s2 += float64(x) * float64(x)
	}
	n := float64(len(xs))
	mean = s / n
	return mean, math.Sqrt(max(0, s2/n-mean*mean))
}

func TestPresetsAreValid(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Presets() {
		if seen[p.Name] {
			t.Errorf("preset %q twice", p.Name)
		}
		seen[p.Name] = true
		if err := p.Validate(); err != nil {
			t.Error(err)
		}
		if p.Model == "" {
			t.Errorf("%s: no Model", p.Name)
		}
		if got, ok := PresetByName(strings.ToUpper(p.Name)); !ok || got.Name != p.Name {
			t.Errorf("PresetByName(%q) = %q, %v", strings.ToUpper(p.Name), got.Name, ok)
		}
	}
	for _, name := range []string{"llama-3.2-1b", "llama-3.1-8b", "gemma-3-1b", "gemma-2-2b", "qwen2.5-0.5b", "qwen3-4b", "qwen3-30b-a3b", "phi-3-mini",
		"gemma-4-26b-a4b", "tiny-llama", "tiny-gemma", "tiny-gemma2", "tiny-gemma3", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe",
		"tiny-gemma4moe", "tiny-phi3", "gpt-oss-20b", "tiny-gpt-oss"} {
		if !seen[name] {
			t.Errorf("no preset %q", name)
		}
	}
	if _, ok := PresetByName("llama-9000"); ok {
		t.Error("PresetByName found a preset that does not exist")
	}
}

// TestPublishedParameterCounts checks the real presets against the
// parameter counts their Hugging Face repositories publish (the safetensors
// totals on the model pages), exactly: a wrong width, head count or tie
// changes the count by at least a row of a matrix.
func TestPublishedParameterCounts(t *testing.T) {
	for _, c := range []struct {
		name      string
		published uint64
	}{
		{"llama-3.2-1b", 1_235_814_400},
		{"llama-3.1-8b", 8_030_261_248},
		{"gemma-2b", 2_506_172_416},
		{"gemma-2-2b", 2_614_341_888},
		{"gemma-3-1b", 999_885_952},
		{"qwen2.5-0.5b", 494_032_768},
		{"qwen3-4b", 4_022_468_096},
		{"qwen3-30b-a3b", 30_532_122_624},
		{"phi-3-mini", 3_821_079_552},
	} {
		p := mustPreset(t, c.name)
		got := p.ParamCount()
		if p.Llama3Rope != nil {
			got -= uint64(p.HeadDim / 2) // rope_freqs is the converter's, not a weight of the model
		}
		if got != c.published {
			t.Errorf("%s: %d parameters, published %d (off by %+d)", c.name, got, c.published, int64(got)-int64(c.published))
		}
	}
}

// TestPresetShapes checks tensors of the real presets against the shapes
// the real GGUF files have.
func TestPresetShapes(t *testing.T) {
	for _, c := range []struct {
		preset, tensor string
		shape          []uint64 // nil: the tensor must be absent
	}{
		{"llama-3.2-1b", "token_embd.weight", []uint64{2048, 128256}},
		{"llama-3.2-1b", "rope_freqs.weight", []uint64{32}},
		{"llama-3.2-1b", "blk.15.attn_k.weight", []uint64{2048, 512}},
		{"llama-3.2-1b", "blk.0.ffn_down.weight", []uint64{8192, 2048}},
		{"llama-3.2-1b", "output.weight", nil},
		{"llama-3.1-8b", "output.weight", []uint64{4096, 128256}},
		{"llama-3.1-8b", "blk.31.attn_v.weight", []uint64{4096, 1024}},
		{"llama-3.1-8b", "blk.32.attn_v.weight", nil},
		{"gemma-3-1b", "blk.0.attn_q.weight", []uint64{1152, 1024}},
		{"gemma-3-1b", "blk.0.attn_k_norm.weight", []uint64{256}},
		{"gemma-3-1b", "blk.25.post_ffw_norm.weight", []uint64{1152}},
		{"gemma-2-2b", "blk.0.attn_output.weight", []uint64{2048, 2304}},
		{"gemma-2-2b", "blk.0.post_attention_norm.weight", []uint64{2304}},
		{"gemma-2-2b", "blk.0.attn_q_norm.weight", nil},
		{"gemma-2b", "blk.17.ffn_gate.weight", []uint64{2048, 16384}},
		{"qwen2.5-0.5b", "blk.0.attn_q.bias", []uint64{896}},
		{"qwen2.5-0.5b", "blk.23.attn_v.bias", []uint64{128}},
		{"qwen3-4b", "blk.0.attn_q.weight", []uint64{2560, 4096}},
		{"qwen3-4b", "blk.0.attn_q_norm.weight", []uint64{128}},
		{"qwen3-4b", "blk.0.attn_q.bias", nil},
		{"qwen3-30b-a3b", "blk.47.ffn_gate_inp.weight", []uint64{2048, 128}},
		{"qwen3-30b-a3b", "blk.0.ffn_gate_exps.weight", []uint64{2048, 768, 128}},
		{"qwen3-30b-a3b", "blk.0.ffn_up_exps.weight", []uint64{2048, 768, 128}},
		{"qwen3-30b-a3b", "blk.0.ffn_down_exps.weight", []uint64{768, 2048, 128}},
		{"qwen3-30b-a3b", "blk.0.ffn_gate.weight", nil},
		{"qwen3-30b-a3b", "blk.0.attn_q.weight", []uint64{2048, 4096}},
		{"qwen3-30b-a3b", "output.weight", []uint64{2048, 151936}},
		{"phi-3-mini", "blk.0.attn_qkv.weight", []uint64{3072, 9216}},
		{"phi-3-mini", "blk.0.ffn_up.weight", []uint64{3072, 16384}},
		{"phi-3-mini", "blk.0.ffn_gate.weight", nil},
		{"phi-3-mini", "output.weight", []uint64{3072, 32064}},
		// llama.cpp's create_tensor shapes for LLM_ARCH_GEMMA4: the
		// experts [n_embd, 2·n_ff_exp, n_expert] and [n_ff_exp, n_embd,
		// n_expert], the router [n_embd, n_expert] with its gain and the
		// per-expert scale; no attn_v where the values are the keys (the
		// global layers 6, 12, …, 30), no per-layer embeddings.
		{"gemma-4-26b-a4b", "blk.0.ffn_gate_up_exps.weight", []uint64{2816, 1408, 128}},
		{"gemma-4-26b-a4b", "blk.0.ffn_down_exps.weight", []uint64{704, 2816, 128}},
		{"gemma-4-26b-a4b", "blk.0.ffn_gate_inp.weight", []uint64{2816, 128}},
		{"gemma-4-26b-a4b", "blk.0.ffn_gate_inp.scale", []uint64{2816}},
		{"gemma-4-26b-a4b", "blk.0.ffn_down_exps.scale", []uint64{128}},
		{"gemma-4-26b-a4b", "blk.0.pre_ffw_norm_2.weight", []uint64{2816}},
		{"gemma-4-26b-a4b", "blk.0.ffn_gate.weight", []uint64{2816, 2112}},
		{"gemma-4-26b-a4b", "blk.0.attn_q.weight", []uint64{2816, 4096}},
		{"gemma-4-26b-a4b", "blk.0.attn_v.weight", []uint64{2816, 2048}},
		{"gemma-4-26b-a4b", "blk.5.attn_q.weight", []uint64{2816, 8192}},
		{"gemma-4-26b-a4b", "blk.5.attn_k.weight", []uint64{2816, 1024}},
		{"gemma-4-26b-a4b", "blk.5.attn_k_norm.weight", []uint64{512}},
		{"gemma-4-26b-a4b", "blk.5.attn_v.weight", nil},
		{"gemma-4-26b-a4b", "blk.29.attn_v.weight", nil},
		{"gemma-4-26b-a4b", "blk.0.post_norm.weight", nil},
		{"gemma-4-26b-a4b", "per_layer_token_embd.weight", nil},
		{"gemma-4-26b-a4b", "rope_freqs.weight", []uint64{256}},
		{"gemma-4-26b-a4b", "output.weight", nil},
		// llama.cpp's create_tensor shapes for LLM_ARCH_OPENAI_MOE: q
		// {n_embd, n_head·n_rot}, the sinks {n_head}, the router and its
		// bias, the experts [n_embd, n_ff_exp, n_expert] and [n_ff_exp,
		// n_embd, n_expert] and their biases {n_ff_exp, n_expert} and
		// {n_embd, n_expert}; post_attention_norm is the feed-forward's
		// pre-norm, and there is no ffn_norm.
		{"gpt-oss-20b", "blk.0.attn_q.weight", []uint64{2880, 4096}},
		{"gpt-oss-20b", "blk.0.attn_q.bias", []uint64{4096}},
		{"gpt-oss-20b", "blk.0.attn_k.weight", []uint64{2880, 512}},
		{"gpt-oss-20b", "blk.0.attn_output.weight", []uint64{4096, 2880}},
		{"gpt-oss-20b", "blk.0.attn_output.bias", []uint64{2880}},
		{"gpt-oss-20b", "blk.0.attn_sinks.weight", []uint64{64}},
		{"gpt-oss-20b", "blk.0.post_attention_norm.weight", []uint64{2880}},
		{"gpt-oss-20b", "blk.0.ffn_norm.weight", nil},
		{"gpt-oss-20b", "blk.23.ffn_gate_inp.weight", []uint64{2880, 32}},
		{"gpt-oss-20b", "blk.23.ffn_gate_inp.bias", []uint64{32}},
		{"gpt-oss-20b", "blk.0.ffn_gate_exps.weight", []uint64{2880, 2880, 32}},
		{"gpt-oss-20b", "blk.0.ffn_gate_exps.bias", []uint64{2880, 32}},
		{"gpt-oss-20b", "blk.0.ffn_up_exps.bias", []uint64{2880, 32}},
		{"gpt-oss-20b", "blk.0.ffn_down_exps.weight", []uint64{2880, 2880, 32}},
		{"gpt-oss-20b", "blk.0.ffn_down_exps.bias", []uint64{2880, 32}},
		{"gpt-oss-20b", "blk.0.ffn_gate.weight", nil},
		{"gpt-oss-20b", "output.weight", []uint64{2880, 201088}},
		{"gpt-oss-20b", "rope_freqs.weight", nil},
		{"tiny-gpt-oss", "blk.3.ffn_gate_exps.weight", []uint64{128, 64, 8}},
		{"tiny-gpt-oss", "blk.3.ffn_down_exps.weight", []uint64{64, 128, 8}},
		{"tiny-gpt-oss", "blk.3.ffn_down_exps.bias", []uint64{128, 8}},
		{"tiny-gpt-oss", "blk.3.attn_sinks.weight", []uint64{4}},
	} {
		p := mustPreset(t, c.preset)
		i := slices.IndexFunc(p.tensors(), func(s tensorSpec) bool { return s.name == c.tensor })
		switch {
		case c.shape == nil && i >= 0:
			t.Errorf("%s has %s, want none", c.preset, c.tensor)
		case c.shape != nil && i < 0:
			t.Errorf("%s has no %s", c.preset, c.tensor)
		case c.shape != nil && !slices.Equal(p.tensors()[i].shape, c.shape):
			t.Errorf("%s %s: shape %v, want %v", c.preset, c.tensor, p.tensors()[i].shape, c.shape)
		}
	}

	// The tensor count by architecture: per layer 2 norms and 4 attention
	// and 3 FFN matrices, less Phi-3's fused ones, plus biases, QK-norms,
	// post-norms and a mixture's router; then token_embd, output_norm,
	// output, rope_freqs.
	for _, p := range Presets() {
		per := 9
		switch {
		case p.Fused():
			per = 6
		case p.HasQKVBias():
			per += 3
		}
		if p.HasExperts() {
			per++
		}
		if p.HasQKNorm() {
			per += 2
		}
		if p.HasPostNorms() {
			per += 2
		}
		if p.Arch == "gpt-oss" {
			// The output projection's bias, the sinks, the router's
			// bias and the experts' three.
			per += 6
		}
		want := p.Layers*per + 2
		if !p.TiedEmbeddings {
			want++
		}
		if p.Llama3Rope != nil {
			want++
		}
		if p.Arch == "gemma4" {
			// Per layer the output scale and, with per-layer embeddings,
			// their gate, projection and norm; the shared layers lack k,
			// v and k's norm; the PLE table, projection and norm, and
			// rope_freqs.
			want += p.Layers - 3*p.SharedKVLayers + 1
			if p.PerLayerInput > 0 {
				want += 3*p.Layers + 3
			}
			// A mixture's router gain and per-expert scale, its three
			// norms and two stacks beside the router counted above; no
			// attn_v in the global layers whose values are their keys.
			if p.Experts > 0 {
				want += 7 * p.Layers
			}
			for l := range p.Layers - p.SharedKVLayers {
				if p.KEqV && !p.sliding(l) {
					want--
				}
			}
		}
		if p.Arch == "gemma3n" {
			// Per layer the PLE gate, projection and norm, AltUp's five
			// and LAuReL's three (every layer keeps k and v); the PLE
			// table, projection and norm and the two AltUp stacks.
			want += 11*p.Layers + 3 + 2
		}
		if got := len(p.tensors()); got != want {
			t.Errorf("%s: %d tensors, want %d", p.Name, got, want)
		}
	}
}

// TestLlama8BAtQ4KMIsTheRealMix plans the 8B preset without writing it:
// llama-quantize's Q4_K_M of Llama 3.1 8B has 66 F32, 193 Q4_K and 33 Q6_K
// tensors (what llama.cpp's loader reports for the published file), and a
// synthetic one must too.
func TestLlama8BAtQ4KMIsTheRealMix(t *testing.T) {
	l, err := Plan(mustPreset(t, "llama-3.1-8b"), Options{Quant: "Q4_K_M"})
	if err != nil {
		t.Fatal(err)
	}
	types := map[gguf.Type]int{}
	for _, tt := range l.Tensors {
		types[tt.Type]++
	}
	want := map[gguf.Type]int{gguf.TypeF32: 66, gguf.TypeQ4_K: 193, gguf.TypeQ6_K: 33}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("types %v, want %v", types, want)
	}
	// Q4_K is 4.5 bits a weight and Q6_K 6.5625; the 4.9 GB of the real
	// file. The header (tokenizer, template) is a few MB on top.
	if l.TensorBytes < 4_900_000_000 || l.TensorBytes > 4_930_000_000 || l.FileSize < int64(l.TensorBytes) {
		t.Errorf("tensor data %d bytes, file %d: want about 4.91e9", l.TensorBytes, l.FileSize)
	}
}

// TestGemma426BCounts checks the 26B-A4B preset against the totals its
// model card gives, 25.2B weights of which 3.8B are used a token (8 of the
// 128 experts): the text model alone makes both, to the digits published.
func TestGemma426BCounts(t *testing.T) {
	p := mustPreset(t, "gemma-4-26b-a4b")
	var experts uint64
	for _, s := range p.tensors() {
		if strings.HasSuffix(s.name, "_exps.weight") {
			experts += elements(s.shape)
		}
	}
	total := p.ParamCount() - uint64(p.HeadDim/2) // less rope_freqs, the converter's
	active := total - experts + experts*uint64(p.ExpertsUsed)/uint64(p.Experts)
	if got := math.Round(float64(total)/1e8) / 10; got != 25.2 {
		t.Errorf("%d weights (%.1fB), want 25.2B", total, got)
	}
	if got := math.Round(float64(active)/1e8) / 10; got != 3.8 {
		t.Errorf("%d weights used a token (%.1fB), want 3.8B", active, got)
	}
}

// TestGPTOSS20BCounts checks the gpt-oss-20b preset against its model
// card: 20.91B weights, of which 3.61B are used a token (4 of the 32
// experts, and of the two vocabulary tables the output head only: the
// card's count, which gives gpt-oss-120b's 5.13B too). Every weight of
// the file is the model's.
func TestGPTOSS20BCounts(t *testing.T) {
	p := mustPreset(t, "gpt-oss-20b")
	var experts uint64
	for _, s := range p.tensors() {
		if strings.Contains(s.name, "_exps.") {
			experts += elements(s.shape)
		}
	}
	total := p.ParamCount()
	active := total - experts + experts*uint64(p.ExpertsUsed)/uint64(p.Experts) - uint64(p.Vocab*p.Hidden)
	if got := math.Round(float64(total)/1e7) / 100; got != 20.91 {
		t.Errorf("%d weights (%.2fB), want 20.91B", total, got)
	}
	if got := math.Round(float64(active)/1e7) / 100; got != 3.61 {
		t.Errorf("%d weights used a token (%.2fB), want 3.61B", active, got)
	}
}

// TestGPTOSS20BAtMXFP4MOE plans gpt-oss-20b at MXFP4_MOE, the mix of the
// GGUF ggml-org publishes (gpt-oss-20b-mxfp4.gguf, 12.1 GB): the 72 expert
// stacks MXFP4, the 98 other matrices (the two vocabulary tables and each
// layer's q, k, v and o) Q8_0, and the 289 vectors and stacks of them
// (norms, biases, sinks) and the routers F32.
func TestGPTOSS20BAtMXFP4MOE(t *testing.T) {
	l, err := Plan(mustPreset(t, "gpt-oss-20b"), Options{Quant: "MXFP4_MOE"})
	if err != nil {
		t.Fatal(err)
	}
	types := map[gguf.Type]int{}
	for _, tt := range l.Tensors {
		types[tt.Type]++
		stack := strings.HasSuffix(tt.Name, "_exps.weight")
		if stack != (tt.Type == gguf.TypeMXFP4) {
			t.Errorf("%s is %v", tt.Name, tt.Type)
		}
	}
	want := map[gguf.Type]int{gguf.TypeF32: 289, gguf.TypeQ8_0: 98, gguf.TypeMXFP4: 72}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("types %v, want %v", types, want)
	}
	if l.TensorBytes < 12_090_000_000 || l.TensorBytes > 12_100_000_000 {
		t.Errorf("tensor data %d bytes, want the 12.1 GB of the published file", l.TensorBytes)
	}
}

// TestGemma426BAtQ4KM plans the 26B-A4B preset at Q4_K_M and records the
// mix llama-quantize's rules give it: the experts' down rows (704) and
// the dense down's (2112) fit no 256-block, so Q4_K falls back to Q5_0
// and the use_more_bits layers' Q6_K to Q8_0 (the Q5_0/Q8_0 experts of a
// real Q4_K_M of this model); the experts' gate_up rows (2816 = 11·256)
// stay Q4_K; attn_v, only in the 25 sliding layers, is Q6_K in those
// use_more_bits picks; the routers stay F32.
func TestGemma426BAtQ4KM(t *testing.T) {
	l, err := Plan(mustPreset(t, "gemma-4-26b-a4b"), Options{Quant: "Q4_K_M"})
	if err != nil {
		t.Fatal(err)
	}
	types := map[gguf.Type]int{}
	byTensor := map[string]map[gguf.Type]int{}
	for _, tt := range l.Tensors {
		types[tt.Type]++
		name := tt.Name
		if n, ok := strings.CutPrefix(name, "blk."); ok {
			name = n[strings.IndexByte(n, '.')+1:]
		}
		if byTensor[name] == nil {
			byTensor[name] = map[gguf.Type]int{}
		}
		byTensor[name][tt.Type]++
		if strings.HasPrefix(name, "ffn_down") && strings.HasSuffix(name, ".weight") && !tt.Fallback {
			t.Errorf("%s is %v without a fallback", tt.Name, tt.Type)
		}
	}
	want := map[gguf.Type]int{gguf.TypeF32: 392, gguf.TypeQ4_K: 192, gguf.TypeQ5_0: 32, gguf.TypeQ6_K: 14, gguf.TypeQ8_0: 28}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("types %v, want %v", types, want)
	}
	for name, want := range map[string]map[gguf.Type]int{
		"ffn_down_exps.weight":    {gguf.TypeQ5_0: 16, gguf.TypeQ8_0: 14},
		"ffn_down.weight":         {gguf.TypeQ5_0: 16, gguf.TypeQ8_0: 14},
		"ffn_gate_up_exps.weight": {gguf.TypeQ4_K: 30},
		"ffn_gate_inp.weight":     {gguf.TypeF32: 30},
		"ffn_gate_inp.scale":      {gguf.TypeF32: 30},
		"ffn_down_exps.scale":     {gguf.TypeF32: 30},
		"attn_v.weight":           {gguf.TypeQ4_K: 12, gguf.TypeQ6_K: 13},
		"attn_k.weight":           {gguf.TypeQ4_K: 30},
		"token_embd.weight":       {gguf.TypeQ6_K: 1},
	} {
		if got := byTensor[name]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	base := mustPreset(t, "tiny-llama")
	for _, c := range []struct {
		name string
		edit func(*Preset)
		want string
	}{
		{"arch", func(p *Preset) { p.Arch = "mamba" }, `architecture "mamba"`},
		{"zero width", func(p *Preset) { p.Hidden = 0 }, "hidden (0) must be positive"},
		{"gqa", func(p *Preset) { p.KVHeads = 3 }, "heads (4) must be a multiple of kv_heads (3)"},
		{"odd head", func(p *Preset) { p.HeadDim = 63 }, "head_dim (63) must be even"},
		{"eps", func(p *Preset) { p.Eps = math.NaN() }, "eps"},
		{"rope dims", func(p *Preset) { p.RopeDims = 128 }, "rope_dims (128)"},
		{"llama3 rope elsewhere", func(p *Preset) { p.Arch = "qwen2" }, "llama3 RoPE scaling is Llama's"},
		{"llama3 rope factors", func(p *Preset) {
			p.Llama3Rope = &Llama3Rope{Factor: 8, LowFreqFactor: 4, HighFreqFactor: 1, OriginalContext: 8192}
		}, "low_freq_factor < high_freq_factor"},
		{"yarn beside llama3", func(p *Preset) {
			p.YaRN = &YaRNRope{Factor: 4, BetaFast: 32, BetaSlow: 1, OriginalContext: 512}
		}, "YaRN and another RoPE scaling"},
		{"yarn without its original context", func(p *Preset) {
			*p = mustPreset(t, "tiny-gpt-oss")
			p.YaRN = &YaRNRope{Factor: 4, BetaFast: 32, BetaSlow: 1}
		}, "YaRN needs a positive factor, original context and betas"},
		{"gpt-oss without a window", func(p *Preset) {
			*p = mustPreset(t, "tiny-gpt-oss")
			p.SlidingWindow = 0
		}, "gpt-oss needs a sliding window"},
		{"softcap", func(p *Preset) { p.AttnSoftcap = 50 }, "soft-capping is Gemma 2's"},
		{"gemma4 fields elsewhere", func(p *Preset) { p.SharedKVLayers = 1 }, "are Gemma 4's"},
		{"gemma4 sharing past the layers", func(p *Preset) {
			*p = mustPreset(t, "tiny-gemma4")
			p.SharedKVLayers = 5
		}, "shared KV layers (5)"},
		{"gemma4 head widths", func(p *Preset) {
			*p = mustPreset(t, "tiny-gemma4")
			p.HeadDimSWA = 1024
		}, "head_dim_swa (1024)"},
		{"experts elsewhere", func(p *Preset) { p.Experts = 8 }, "are a mixture of experts'; llama has none"},
		{"keys as values elsewhere", func(p *Preset) { p.KEqV = true }, "k_eq_v and kv_heads_global are Gemma 4's; llama has neither"},
		{"global KV heads without keys as values", func(p *Preset) {
			*p = mustPreset(t, "tiny-gemma4moe")
			p.KEqV = false
		}, "kv_heads_global (1) is num_global_key_value_heads"},
		{"global KV heads that do not divide the heads", func(p *Preset) {
			*p = mustPreset(t, "tiny-gemma4moe")
			p.KVHeadsGlobal = 3
		}, "heads (4) must be a multiple of kv_heads_global (3)"},
		{"gemma4 experts used", func(p *Preset) {
			*p = mustPreset(t, "tiny-gemma4moe")
			p.ExpertsUsed = 0
		}, "experts used (0)"},
		{"no experts", func(p *Preset) {
			*p = mustPreset(t, "tiny-qwen3moe")
			p.Experts, p.ExpertsUsed = 0, 0
		}, "experts (0) must be 1 to 1024"},
		{"more experts used than there are", func(p *Preset) {
			*p = mustPreset(t, "tiny-qwen3moe")
			p.ExpertsUsed = 9
		}, "experts used (9) must be 1 to the 8 experts, at most 64"},
		{"no expert width", func(p *Preset) {
			*p = mustPreset(t, "tiny-qwen3moe")
			p.ExpertFF = 0
		}, "expert ff (0)"},
		{"tokenizer", func(p *Preset) { p.Tokenizer = "t5" }, `tokenizer "t5"`},
		{"vocab", func(p *Preset) { p.Vocab = 200 }, "vocab (200) is smaller than the 261 tokens"},
		{"gemma2 scalar", func(p *Preset) {
			*p = mustPreset(t, "tiny-gemma2")
			p.QueryPreAttnScalar = 0
		}, "gemma2 needs query_pre_attn_scalar"},
		{"gemma3 swa base", func(p *Preset) {
			*p = mustPreset(t, "tiny-gemma3")
			p.RopeBaseSWA = 0
		}, "gemma3 needs rope_base_swa"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := base
			c.edit(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, c.want)
			}
			// Plan and Write refuse it the same way.
			if _, perr := Plan(p, Options{}); perr == nil || perr.Error() != err.Error() {
				t.Errorf("Plan = %v, want %v", perr, err)
			}
		})
	}
	if _, err := Plan(base, Options{Quant: "Q9_9"}); err == nil || !strings.Contains(err.Error(), `unknown quantize type "Q9_9"`) {
		t.Errorf("Plan(Q9_9) = %v", err)
	}
	if _, err := Plan(base, Options{Quant: "IQ2_XS"}); !errors.Is(err, gguf.ErrNeedsImatrix) {
		t.Errorf("Plan(IQ2_XS) = %v, want ErrNeedsImatrix", err)
	}
}

// roundTripTexts are encoded and decoded by every preset's tokenizer.
var roundTripTexts = []string{
	"The hearth was warm.",
	"  Two spaces, a tab\tand\nnewlines\n\n— and 1887 loaves at €2, naïve café.",
	"Unseen words: zyxt qwv, emoji 🔥, CJK 火, and \x01 control bytes.",
	"<b>not a special token</b>",
}

// TestTinyModelsReadBack writes every test preset and checks what the
// engine will read: keys, tensors, tokenizer and chat template.
func TestTinyModelsReadBack(t *testing.T) {
	for _, p := range Presets() {
		if !strings.HasPrefix(p.Name, "tiny-") {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			o := Options{Quant: "F32", Seed: 3}
			l, err := Plan(p, o)
			if err != nil {
				t.Fatal(err)
			}
			f, data := writeModel(t, p, o)
			if int64(len(data)) != l.FileSize {
				t.Errorf("file is %d bytes, Plan said %d", len(data), l.FileSize)
			}
			checkKeys(t, f, p)

			infos := f.Tensors()
			if len(infos) != len(l.Tensors) {
				t.Fatalf("%d tensors, want %d", len(infos), len(l.Tensors))
			}
			for i, ti := range infos {
				want := l.Tensors[i]
				if ti.Name != want.Name || ti.Type != want.Type || !slices.Equal(ti.Shape, want.Shape) {
					t.Errorf("tensor %d: %s %v %v, want %s %v %v", i, ti.Name, ti.Type, ti.Shape, want.Name, want.Type, want.Shape)
				}
			}
			if got := f.ParameterCount(); got != p.ParamCount() {
				t.Errorf("%d parameters, want %d", got, p.ParamCount())
			}

			// Norm gains are around 1 and matrices N(0, 1/cols).
			norm, _ := dequantized(t, f, "output_norm.weight")
			if m, s := meanStd(norm); math.Abs(m-1) > 0.05 || math.Abs(s-normSigma) > 0.05 {
				t.Errorf("output_norm: mean %.3f std %.3f, want 1 and %v", m, s, normSigma)
			}
			emb, ti := dequantized(t, f, "token_embd.weight")
			want := 1 / math.Sqrt(float64(ti.Shape[0]))
			// 60K+ values: the sample std is within 1% of σ (its
			// standard error is σ/sqrt(2n)); 5% leaves room.
			if m, s := meanStd(emb); math.Abs(m) > 0.05*want || math.Abs(s/want-1) > 0.05 {
				t.Errorf("token_embd: mean %.4f std %.4f, want 0 and %.4f", m, s, want)
			}

			checkTokenizer(t, f, p)
		})
	}
}

// checkKeys checks the hyper-parameter keys of the contract.
func checkKeys(t *testing.T, f *gguf.File, p Preset) {
	t.Helper()
	a := p.Arch + "."
	if got := f.Architecture(); got != p.Arch {
		t.Errorf("general.architecture = %q, want %q", got, p.Arch)
	}
	ints := map[string]int{
		a + "vocab_size": p.Vocab, a + "context_length": p.Context, a + "embedding_length": p.Hidden,
		a + "block_count": p.Layers, a + "feed_forward_length": p.FF,
		a + "attention.head_count": p.Heads, a + "attention.head_count_kv": p.KVHeads,
		a + "attention.key_length": p.HeadDim, a + "attention.value_length": p.HeadDim,
		a + "rope.dimension_count": p.HeadDim,
	}
	if p.Arch == "gemma4" {
		// Gemma 4's feed-forward and KV heads are one count a layer, the
		// shared layers' feed-forward doubled, the global layers' KV
		// heads num_global_key_value_heads with k_eq_v.
		for key, per := range map[string]func(arch.Sizes) int{
			"feed_forward_length":     func(s arch.Sizes) int { return s.FF },
			"attention.head_count_kv": func(s arch.Sizes) int { return s.KVHeads },
		} {
			delete(ints, a+key)
			xs, err := arch.PerLayerInts(f, a+key, p.Layers, -1)
			for l := range p.Layers {
				if err != nil || xs[l] != per(p.layerSizes(l)) {
					t.Errorf("layer %d: %s %v (%v), want %d", l, key, xs, err, per(p.layerSizes(l)))
					break
				}
			}
		}
		for key, want := range map[string]int{a + "attention.key_length_swa": p.HeadDimSWA, a + "rope.dimension_count_swa": p.HeadDimSWA,
			a + "attention.shared_kv_layers": p.SharedKVLayers, a + "embedding_length_per_layer_input": p.PerLayerInput} {
			ints[key] = want
		}
	}
	if p.Arch == "gemma3n" {
		for key, want := range map[string]int{a + "altup.num_inputs": p.AltUp, a + "altup.active_idx": 0,
			a + "attention.shared_kv_layers": p.SharedKVLayers, a + "embedding_length_per_layer_input": p.PerLayerInput} {
			ints[key] = want
		}
		// What engine/arch makes of the pattern and the sparsity array:
		// the first SparseLayers layers at icdf(0.95), the rest dense.
		c, err := arch.ReadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range p.Layers {
			sh := c.Shape(l)
			if sh.Sparse != (l < p.SparseLayers) || sh.Sparse && math.Abs(float64(sh.Sparsity)-1.6448536) > 1e-6 {
				t.Errorf("layer %d: sparse %v at %v, want the first %d at icdf(0.95)", l, sh.Sparse, sh.Sparsity, p.SparseLayers)
			}
			if c.Sliding(l) != p.sliding(l) {
				t.Errorf("layer %d: sliding %v", l, c.Sliding(l))
			}
		}
	}
	if p.Experts > 0 {
		for key, want := range map[string]int{a + "expert_count": p.Experts, a + "expert_used_count": p.ExpertsUsed,
			a + "expert_feed_forward_length": p.ExpertFF} {
			ints[key] = want
		}
	}
	for key, want := range ints {
		if got, err := f.Uint32(key); err != nil || int(got) != want {
			t.Errorf("%s = %d (%v), want %d", key, got, err, want)
		}
	}
	floats := map[string]float64{
		a + "attention.layer_norm_rms_epsilon": p.Eps,
		a + "rope.freq_base":                   p.RopeBase,
	}
	optional := map[string]bool{}
	opt := func(key string, v float64, present bool) {
		optional[key] = present
		if present {
			floats[key] = v
		}
	}
	opt(a+"rope.freq_base_swa", p.RopeBaseSWA, p.Arch == "gemma3" || p.gemmaNew())
	opt(a+"attention.scale", 1/math.Sqrt(float64(p.QueryPreAttnScalar)), p.Arch == "gemma2" || p.Arch == "gemma3")
	opt(a+"attn_logit_softcapping", p.AttnSoftcap, p.Arch == "gemma2")
	opt(a+"final_logit_softcapping", p.FinalSoftcap, p.Arch == "gemma2" || p.gemmaNew())
	if y := p.YaRN; y != nil {
		opt(a+"rope.scaling.factor", y.Factor, true)
		opt(a+"rope.scaling.yarn_beta_fast", y.BetaFast, true)
		opt(a+"rope.scaling.yarn_beta_slow", y.BetaSlow, true)
		if got, err := f.Uint32(a + "rope.scaling.original_context_length"); err != nil || int(got) != y.OriginalContext {
			t.Errorf("rope.scaling.original_context_length = %d (%v), want %d", got, err, y.OriginalContext)
		}
		if got, _ := f.String(a + "rope.scaling.type"); got != "yarn" {
			t.Errorf("rope.scaling.type = %q, want yarn", got)
		}
	} else {
		opt(a+"rope.scaling.factor", p.RopeScalingFactor, p.RopeScaling != "")
	}
	for key, want := range floats {
		// The file holds FLOAT32: compare at its precision.
		if got, err := f.Float32(key); err != nil || got != float32(want) {
			t.Errorf("%s = %v (%v), want %v", key, got, err, float32(want))
		}
	}
	for key, present := range optional {
		if _, ok := f.Value(key); ok != present {
			t.Errorf("%s present = %v, want %v", key, ok, present)
		}
	}
	sw, err := f.Uint32Or(a+"attention.sliding_window", 0)
	if err != nil || int(sw) != p.SlidingWindow {
		t.Errorf("sliding_window = %d (%v), want %d", sw, err, p.SlidingWindow)
	}
	if ft, ok := f.FileType(); !ok || ft != 0 {
		t.Errorf("general.file_type = %v, want ALL_F32", ft)
	}
}

// checkTokenizer checks that engine/tokenizer and engine/chat load the
// file's tokenizer and template, and that they work.
func checkTokenizer(t *testing.T, f *gguf.File, p Preset) {
	t.Helper()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Size() != p.Vocab {
		t.Errorf("vocabulary of %d tokens, want %d", tok.Size(), p.Vocab)
	}
	fam, _ := familyOf(p.Tokenizer)
	for _, s := range append(slices.Clone(fam.head), fam.tail...) {
		id, ok := tok.ID(s)
		want := tokenizer.Control
		if s == fam.unk {
			want = tokenizer.Unknown
		}
		if !ok || tok.Type(id) != want {
			t.Errorf("special token %q: id %d, %v, type %v, want %v", s, id, ok, tok.Type(id), want)
		}
	}
	for _, c := range []struct {
		what string
		id   int32
		text string
	}{{"BOS", tok.BOS(), fam.bos}, {"EOS", tok.EOS(), fam.eos}, {"EOT", tok.EOT(), fam.eot}} {
		if c.id == tokenizer.None || tok.Token(c.id) != c.text {
			t.Errorf("%s is %d %q, want %q", c.what, c.id, tok.Token(c.id), c.text)
		}
	}

	// Learned merges at work: ordinary English takes well under a token a
	// character, which bytes alone would not.
	probe := "The baker lit the oven before the sun was up, and the bread was warm."
	if n := len(tok.Encode(probe, tokenizer.EncodeOptions{})); n > len(probe)*2/3 {
		t.Errorf("%q is %d tokens: the merges do not work", probe, n)
	}
	for _, text := range roundTripTexts {
		ids := tok.Encode(text, tokenizer.EncodeOptions{})
		got, err := tok.Decode(ids, tokenizer.DecodeOptions{})
		if err != nil || got != text {
			t.Errorf("decode(encode(%q)) = %q, %v", text, got, err)
		}
	}

	format, err := chat.FromGGUF(f, tok)
	if err != nil {
		t.Fatal(err)
	}
	if format.Template == nil {
		t.Fatalf("the file's chat template did not load: %s", format.Notice)
	}
	prompt, err := format.Render(chat.Request{
		Messages:            []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Light the fire."}},
		AddGenerationPrompt: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if prompt.Template != tokenizer.KeyChatTemplate {
		t.Errorf("rendered by %s, want the file's template", prompt.Template)
	}
	ids := format.Tokenize(prompt.Text)
	specials := 0
	for _, id := range ids {
		if tok.Type(id) == tokenizer.Control {
			specials++
		}
	}
	// Every turn marker of the prompt is one control token: at least the
	// two turns' openings.
	if specials < 2 {
		t.Errorf("prompt %q tokenizes with %d control tokens", prompt.Text, specials)
	}
	if !format.IsStop(tok.EOT()) {
		t.Errorf("EOT %q is not a stop token (stops %v)", tok.Token(tok.EOT()), format.StopStrings)
	}
}

// TestRealSizeVocab builds the vocabularies of real presets (without
// writing a model): exactly the vocabulary size, the specials in place,
// the rest reserved.
func TestRealSizeVocab(t *testing.T) {
	for _, name := range []string{"llama-3.1-8b", "gemma-3-1b", "gpt-oss-20b"} { // BPE, SentencePiece, BPE with its specials last
		p := mustPreset(t, name)
		v, err := buildVocab(p)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.New(v)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Size() != p.Vocab {
			t.Errorf("%s: %d tokens, want %d", name, tok.Size(), p.Vocab)
		}
		reserved := 0
		for id := range p.Vocab {
			if tok.Type(int32(id)) == tokenizer.Unused {
				reserved++
			}
		}
		fam, _ := familyOf(p.Tokenizer)
		// The corpus yields several hundred merges; the rest of a
		// real-size vocabulary is reserved.
		if learned := p.Vocab - reserved - fam.fixedTokens(); learned < 200 || learned > 2000 {
			t.Errorf("%s: %d learned tokens", name, learned)
		}
		if tok.Type(int32(p.Vocab-1)) != tokenizer.Unused {
			t.Errorf("%s: the last token is %v, want reserved", name, tok.Type(int32(p.Vocab-1)))
		}
		for _, s := range []string{fam.bos, fam.eos, fam.eot} {
			if id, ok := tok.ID(s); !ok || tok.Type(id) != tokenizer.Control {
				t.Errorf("%s: %q is not a control token", name, s)
			}
		}
	}
}

// quantTest is a preset small enough to write at every type in a second or
// two, wide enough (256) for the K-quant blocks.
var quantTest = Preset{
	Name: "quant-test", Model: "test", Arch: "llama",
	Vocab: 300, Hidden: 256, Layers: 1, Heads: 4, KVHeads: 1, HeadDim: 64, FF: 256,
	Context: 512, Eps: 1e-5, RopeBase: 10000, Tokenizer: "llama3",
}

// TestEveryQuant writes a model at every type ParseQuantTarget accepts and
// checks that it reads back with the planned types and sane values.
func TestEveryQuant(t *testing.T) {
	for _, name := range strings.Split(gguf.QuantTargetNames(), ", ") {
		t.Run(name, func(t *testing.T) {
			o := Options{Quant: name, Seed: 1}
			l, err := Plan(quantTest, o)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := writeModel(t, quantTest, o)
			if ft, _ := f.FileType(); ft != l.Quant.FileType {
				t.Errorf("general.file_type = %v, want %v", ft, l.Quant.FileType)
			}
			for i, ti := range f.Tensors() {
				if ti.Type != l.Tensors[i].Type {
					t.Errorf("%s is %v, planned %v", ti.Name, ti.Type, l.Tensors[i].Type)
				}
				if len(ti.Shape) < 2 {
					continue
				}
				vals, _ := dequantized(t, f, ti.Name)
				for _, v := range vals {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("%s holds %v", ti.Name, v)
					}
				}
				// The 1.6–2-bit types keep the scale of the values only
				// roughly (TQ1_0 rounds to -d, 0, d with d the block's
				// absolute max); 3 bits and more keep the std within
				// 15%.
				tol := 0.15
				if bits := 8 * float64(ti.Size) / float64(ti.Elements()); bits < 3 {
					tol = 0.6
				}
				want := 1 / math.Sqrt(float64(ti.Shape[0]))
				if _, s := meanStd(vals); math.Abs(s/want-1) > tol {
					t.Errorf("%s (%v): std %.4f, want %.4f ± %.0f%%", ti.Name, ti.Type, s, want, 100*tol)
				}
			}
		})
	}
}

// TestStrictRefusesFallback: Qwen 2.5 0.5B's width, 896, is no multiple of
// the K-quants' 256, so its Q4_K_M falls back as llama-quantize's does;
// Strict makes that an error naming the tensor and the types.
func TestStrictRefusesFallback(t *testing.T) {
	p := mustPreset(t, "qwen2.5-0.5b")
	l, err := Plan(p, Options{Quant: "Q4_K_M"})
	if err != nil {
		t.Fatal(err)
	}
	fallbacks := 0
	for _, tt := range l.Tensors {
		if tt.Fallback {
			fallbacks++
			if tt.Type.BlockSize() == 256 {
				t.Errorf("%s fell back to %v, whose block does not fit either", tt.Name, tt.Type)
			}
		}
	}
	if fallbacks == 0 {
		t.Error("no tensor fell back")
	}
	_, err = Plan(p, Options{Quant: "Q4_K_M", Strict: true})
	// The tied token_embd is the output tensor, which the mix puts in Q8_0
	// when its rows do not fit (no fallback); the first fallback is attn_q.
	for _, want := range []string{"qwen2.5-0.5b", "Q4_K_M", `"blk.0.attn_q.weight"`, "896", "block of 256", "Q5_0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Strict: %v, want an error containing %q", err, want)
		}
	}
	// A type whose blocks fit is fine under Strict.
	if _, err := Plan(p, Options{Quant: "Q8_0", Strict: true}); err != nil {
		t.Error(err)
	}
}

// TestMoEPreset writes the Qwen 3 MoE test preset at several mixes and
// checks what engine/model will read: the expert keys and the mixture
// engine/arch makes of them, the experts stacked [cols, rows, experts]
// with every expert's values N(0, 1/cols), the router kept F32 as
// llama-quantize keeps it, the expert rows no 256-block divides (64 and
// 128 wide) fallen back from the K-quants as llama-quantize's do, and
// MXFP4_MOE's MXFP4 on the expert stacks alone.
func TestMoEPreset(t *testing.T) {
	p := mustPreset(t, "tiny-qwen3moe")
	for _, q := range []string{"Q4_K_M", "Q2_K", "Q8_0", "MXFP4_MOE", "F16"} {
		t.Run(q, func(t *testing.T) {
			o := Options{Quant: q, Seed: 7}
			l, err := Plan(p, o)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := writeModel(t, p, o)
			for i, ti := range f.Tensors() {
				want := l.Tensors[i]
				if ti.Name != want.Name || ti.Type != want.Type || !slices.Equal(ti.Shape, want.Shape) {
					t.Errorf("tensor %d: %s %v %v, planned %s %v %v", i, ti.Name, ti.Type, ti.Shape, want.Name, want.Type, want.Shape)
				}
				stack := strings.HasSuffix(ti.Name, "_exps.weight")
				switch {
				case strings.HasSuffix(ti.Name, "ffn_gate_inp.weight") && ti.Type != gguf.TypeF32:
					t.Errorf("%s is %v, want the router F32", ti.Name, ti.Type)
				case stack && q == "MXFP4_MOE" && ti.Type != gguf.TypeMXFP4:
					t.Errorf("%s is %v, want MXFP4", ti.Name, ti.Type)
				case !stack && q == "MXFP4_MOE" && len(ti.Shape) > 1 && ti.Type == gguf.TypeMXFP4:
					t.Errorf("%s is MXFP4, which MXFP4_MOE gives the expert stacks only", ti.Name)
				case stack && strings.Contains(q, "_K") && (!want.Fallback || ti.Type.BlockSize() != 32):
					t.Errorf("%s is %v (%s), want a fallback to a 32-block type", ti.Name, ti.Type, want.Note)
				}
			}
			for _, c := range []struct {
				name       string
				rows, cols uint64
				experts    uint64
			}{
				{"blk.2.ffn_gate_exps.weight", 64, 128, 8},
				{"blk.2.ffn_up_exps.weight", 64, 128, 8},
				{"blk.2.ffn_down_exps.weight", 128, 64, 8},
			} {
				vals, ti := dequantized(t, f, c.name)
				if !slices.Equal(ti.Shape, []uint64{c.cols, c.rows, c.experts}) {
					t.Fatalf("%s: shape %v, want [%d %d %d]", c.name, ti.Shape, c.cols, c.rows, c.experts)
				}
				// 8192 values an expert: the sample std is within 2% of
				// σ; the 4-bit types' rounding adds a few percent more.
				want := 1 / math.Sqrt(float64(c.cols))
				per := int(c.rows * c.cols)
				for e := range int(c.experts) {
					if m, s := meanStd(vals[e*per : (e+1)*per]); math.Abs(m) > 0.05*want || math.Abs(s/want-1) > 0.15 {
						t.Errorf("%s expert %d: mean %.4f std %.4f, want 0 and %.4f", c.name, e, m, s, want)
					}
				}
			}
			c, err := arch.ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			if e := c.MoE; e == nil || e.Experts != 8 || e.Used != 3 || e.FF != 64 || !e.Renorm || e.Sigmoid {
				t.Errorf("MoE %+v, want 8 experts of 64, 3 used, renormalised softmax", e)
			}
		})
	}
}

// TestGemma4MoEPreset writes the Gemma 4 mixture's test preset at several
// mixes and checks what engine/model will read: the expert keys and the
// mixture engine/arch makes of them (beside the dense feed-forward, on the
// router's own norm, renormalised), the global layers' single KV head of
// 64 and no attn_v, the stacks [cols, rows, experts] with every expert's
// values N(0, 1/cols), the router F32, its gain and the per-expert scale
// drawn as norm gains around 1, and the rows no 256-block divides fallen
// back from the K-quants.
func TestGemma4MoEPreset(t *testing.T) {
	p := mustPreset(t, "tiny-gemma4moe")
	for _, q := range []string{"Q4_K_M", "Q8_0", "MXFP4_MOE", "F16"} {
		t.Run(q, func(t *testing.T) {
			o := Options{Quant: q, Seed: 8}
			l, err := Plan(p, o)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := writeModel(t, p, o)
			for i, ti := range f.Tensors() {
				want := l.Tensors[i]
				if ti.Name != want.Name || ti.Type != want.Type || !slices.Equal(ti.Shape, want.Shape) {
					t.Errorf("tensor %d: %s %v %v, planned %s %v %v", i, ti.Name, ti.Type, ti.Shape, want.Name, want.Type, want.Shape)
				}
				stack := strings.HasSuffix(ti.Name, "_exps.weight")
				ffn := len(ti.Shape) > 1 && strings.Contains(ti.Name, ".ffn_") && !strings.Contains(ti.Name, "gate_inp")
				switch {
				case strings.HasSuffix(ti.Name, "ffn_gate_inp.weight") && ti.Type != gguf.TypeF32:
					t.Errorf("%s is %v, want the router F32", ti.Name, ti.Type)
				case stack && q == "MXFP4_MOE" && ti.Type != gguf.TypeMXFP4:
					t.Errorf("%s is %v, want MXFP4", ti.Name, ti.Type)
				case ffn && strings.Contains(q, "_K") && (!want.Fallback || ti.Type.BlockSize() != 32):
					// The experts' and the dense feed-forward's rows (128,
					// 64, 96) fit no 256-block; the attention's are the
					// 8-expert rules' (Q8_0 k and v, Q5_K output).
					t.Errorf("%s is %v (%s), want a fallback to a 32-block type", ti.Name, ti.Type, want.Note)
				}
			}
			for _, name := range []string{"blk.2.ffn_gate_inp.scale", "blk.2.ffn_down_exps.scale", "blk.2.post_ffw_norm_2.weight"} {
				vals, _ := dequantized(t, f, name)
				for _, v := range vals {
					if v < 0.5 || v > 1.5 {
						t.Errorf("%s holds %v, want gains around 1", name, v)
						break
					}
				}
			}
			for _, c := range []struct {
				name       string
				rows, cols uint64
			}{
				{"blk.5.ffn_gate_up_exps.weight", 128, 128},
				{"blk.5.ffn_down_exps.weight", 128, 64},
			} {
				vals, ti := dequantized(t, f, c.name)
				if !slices.Equal(ti.Shape, []uint64{c.cols, c.rows, 8}) {
					t.Fatalf("%s: shape %v, want [%d %d 8]", c.name, ti.Shape, c.cols, c.rows)
				}
				want := 1 / math.Sqrt(float64(c.cols))
				per := int(c.rows * c.cols)
				for e := range 8 {
					if m, s := meanStd(vals[e*per : (e+1)*per]); math.Abs(m) > 0.05*want || math.Abs(s/want-1) > 0.15 {
						t.Errorf("%s expert %d: mean %.4f std %.4f, want 0 and %.4f", c.name, e, m, s, want)
					}
				}
			}
			for _, c := range []struct {
				name  string
				shape []uint64 // nil: absent
			}{
				{"blk.0.attn_v.weight", []uint64{128, 64}},
				{"blk.2.attn_v.weight", nil},
				{"blk.5.attn_v.weight", nil},
				{"blk.2.attn_k.weight", []uint64{128, 64}},
				{"blk.2.post_norm.weight", nil},
			} {
				ti, ok := f.Tensor(c.name)
				if ok != (c.shape != nil) || ok && !slices.Equal(ti.Shape, c.shape) {
					t.Errorf("%s: %v (present %v), want %v", c.name, ti.Shape, ok, c.shape)
				}
			}
			c, err := arch.ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			c.Vocab = p.Vocab
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if e := c.MoE; e == nil || e.Experts != 8 || e.Used != 3 || e.FF != 64 || !e.Dense || !e.RouterNorm || !e.Renorm || e.Sigmoid {
				t.Errorf("MoE %+v, want 8 experts of 64, 3 used, beside the dense feed-forward, on their own norm, renormalised", e)
			}
			if !c.ValueFromKey || c.PerLayerInput != 0 || c.FF != 96 {
				t.Errorf("ValueFromKey %v, PerLayerInput %d, FF %d: want values from the keys, no PLE, a dense 96", c.ValueFromKey, c.PerLayerInput, c.FF)
			}
			for l, want := range map[int]arch.LayerShape{
				1: {HeadDim: 32, KVHeads: 2, FF: 96, RopeDims: 32, KVLayer: 1},
				2: {HeadDim: 64, KVHeads: 1, FF: 96, RopeDims: 64, KVLayer: 2, RopeFactors: true},
			} {
				if got := c.Shape(l); got != want {
					t.Errorf("layer %d: %+v, want %+v", l, got, want)
				}
			}
		})
	}
}

// TestGPTOSSPreset writes the gpt-oss test preset at several mixes and
// checks what engine/model will read: the expert keys and the mixture
// engine/arch makes of them (gpt-oss's unit, a softmax among the chosen),
// the even layers sliding, YaRN; the experts stacked [cols, rows,
// experts] with every expert's values N(0, 1/cols), MXFP4 at MXFP4_MOE
// and fallen back to 32-blocks at the K-quants (rows of 128 and 64); the
// router, its bias, the sinks and the stacks of biases ([rows, experts])
// F32 at every mix, the sinks of order one and the biases small.
func TestGPTOSSPreset(t *testing.T) {
	p := mustPreset(t, "tiny-gpt-oss")
	for _, q := range []string{"Q4_K_M", "Q8_0", "MXFP4_MOE", "F16"} {
		t.Run(q, func(t *testing.T) {
			o := Options{Quant: q, Seed: 9}
			l, err := Plan(p, o)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := writeModel(t, p, o)
			for i, ti := range f.Tensors() {
				want := l.Tensors[i]
				if ti.Name != want.Name || ti.Type != want.Type || !slices.Equal(ti.Shape, want.Shape) {
					t.Errorf("tensor %d: %s %v %v, planned %s %v %v", i, ti.Name, ti.Type, ti.Shape, want.Name, want.Type, want.Shape)
				}
				stack := strings.HasSuffix(ti.Name, "_exps.weight")
				kept := strings.HasSuffix(ti.Name, ".bias") || strings.Contains(ti.Name, "gate_inp") || strings.Contains(ti.Name, "sinks")
				switch {
				case kept && ti.Type != gguf.TypeF32:
					t.Errorf("%s is %v, want F32", ti.Name, ti.Type)
				case stack && q == "MXFP4_MOE" && ti.Type != gguf.TypeMXFP4:
					t.Errorf("%s is %v, want MXFP4", ti.Name, ti.Type)
				case !stack && ti.Type == gguf.TypeMXFP4:
					t.Errorf("%s is MXFP4, which MXFP4_MOE gives the expert stacks only", ti.Name)
				case stack && strings.Contains(q, "_K") && (!want.Fallback || ti.Type.BlockSize() != 32):
					t.Errorf("%s is %v (%s), want a fallback to a 32-block type", ti.Name, ti.Type, want.Note)
				}
			}
			for _, c := range []struct {
				name       string
				rows, cols uint64
			}{
				{"blk.3.ffn_gate_exps.weight", 64, 128},
				{"blk.3.ffn_up_exps.weight", 64, 128},
				{"blk.3.ffn_down_exps.weight", 128, 64},
			} {
				vals, ti := dequantized(t, f, c.name)
				if !slices.Equal(ti.Shape, []uint64{c.cols, c.rows, 8}) {
					t.Fatalf("%s: shape %v, want [%d %d 8]", c.name, ti.Shape, c.cols, c.rows)
				}
				want := 1 / math.Sqrt(float64(c.cols))
				per := int(c.rows * c.cols)
				for e := range 8 {
					if m, s := meanStd(vals[e*per : (e+1)*per]); math.Abs(m) > 0.05*want || math.Abs(s/want-1) > 0.15 {
						t.Errorf("%s expert %d: mean %.4f std %.4f, want 0 and %.4f", c.name, e, m, s, want)
					}
				}
			}
			for _, c := range []struct {
				name  string
				shape []uint64
				sigma float64
			}{
				{"blk.1.attn_sinks.weight", []uint64{4}, sinkSigma},
				{"blk.1.ffn_gate_exps.bias", []uint64{64, 8}, biasSigma},
				{"blk.1.ffn_down_exps.bias", []uint64{128, 8}, biasSigma},
				{"blk.1.ffn_gate_inp.bias", []uint64{8}, biasSigma},
				{"blk.1.attn_output.bias", []uint64{128}, biasSigma},
			} {
				vals, ti := dequantized(t, f, c.name)
				if !slices.Equal(ti.Shape, c.shape) {
					t.Errorf("%s: shape %v, want %v", c.name, ti.Shape, c.shape)
				}
				// Every value within 5σ, not all 0, and the std of the
				// larger ones within 15% of σ (the 4 sinks are too few).
				if m, s := meanStd(vals); slices.ContainsFunc(vals, func(v float32) bool { return math.Abs(float64(v)) > 5*c.sigma }) ||
					len(vals) > 64 && math.Abs(s/c.sigma-1) > 0.15 || s == 0 {
					t.Errorf("%s: mean %.4f std %.4f, want 0 and %v", c.name, m, s, c.sigma)
				}
			}
			c, err := arch.ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			c.Vocab = p.Vocab
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if e := c.MoE; e == nil || e.Experts != 8 || e.Used != 3 || e.FF != 64 || !e.OAI || !e.Renorm || e.Sigmoid || c.FF != 64 {
				t.Errorf("MoE %+v, want 8 experts of 64, 3 used, gpt-oss's unit, softmax among the chosen", e)
			}
			for l, want := range []bool{true, false, true, false} {
				if c.Sliding(l) != want || c.Window(l) != map[bool]int{true: 16}[want] {
					t.Errorf("layer %d: sliding %v window %d", l, c.Sliding(l), c.Window(l))
				}
			}
			if y := c.YaRN; y == nil || y.Factor != 4 || y.BetaFast != 32 || y.BetaSlow != 1 || c.RopeOrigContext != 512 || !c.NeoX || !c.QKVBias {
				t.Errorf("YaRN %+v over %d, NeoX %v, QKVBias %v", y, c.RopeOrigContext, c.NeoX, c.QKVBias)
			}
		})
	}
}

// TestStandInPlansAsTheRealFile checks planTypes' premise: a full-size
// model file and the stand-in Plan builds get the same types from
// gguf.PlanRequantize.
func TestStandInPlansAsTheRealFile(t *testing.T) {
	for _, name := range []string{"tiny-llama", "tiny-qwen2", "tiny-phi3", "tiny-gemma3", "tiny-qwen3moe", "tiny-gemma4moe", "tiny-gpt-oss"} {
		p := mustPreset(t, name)
		full, _ := writeModel(t, p, Options{Quant: "F32"})
		f32, err := Plan(p, Options{Quant: "F32"})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"Q4_K_M", "Q3_K_S", "Q2_K", "IQ4_XS", "TQ1_0", "MXFP4_MOE", "Q6_K", "F16"} {
			target, err := gguf.ParseQuantTarget(q)
			if err != nil {
				t.Fatal(err)
			}
			plans, err := gguf.PlanRequantize(full, gguf.RequantizeOptions{Target: target})
			if err != nil {
				t.Fatal(err)
			}
			l, err := f32.Requantized(q, false)
			if err != nil {
				t.Fatal(err)
			}
			for i, pl := range plans {
				if pl.To != l.Tensors[i].Type || pl.OutSize != l.Tensors[i].Size {
					t.Errorf("%s %s %s: the full file plans %v (%d bytes), the stand-in %v (%d bytes)",
						name, q, pl.Name, pl.To, pl.OutSize, l.Tensors[i].Type, l.Tensors[i].Size)
				}
			}
		}
	}
}

func TestRequantizedIsPlan(t *testing.T) {
	p := mustPreset(t, "tiny-gemma2")
	first, err := Plan(p, Options{Quant: "Q8_0", Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"Q4_0", "Q4_K_M", "F16"} {
		re, err := first.Requantized(q, false)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := Plan(p, Options{Quant: q, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(re.Tensors) != fmt.Sprint(direct.Tensors) || re.FileSize != direct.FileSize || re.Quant != direct.Quant {
			t.Errorf("%s: Requantized differs from Plan", q)
		}
	}
	if _, err := first.Requantized("Q4_K", true); err == nil {
		t.Error("Requantized ignored strict")
	}
}

// pooledTest has tensors above directValues (token_embd 2.1M values,
// ffn_* 393K), which are assembled from pools.
var pooledTest = Preset{
	Name: "pooled-test", Model: "test", Arch: "qwen2",
	Vocab: 8320, Hidden: 256, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 1536,
	Context: 512, Eps: 1e-6, RopeBase: 10000, TiedEmbeddings: true, Tokenizer: "qwen",
}

func TestPooledTensors(t *testing.T) {
	// Q8_0 quantizes fast and F16 takes the float path; the pool is the
	// same code for every type.
	for _, q := range []string{"Q8_0", "F16"} {
		l, err := Plan(pooledTest, Options{Quant: q})
		if err != nil {
			t.Fatal(err)
		}
		npooled := 0
		for i, tt := range l.Tensors {
			if pooled(tt, l.specs[i].kind) {
				npooled++
			}
		}
		if npooled < 2 {
			t.Fatalf("%s: %d pooled tensors: the test does not test the pools", q, npooled)
		}
		f, _ := writeModel(t, pooledTest, Options{Quant: q, Seed: 9})
		for _, name := range []string{"token_embd.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"} {
			vals, ti := dequantized(t, f, name)
			want := 1 / math.Sqrt(float64(ti.Shape[0]))
			// Over 400K values the sample std is within 0.2% of the
			// pool's, and the pool's 2M values are as close to σ; Q8_0's
			// rounding adds well under 1%.
			if m, s := meanStd(vals); math.Abs(m) > 0.02*want || math.Abs(s/want-1) > 0.05 {
				t.Errorf("%s %s: mean %.5f std %.5f, want 0 and %.5f", q, name, m, s, want)
			}
			// Rows are distinct draws.
			data, _ := f.Data(ti)
			nrows := int(ti.Elements() / ti.Shape[0])
			rowBytes := len(data) / nrows
			rows := map[string]bool{}
			for r := range nrows {
				key := string(data[r*rowBytes : (r+1)*rowBytes])
				if rows[key] {
					t.Fatalf("%s %s: row %d repeats an earlier row", q, name, r)
				}
				rows[key] = true
			}
		}
	}
}

// TestPooledShortRows: rows of 2 or 3 blocks are pooled only where the
// matrix is short enough that two equal rows stay as unlikely as for a
// vocabulary of 4-block rows (2^-16), counting the rows of one matrix of
// a stack of experts.
func TestPooledShortRows(t *testing.T) {
	for _, c := range []struct {
		shape []uint64
		want  bool
	}{
		{[]uint64{768, 2048, 128}, true},        // Qwen3-30B-A3B's ffn_down_exps: 3 × 13 bits ≥ 2·11 + 16
		{[]uint64{768, 1 << 20}, false},         // 3 blocks, 2^20 rows: 39 bits < 56
		{[]uint64{512, 1 << 5, 1 << 14}, true},  // 2 blocks, 2^5 rows a matrix: 26 bits ≥ 26
		{[]uint64{512, 1 << 8, 1 << 11}, false}, // 2 blocks, 2^8 rows: 26 bits < 32
		{[]uint64{256, 4096, 16}, false},        // a row of one block repeats
		{[]uint64{1024, 1 << 18}, true},         // 4 blocks: pooled whatever the height
	} {
		if got := pooled(Tensor{Name: "m", Type: gguf.TypeQ4_K, Shape: c.shape}, kindMatrix); got != c.want {
			t.Errorf("Q4_K %v: pooled %v, want %v", c.shape, got, c.want)
		}
	}
}

// TestDeterministic: the seed alone decides the bytes, whatever the number
// of workers.
func TestDeterministic(t *testing.T) {
	for _, c := range []struct {
		p Preset
		q string
	}{{mustPreset(t, "tiny-gemma3"), "Q4_K_M"}, {pooledTest, "Q8_0"}} {
		_, a := writeModel(t, c.p, Options{Quant: c.q, Seed: 42})
		prev := runtime.GOMAXPROCS(1)
		_, b := writeModel(t, c.p, Options{Quant: c.q, Seed: 42})
		runtime.GOMAXPROCS(prev)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the same seed on 1 and %d workers gave different files", c.p.Name, prev)
		}
		_, d := writeModel(t, c.p, Options{Quant: c.q, Seed: 43})
		if len(d) != len(a) {
			t.Fatalf("%s: another seed changed the layout", c.p.Name)
		}
		if bytes.Equal(a, d) {
			t.Errorf("%s: seeds 42 and 43 gave the same file", c.p.Name)
		}
	}
}

// TestRopeFreqs checks Llama 3.1 8B's factors against values computed by
// hand (in float64) from the converter's formula: 29 pairs of high
// frequency keep 1, 29 of low frequency get the factor 8, and the 6
// between blend.
func TestRopeFreqs(t *testing.T) {
	got := ropeFreqs(mustPreset(t, "llama-3.1-8b"))
	if len(got) != 64 {
		t.Fatalf("%d factors, want 64", len(got))
	}
	blend := map[int]float64{29: 1.207484, 30: 1.553415, 31: 2.026313, 32: 2.69453, 33: 3.684253, 34: 5.257327}
	for i, g := range got {
		want := 1.0
		switch {
		case i >= 35:
			want = 8
		case i >= 29:
			want = blend[i]
		}
		// The hand values have 7 digits; float32 has 7.
		if math.Abs(float64(g)-want) > 2e-6*want {
			t.Errorf("factor %d = %v, want %v", i, g, want)
		}
	}
}

// TestForwardStaysFinite runs a plain float64 forward pass of a deep,
// narrow Llama (24 layers) over the written weights: the scaling of the
// weights must keep the residual stream and the logits of order one. RoPE
// is left out: it rotates pairs, so it changes no magnitude this checks.
func TestForwardStaysFinite(t *testing.T) {
	p := Preset{
		Name: "deep-test", Model: "test", Arch: "llama",
		Vocab: 300, Hidden: 64, Layers: 24, Heads: 4, KVHeads: 2, HeadDim: 16, FF: 128,
		Context: 512, Eps: 1e-5, RopeBase: 10000, Tokenizer: "llama3",
	}
	f, _ := writeModel(t, p, Options{Quant: "Q8_0", Seed: 11})
	w := func(name string) []float32 { v, _ := dequantized(t, f, name); return v }
	// matvec is y = W x for a ggml [cols, rows] matrix.
	matvec := func(m []float32, x []float64) []float64 {
		cols := len(x)
		y := make([]float64, len(m)/cols)
		for r := range y {
			for c, xv := range x {
				y[r] += float64(m[r*cols+c]) * xv
			}
		}
		return y
	}
	rmsnorm := func(x []float64, g []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(len(x))+p.Eps)
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = v * s * float64(g[i])
		}
		return y
	}

	tokens := []int{5, 77, 140, 9, 260, 33, 101, 2}
	emb := w("token_embd.weight")
	hd, group := p.HeadDim, p.Heads/p.KVHeads
	xs := make([][]float64, len(tokens))
	for i, tk := range tokens {
		xs[i] = make([]float64, p.Hidden)
		for j := range xs[i] {
			xs[i][j] = float64(emb[tk*p.Hidden+j])
		}
	}
	for l := range p.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		wq, wk, wv, wo := w(b+"attn_q.weight"), w(b+"attn_k.weight"), w(b+"attn_v.weight"), w(b+"attn_output.weight")
		wg, wu, wd := w(b+"ffn_gate.weight"), w(b+"ffn_up.weight"), w(b+"ffn_down.weight")
		an, fn := w(b+"attn_norm.weight"), w(b+"ffn_norm.weight")
		ks, vs := make([][]float64, len(xs)), make([][]float64, len(xs))
		for i, x := range xs {
			h := rmsnorm(x, an)
			q := matvec(wq, h)
			ks[i], vs[i] = matvec(wk, h), matvec(wv, h)
			// Causal attention over positions 0..i, one head at a time.
			att := make([]float64, p.Heads*hd)
			for hh := range p.Heads {
				kv := hh / group
				scores := make([]float64, i+1)
				top := math.Inf(-1)
				for j := range scores {
					for d := range hd {
						scores[j] += q[hh*hd+d] * ks[j][kv*hd+d]
					}
					scores[j] /= math.Sqrt(float64(hd))
					top = max(top, scores[j])
				}
				var sum float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - top)
					sum += scores[j]
				}
				for j := range scores {
					for d := range hd {
						att[hh*hd+d] += scores[j] / sum * vs[j][kv*hd+d]
					}
				}
			}
			for j, v := range matvec(wo, att) {
				x[j] += v
			}
			h = rmsnorm(x, fn)
			g, u := matvec(wg, h), matvec(wu, h)
			for j := range g {
				g[j] = g[j] / (1 + math.Exp(-g[j])) * u[j] // SwiGLU
			}
			for j, v := range matvec(wd, g) {
				x[j] += v
			}
		}
	}
	last := xs[len(xs)-1]
	var rms float64
	for _, v := range last {
		rms += v * v
	}
	rms = math.Sqrt(rms / float64(len(last)))
	logits := matvec(w("output.weight"), rmsnorm(last, w("output_norm.weight")))
	var lf []float32
	for _, v := range logits {
		lf = append(lf, float32(v))
	}
	_, std := meanStd(lf)
	// Each layer adds a unit-variance update, so after 24 the residual's
	// RMS is about sqrt(24) ≈ 5; logits are a unit-variance projection of
	// a normalized vector, so their std is about 1. A factor 3 either way
	// is still sane; a scale bug is a factor sqrt(width) or more.
	if math.IsNaN(rms) || rms < 1 || rms > 15 {
		t.Errorf("residual RMS after %d layers = %v, want about 5", p.Layers, rms)
	}
	if math.IsNaN(std) || std < 0.33 || std > 3 {
		t.Errorf("logits std = %v, want about 1", std)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	p := mustPreset(t, "tiny-phi3")
	var last Progress
	calls := 0
	o := Options{Quant: "Q8_0", Progress: func(pr Progress) {
		if pr.BytesDone < last.BytesDone || pr.Index < last.Index {
			t.Errorf("progress went back: %+v after %+v", pr, last)
		}
		last = pr
		calls++
	}}
	if err := WriteFile(path, p, o); err != nil {
		t.Fatal(err)
	}
	l, _ := Plan(p, o)
	if st, err := os.Stat(path); err != nil || st.Size() != l.FileSize {
		t.Errorf("stat: %v, want %d bytes", err, l.FileSize)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.tmp is left: %v", path, err)
	}
	if last.BytesDone != last.BytesTotal || last.BytesTotal != int64(l.TensorBytes) || last.Index != len(l.Tensors)-1 || calls < len(l.Tensors) {
		t.Errorf("last progress %+v after %d calls, want all %d bytes of %d tensors", last, calls, l.TensorBytes, len(l.Tensors))
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestWriteCanceled(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "canceled.gguf")
	ctx, cancel := context.WithCancel(context.Background())
	o := Options{Quant: "F32", Context: ctx, Progress: func(pr Progress) {
		if pr.Index >= 3 {
			cancel()
		}
	}}
	err := WriteFile(path, mustPreset(t, "tiny-qwen3"), o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteFile = %v, want context.Canceled", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("a canceled write left %v", entries)
	}
	// The pipeline's goroutines are gone: a canceled Write to a writer
	// that fails also returns.
	err = Write(failingWriter{}, mustPreset(t, "tiny-qwen3"), Options{Quant: "F32"})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write to a failing writer = %v", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// BenchmarkWriteLlama1B measures making the data of Llama 3.2 1B at Q4_K_M
// (800 MB) without a disk.
func BenchmarkWriteLlama1B(b *testing.B) {
	p := mustPreset(b, "llama-3.2-1b")
	l, err := Plan(p, Options{Quant: "Q4_K_M"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(l.FileSize)
	for b.Loop() {
		if err := Write(io.Discard, p, Options{Quant: "Q4_K_M"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlanGemma3(b *testing.B) {
	p := mustPreset(b, "gemma-3-1b")
	for b.Loop() {
		if _, err := Plan(p, Options{Quant: "Q4_K_M"}); err != nil {
			b.Fatal(err)
		}
	}
}
