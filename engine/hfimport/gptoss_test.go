package hfimport

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// The gpt-oss test sizes: 4 layers, sliding and global in turn; 2 heads of
// 6 (12 wide against a width of 32) on 1 KV head; 4 experts of 64, 2
// chosen. The width and the experts' width are whole MXFP4 blocks and
// differ, so that a transposition that swapped them shows.
const (
	ossLayers, ossHidden, ossHeads, ossKV, ossHD = 4, 32, 2, 1, 6
	ossExperts, ossUsed, ossFF                   = 4, 2, 64
)

// gptossModel is a GptOssForCausalLM checkpoint as transformers saves one
// (bf16, as the released non-expert weights are): biases on q, k, v and
// o, a sink a head, the router with its bias, and each layer's experts in
// transformers' layout, gate_up_proj [experts, hidden, 2·ff] with gate
// and up interleaved (even and odd columns) and its bias
// [experts, 2·ff] likewise, down_proj [experts, ff, hidden] and its bias
// [experts, hidden]. The config is the released one's but for the sizes:
// rope_scaling YaRN over 4096 of 131072 with truncate false, window 128.
func gptossModel(extra map[string]any) *hfModel {
	cfg := map[string]any{
		"architectures": []string{"GptOssForCausalLM"}, "model_type": "gpt_oss",
		"vocab_size": small.vocab, "hidden_size": ossHidden, "intermediate_size": ossFF, "num_hidden_layers": ossLayers,
		"num_attention_heads": ossHeads, "num_key_value_heads": ossKV, "head_dim": ossHD,
		"num_local_experts": ossExperts, "num_experts_per_tok": ossUsed, "experts_per_token": ossUsed,
		"max_position_embeddings": 131072, "initial_context_length": 4096, "rms_norm_eps": 1e-5,
		"tie_word_embeddings": false, "attention_bias": true, "hidden_act": "silu", "swiglu_limit": 7.0,
		"sliding_window": 128, "layer_types": []string{"sliding_attention", "full_attention", "sliding_attention", "full_attention"},
		"router_aux_loss_coef": 0.9, "rope_theta": 150000,
		"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
			"original_max_position_embeddings": 4096, "truncate": false},
		"bos_token_id": 1, "eos_token_id": 2,
	}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	rng := rand.New(rand.NewPCG(8, 8))
	var ts []stTensor
	add := func(name string, shape ...int64) {
		ts = append(ts, randomTensor(rng, name, safetensors.BF16, shape...))
	}
	H, E, F := int64(ossHidden), int64(ossExperts), int64(ossFF)
	q, kv := int64(ossHeads*ossHD), int64(ossKV*ossHD)
	add("model.embed_tokens.weight", int64(small.vocab), H)
	for i := range ossLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", H)
		for _, proj := range []struct {
			name string
			rows int64
		}{{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}} {
			add(p+"self_attn."+proj.name+".weight", proj.rows, H)
			add(p+"self_attn."+proj.name+".bias", proj.rows)
		}
		add(p+"self_attn.o_proj.weight", H, q)
		add(p+"self_attn.o_proj.bias", H)
		add(p+"self_attn.sinks", ossHeads)
		add(p+"post_attention_layernorm.weight", H)
		add(p+"mlp.router.weight", E, H)
		add(p+"mlp.router.bias", E)
		add(p+"mlp.experts.gate_up_proj", E, H, 2*F)
		add(p+"mlp.experts.gate_up_proj_bias", E, 2*F)
		add(p+"mlp.experts.down_proj", E, F, H)
		add(p+"mlp.experts.down_proj_bias", E, H)
	}
	add("model.norm.weight", H)
	add("lm_head.weight", int64(small.vocab), H)
	return &hfModel{
		config:   cfg,
		tensors:  ts,
		tokenCfg: map[string]any{"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "chat_template": "{{ messages }}"},
	}
}

// fp4Values are the E2M1 levels of transformers' FP4_VALUES, by code.
var fp4Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}

// mxfp4 is m with its experts as the released checkpoints hold them:
// gate_up_proj_blocks [experts, 2·ff, hidden/32, 16] and
// gate_up_proj_scales [experts, 2·ff, hidden/32], down_proj's likewise
// [experts, hidden, ff/32, …] (out-features first, gate and up rows
// interleaved), random codes under scales 2^-7 to 2^2; and dense is the
// same model with those experts as transformers dequantizes them
// (convert_moe_packed_tensors: each row's values, then transposed to
// in-features first), in F32.
func (m *hfModel) mxfp4() (packed, dense *hfModel) {
	packed = &hfModel{config: m.config, tokenCfg: m.tokenCfg}
	dense = &hfModel{config: m.config, tokenCfg: m.tokenCfg}
	for _, x := range m.tensors {
		if !strings.HasSuffix(x.name, ".gate_up_proj") && !strings.HasSuffix(x.name, ".down_proj") {
			packed.tensors = append(packed.tensors, x)
			dense.tensors = append(dense.tensors, x)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range ossLayers {
		for _, w := range []struct {
			name       string
			rows, cols int64 // out, in
		}{{"gate_up_proj", 2 * ossFF, ossHidden}, {"down_proj", ossHidden, ossFF}} {
			name := fmt.Sprintf("model.layers.%d.mlp.experts.%s", i, w.name)
			nb := w.cols / 32
			blocks := make([]byte, ossExperts*w.rows*nb*16)
			scales := make([]byte, ossExperts*w.rows*nb)
			for j := range blocks {
				blocks[j] = byte(rng.IntN(256))
			}
			for j := range scales {
				scales[j] = byte(120 + rng.IntN(10))
			}
			// values[k][r][c], then transposed to [k][c][r].
			values := make([]float32, ossExperts*w.cols*w.rows)
			for k := range int64(ossExperts) {
				for r := range w.rows {
					for c := range w.cols {
						row := k*w.rows + r
						b := blocks[(row*nb+c/32)*16+c%32/2]
						code := b >> (4 * (c % 2)) & 0xf
						v := fp4Values[code] * float32(math.Ldexp(1, int(scales[row*nb+c/32])-127))
						values[(k*w.cols+c)*w.rows+r] = v
					}
				}
			}
			packed.tensors = append(packed.tensors,
				stTensor{name: name + "_blocks", dtype: "U8", shape: []int64{ossExperts, w.rows, nb, 16}, raw: blocks},
				stTensor{name: name + "_scales", dtype: "U8", shape: []int64{ossExperts, w.rows, nb}, raw: scales})
			dense.tensors = append(dense.tensors, stTensor{name: name, dtype: safetensors.F32, shape: []int64{ossExperts, w.cols, w.rows}, values: values})
		}
	}
	packed.config = map[string]any{}
	for k, v := range m.config {
		packed.config[k] = v
	}
	packed.config["quantization_config"] = map[string]any{"quant_method": "mxfp4",
		"modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}
	return packed, dense
}

// TestImportGPTOSS imports a gpt-oss checkpoint into what llama.cpp's
// converter writes: the expert keys (intermediate_size as both widths),
// the window without a pattern (the alternation llama.cpp assumes), the
// YaRN keys; the biases, sinks and router F32 whatever the output type;
// each layer's experts transposed to GGUF's rows, gate and up the even and
// odd columns of gate_up_proj, their biases the even and odd entries. The
// file reads back into the mixture and the layers engine/arch runs.
func TestImportGPTOSS(t *testing.T) {
	m := gptossModel(nil)
	H, E, F := uint64(ossHidden), uint64(ossExperts), uint64(ossFF)
	for _, c := range []struct {
		typ     OutType
		experts gguf.Type
	}{{TypeAuto, gguf.TypeBF16}, {TypeF32, gguf.TypeF32}, {TypeF16, gguf.TypeF16}} {
		f := importModel(t, m.write(t), Options{Type: c.typ})
		checkKeys(t, f, "gpt-oss", map[string]any{
			"expert_count": uint32(ossExperts), "expert_used_count": uint32(ossUsed),
			"expert_feed_forward_length": uint32(ossFF), "feed_forward_length": uint32(ossFF),
			"context_length": uint32(131072), "attention.sliding_window": uint32(128), "attention.sliding_window_pattern": nil,
			"attention.key_length": uint32(ossHD), "attention.head_count": uint32(ossHeads), "attention.head_count_kv": uint32(ossKV),
			"rope.freq_base": float32(150000), "rope.scaling.type": "yarn", "rope.scaling.factor": float32(32),
			"rope.scaling.original_context_length": uint32(4096), "rope.scaling.yarn_beta_fast": float32(32), "rope.scaling.yarn_beta_slow": float32(1),
			"expert_weights_norm": nil, "expert_gating_func": nil,
		})
		for _, want := range []struct {
			name  string
			typ   gguf.Type
			shape []uint64 // nil: absent
		}{
			{"blk.1.attn_sinks.weight", gguf.TypeF32, []uint64{ossHeads}},
			{"blk.1.attn_q.bias", gguf.TypeF32, []uint64{ossHeads * ossHD}},
			{"blk.1.attn_output.bias", gguf.TypeF32, []uint64{H}},
			{"blk.1.post_attention_norm.weight", gguf.TypeF32, []uint64{H}},
			{"blk.1.ffn_gate_inp.weight", gguf.TypeF32, []uint64{H, E}},
			{"blk.1.ffn_gate_inp.bias", gguf.TypeF32, []uint64{E}},
			{"blk.1.ffn_gate_exps.weight", c.experts, []uint64{H, F, E}},
			{"blk.1.ffn_up_exps.weight", c.experts, []uint64{H, F, E}},
			{"blk.1.ffn_down_exps.weight", c.experts, []uint64{F, H, E}},
			{"blk.1.ffn_gate_exps.bias", gguf.TypeF32, []uint64{F, E}},
			{"blk.1.ffn_up_exps.bias", gguf.TypeF32, []uint64{F, E}},
			{"blk.1.ffn_down_exps.bias", gguf.TypeF32, []uint64{H, E}},
			{"blk.1.ffn_norm.weight", 0, nil},
			{"output.weight", c.experts, []uint64{H, uint64(small.vocab)}},
		} {
			info, ok := f.Tensor(want.name)
			switch {
			case want.shape == nil && ok:
				t.Errorf("%v: %s imported", c.typ, want.name)
			case want.shape != nil && (!ok || info.Type != want.typ || !slices.Equal(info.Shape, want.shape)):
				t.Errorf("%v: %s: %v %v (present %v), want %v %v", c.typ, want.name, info.Type, info.Shape, ok, want.typ, want.shape)
			}
		}
		if ft, _ := f.FileType(); ft != map[OutType]gguf.FileType{TypeAuto: 32, TypeF32: 0, TypeF16: 1}[c.typ] {
			t.Errorf("%v: general.file_type %v", c.typ, ft)
		}
	}

	f := importModel(t, m.write(t), Options{})
	for i := range ossLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		blk := fmt.Sprintf("blk.%d.", i)
		gateUp, down := m.tensor(p+"mlp.experts.gate_up_proj").values, m.tensor(p+"mlp.experts.down_proj").values
		gateUpBias, downBias := m.tensor(p+"mlp.experts.gate_up_proj_bias").values, m.tensor(p+"mlp.experts.down_proj_bias").values
		gate, up, dn := floats(t, f, blk+"ffn_gate_exps.weight"), floats(t, f, blk+"ffn_up_exps.weight"), floats(t, f, blk+"ffn_down_exps.weight")
		gb, ub := floats(t, f, blk+"ffn_gate_exps.bias"), floats(t, f, blk+"ffn_up_exps.bias")
		bad := map[string]int{}
		for k := range ossExperts {
			for r := range ossFF {
				for c := range ossHidden {
					// GGUF's [expert][row][col] is transformers'
					// [expert][col][2·row (+1 for up)].
					src := (k*ossHidden+c)*2*ossFF + 2*r
					if gate[(k*ossFF+r)*ossHidden+c] != gateUp[src] {
						bad["ffn_gate_exps.weight"]++
					}
					if up[(k*ossFF+r)*ossHidden+c] != gateUp[src+1] {
						bad["ffn_up_exps.weight"]++
					}
					// down: [expert][hidden row][ff col] from [expert][ff][hidden].
					if dn[(k*ossHidden+c)*ossFF+r] != down[(k*ossFF+r)*ossHidden+c] {
						bad["ffn_down_exps.weight"]++
					}
				}
				if gb[k*ossFF+r] != gateUpBias[k*2*ossFF+2*r] {
					bad["ffn_gate_exps.bias"]++
				}
				if ub[k*ossFF+r] != gateUpBias[k*2*ossFF+2*r+1] {
					bad["ffn_up_exps.bias"]++
				}
			}
		}
		for name, n := range bad {
			t.Errorf("%s%s: %d values out of place", blk, name, n)
		}
		for gg, hf := range map[string][]float32{
			"ffn_down_exps.bias": downBias, "attn_sinks.weight": m.tensor(p + "self_attn.sinks").values,
			"ffn_gate_inp.bias": m.tensor(p + "mlp.router.bias").values, "ffn_gate_inp.weight": m.tensor(p + "mlp.router.weight").values,
			"attn_output.bias": m.tensor(p + "self_attn.o_proj.bias").values,
		} {
			if !slices.Equal(floats(t, f, blk+gg), hf) {
				t.Errorf("%s%s is not the checkpoint's as stored", blk, gg)
			}
		}
	}

	c, err := arch.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = small.vocab
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if e := c.MoE; e == nil || e.Experts != ossExperts || e.Used != ossUsed || e.FF != ossFF || !e.OAI || !e.Renorm || e.Sigmoid || c.FF != ossFF {
		t.Errorf("MoE %+v (FF %d), want %d experts of %d, %d used, gpt-oss's unit, softmax among the chosen", e, c.FF, ossExperts, ossFF, ossUsed)
	}
	for i, want := range []bool{true, false, true, false} {
		if c.Sliding(i) != want {
			t.Errorf("layer %d sliding %v, want %v", i, c.Sliding(i), want)
		}
	}
	if y := c.YaRN; y == nil || y.Factor != 32 || y.BetaFast != 32 || y.BetaSlow != 1 || c.RopeOrigContext != 4096 || !c.NeoX || !c.QKVBias || c.SlidingWindow != 128 {
		t.Errorf("YaRN %+v over %d, NeoX %v, QKVBias %v, window %d", y, c.RopeOrigContext, c.NeoX, c.QKVBias, c.SlidingWindow)
	}
}

// TestImportGPTOSSChunks: the experts' transposition reads its source a
// chunk at a time; the chunk's size changes nothing of the output, nor
// does a transformers 5 config (rope_parameters instead of rope_theta and
// rope_scaling).
func TestImportGPTOSSChunks(t *testing.T) {
	dir := gptossModel(nil).write(t)
	var first []byte
	for _, chunk := range []int64{0, 1, 2, 7, 33, 4096} {
		mod, err := Open(dir, Options{Type: TypeF32})
		if err != nil {
			t.Fatal(err)
		}
		mod.chunk = chunk
		var buf bytes.Buffer
		if _, err := mod.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		mod.Close()
		if first == nil {
			first = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), first) {
			t.Errorf("chunk of %d bytes changes the output", chunk)
		}
	}
	v5 := gptossModel(map[string]any{"rope_theta": nil, "rope_scaling": nil, "rope_parameters": map[string]any{
		"rope_type": "yarn", "rope_theta": 150000, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
		"original_max_position_embeddings": 4096, "truncate": false}})
	want := importModel(t, dir, Options{Name: "m"})
	got := importModel(t, v5.write(t), Options{Name: "m"})
	sameImport(t, got, want)
	checkKeys(t, got, "gpt-oss", map[string]any{"rope.freq_base": float32(150000), "rope.scaling.factor": float32(32),
		"rope.scaling.original_context_length": uint32(4096)})
}

// TestImportGPTOSSMXFP4 imports the experts as the released checkpoints
// hold them (quantization_config mxfp4: U8 blocks and scales, out-features
// first) into ggml's MXFP4 unconverted, as llama.cpp's converter repacks
// them, whatever the output type, the file MOSTLY_MXFP4_MOE: their values
// are transformers' dequantization, gate and up its even and odd rows, and
// the same as the dense form's that transformers makes of them.
func TestImportGPTOSSMXFP4(t *testing.T) {
	packed, dense := gptossModel(nil).mxfp4()
	want := importModel(t, dense.write(t), Options{Type: TypeF32})
	for _, typ := range []OutType{TypeAuto, TypeF32} {
		mod, err := Open(packed.write(t), Options{Type: typ})
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range mod.Tensors {
			if ti.Name == "blk.2.ffn_up_exps.weight" && ti.Source != "model.layers.2.mlp.experts.gate_up_proj_blocks, model.layers.2.mlp.experts.gate_up_proj_scales" {
				t.Errorf("%s comes from %q", ti.Name, ti.Source)
			}
		}
		mod.Close()
		f := importModel(t, packed.write(t), Options{Type: typ})
		if ft, _ := f.FileType(); ft != fileTypeMXFP4MoE {
			t.Errorf("%v: general.file_type %v, want MOSTLY_MXFP4_MOE", typ, ft)
		}
		for i := range ossLayers {
			for _, n := range []string{"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"} {
				name := fmt.Sprintf("blk.%d.%s", i, n)
				info, _ := f.Tensor(name)
				wantInfo, _ := want.Tensor(name)
				if info.Type != gguf.TypeMXFP4 || !slices.Equal(info.Shape, wantInfo.Shape) {
					t.Errorf("%v: %s: %v %v, want MXFP4 %v", typ, name, info.Type, info.Shape, wantInfo.Shape)
					continue
				}
				if !slices.Equal(floats(t, f, name), floats(t, want, name)) {
					t.Errorf("%v: %s is not transformers' dequantization of the blocks", typ, name)
				}
			}
		}
		if typ == TypeAuto {
			if info, _ := f.Tensor("blk.0.attn_q.weight"); info.Type != gguf.TypeBF16 {
				t.Errorf("attn_q is %v, want the checkpoint's BF16", info.Type)
			}
		}
	}
	// The first expert's first gate row, by hand: code and scale of
	// element c are the nibble c%2 of byte c/2 and the block's byte.
	f := importModel(t, packed.write(t), Options{})
	gate := floats(t, f, "blk.0.ffn_gate_exps.weight")[:ossHidden]
	blocks := packed.tensor("model.layers.0.mlp.experts.gate_up_proj_blocks").raw
	scales := packed.tensor("model.layers.0.mlp.experts.gate_up_proj_scales").raw
	for c := range ossHidden {
		v := fp4Values[blocks[c/2]>>(4*(c%2))&0xf] * float32(math.Ldexp(1, int(scales[0])-127))
		if gate[c] != v {
			t.Fatalf("gate[0][0][%d] = %v, want %v", c, gate[c], v)
		}
	}
}

// TestImportGPTOSSLayerTypes: layer_types that a period of global layers
// describes import with that period as attention.sliding_window_pattern
// (none for the alternation llama.cpp assumes, and for none given:
// transformers' default is the alternation).
func TestImportGPTOSSLayerTypes(t *testing.T) {
	s, g := "sliding_attention", "full_attention"
	for _, c := range []struct {
		types   []string // nil: no layer_types
		pattern any      // the key's value; nil: absent
		sliding []bool
	}{
		{nil, nil, []bool{true, false, true, false}},
		{[]string{s, s, g, s}, uint32(3), []bool{true, true, false, true}},
		{[]string{s, s, s, s}, uint32(0), []bool{true, true, true, true}},
		{[]string{g, g, g, g}, uint32(1), []bool{false, false, false, false}},
	} {
		types := any(c.types)
		if c.types == nil {
			types = nil
		}
		f := importModel(t, gptossModel(map[string]any{"layer_types": types}).write(t), Options{})
		checkKeys(t, f, "gpt-oss", map[string]any{"attention.sliding_window_pattern": c.pattern})
		cfg, err := arch.ReadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range c.sliding {
			if cfg.Sliding(i) != want {
				t.Errorf("%v: layer %d sliding %v, want %v", c.types, i, cfg.Sliding(i), want)
			}
		}
	}
}

// TestImportGPTOSSRefuses: what llama.cpp's gpt-oss graph or Hearth's
// kernels would run otherwise than transformers is refused naming the key;
// a missing, misshapen or half-present tensor naming the tensor.
func TestImportGPTOSSRefuses(t *testing.T) {
	s, g := "sliding_attention", "full_attention"
	for _, tc := range []struct {
		name  string
		extra map[string]any
		edit  func(m *hfModel) *hfModel
		want  []string
	}{
		{name: "another clamp", extra: map[string]any{"swiglu_limit": 8.0}, want: []string{"config.json", "swiglu_limit: is 8", "clamp"}},
		{name: "no attention biases", extra: map[string]any{"attention_bias": false}, want: []string{"attention_bias: is false"}},
		{name: "another quantization", extra: map[string]any{"quantization_config": map[string]any{"quant_method": "bitsandbytes"}},
			want: []string{`quantization_config.quant_method: is "bitsandbytes"`}},
		{name: "no period", extra: map[string]any{"layer_types": []string{g, s, s, s}}, want: []string{"layer_types", "not one global layer in every 1", "sliding_window_pattern"}},
		{name: "unknown layer type", extra: map[string]any{"layer_types": []string{s, "chunked_attention", s, g}}, want: []string{`layer_types: has "chunked_attention"`}},
		{name: "too many experts", extra: map[string]any{"num_local_experts": 1025}, want: []string{"num_local_experts: is 1025, want 1 to 1024"}},
		{name: "more chosen than there are", extra: map[string]any{"num_experts_per_tok": ossExperts + 1}, want: []string{"num_experts_per_tok: is 5, want 1 to num_local_experts (4)"}},
		{
			name: "missing sinks",
			edit: func(m *hfModel) *hfModel { m.remove("model.layers.2.self_attn.sinks"); return m },
			want: []string{`"model.layers.2.self_attn.sinks" (blk.2.attn_sinks.weight) is missing`},
		},
		{
			name: "missing expert bias",
			edit: func(m *hfModel) *hfModel { m.remove("model.layers.0.mlp.experts.down_proj_bias"); return m },
			want: []string{`"model.layers.0.mlp.experts.down_proj_bias" (blk.0.ffn_down_exps.bias) is missing`},
		},
		{
			name: "experts out-features first",
			edit: func(m *hfModel) *hfModel {
				m.tensor("model.layers.1.mlp.experts.gate_up_proj").shape = []int64{ossExperts, 2 * ossFF, ossHidden}
				return m
			},
			want: []string{`"model.layers.1.mlp.experts.gate_up_proj" has shape [4 128 32]`, "[4 32 128]"},
		},
		{
			name: "MXFP4 blocks without scales",
			edit: func(m *hfModel) *hfModel {
				p, _ := m.mxfp4()
				p.remove("model.layers.1.mlp.experts.down_proj_scales")
				return p
			},
			want: []string{`"model.layers.1.mlp.experts.down_proj_blocks" has no "model.layers.1.mlp.experts.down_proj_scales"`},
		},
		{
			name: "MXFP4 blocks as floats",
			edit: func(m *hfModel) *hfModel {
				p, _ := m.mxfp4()
				x := p.tensor("model.layers.3.mlp.experts.gate_up_proj_blocks")
				x.dtype, x.values, x.raw = safetensors.F16, make([]float32, len(x.raw)), nil
				return p
			},
			want: []string{`"model.layers.3.mlp.experts.gate_up_proj_blocks": dtype F16, want U8`},
		},
		{
			name: "MXFP4 and dense experts both",
			edit: func(m *hfModel) *hfModel {
				p, _ := m.mxfp4()
				p.tensors = append(p.tensors, *m.tensor("model.layers.0.mlp.experts.down_proj"))
				return p
			},
			want: []string{`"model.layers.0.mlp.experts.down_proj"`, "not part of a GptOssForCausalLM"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gptossModel(tc.extra)
			if tc.edit != nil {
				m = tc.edit(m)
			}
			importRefused(t, m, tc.want...)
		})
	}
}
