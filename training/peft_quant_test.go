package training

// The quantized-base half of the PyTorch + peft check. PyTorch has no
// GGUF blocks, so the reference is handed the blocks' values instead: each
// base below is imported from its f16 Hugging Face folder and requantized
// exactly as a user's model is (hfimport, gguf.Requantize), and
// writeDequantizedHF turns that GGUF back into a Hugging Face folder whose
// weights are the quantized tensors dequantized (gguf.Dequantize) to f32,
// under their Hugging Face names and in their Hugging Face layout.
// make_fixtures.py --base trains on that folder on a machine with torch
// into testdata/peft/quant/NAME/; TestMatchesPEFTQuantizedBase (which lands
// with those fixtures) trains on the quantized GGUF, the CPU step
// dequantizing the blocks and the GPU step reading them as stored, and
// compares with matchPEFT. Both sides compute on the same f32 values, so
// the tolerances are TestMatchesPEFT's.
//
// The folders are not committed: they follow from the committed f16 bases,
// the widening below and the quantizer. base.json beside each fixture holds
// the type and SHA-256 of every quantized tensor, so that a quantizer
// change that would silently move the weights under the fixture fails as
// such. To remake the fixtures:
//
//	HEARTH_WRITE_QUANT_BASES=$PWD/.device/quant go test ./training -run TestQuantBaseReferenceIsExact
//	python3 training/testdata/peft/make_fixtures.py --base .device/quant/NAME NAME
//
// (the second on a machine with torch, transformers and peft; see
// make_fixtures.log).

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/gguf"
)

// quantBase is one quantized base: the f16 family of
// engine/model/testdata/hf, requantized to a llama-quantize target.
type quantBase struct {
	name   string // the fixture, testdata/peft/quant/NAME
	family string
	// widen replaces the family's weights by widenedLlama's: the bases are
	// 64 wide, and a K-quant block is 256 values of one row, so that
	// Q4_K and Q6_K would fall back to Q5_0 and Q8_0 on every tensor.
	widen bool
	quant string
}

// quantBases cover the block formats the step reads: Q4_K_M is Q4_K with
// Q6_K for the output and the first layer's attn_v and ffn_down (and
// Llama's permuted q/k rows); Q8_0, Q4_0 and Q5_1 the 32-value blocks,
// with QK-norm (Qwen 3), a tied, soft-capped head and Gemma's norms
// (Gemma 2), and Phi-3's fused qkv and gate_up. The output tensors of the
// 64-wide bases fall back from Q6_K to Q8_0 as llama.cpp's do.
var quantBases = []quantBase{
	{"llama256-q4_k_m", "llama", true, "Q4_K_M"},
	{"qwen3-q8_0", "qwen3", false, "Q8_0"},
	{"gemma2-q4_0", "gemma2", false, "Q4_0"},
	{"phi3-q5_1", "phi3", false, "Q5_1"},
}

// quantManifest is testdata/peft/quant/NAME/base.json.
type quantManifest struct {
	Family  string         `json:"family"`
	Widened bool           `json:"widened"`
	Quant   string         `json:"quant"`
	Tensors []quantTensor  `json:"tensors"`
	Counts  map[string]int `json:"type_counts"`
}

type quantTensor struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	SHA256 string `json:"sha256"`
}

// TestQuantBaseReferenceIsExact: the folder writeDequantizedHF makes is the
// quantized GGUF's weights exactly, under the import's own mapping:
// imported again (as F32), every tensor equals the quantized tensor
// dequantized, bit for bit. That inverts the q/k row permutation, Gemma's
// +1 on the norms and the tying, and checks that no tensor is missing or
// left over. With HEARTH_WRITE_QUANT_BASES=DIR the folders are written to
// DIR/NAME for make_fixtures.py, and each fixture's base.json is rewritten.
func TestQuantBaseReferenceIsExact(t *testing.T) {
	out := os.Getenv("HEARTH_WRITE_QUANT_BASES")
	for _, c := range quantBases {
		t.Run(c.name, func(t *testing.T) {
			src, path := quantizedBase(t, c)
			ref := filepath.Join(t.TempDir(), c.name)
			if out != "" {
				ref = filepath.Join(out, c.name)
			}
			if err := writeDequantizedHF(src, path, ref, c.family); err != nil {
				t.Fatal(err)
			}
			back := filepath.Join(t.TempDir(), "back.gguf")
			if err := hfimport.Import(ref, back, hfimport.Options{}); err != nil {
				t.Fatal(err)
			}
			q, r := openGGUF(t, path), openGGUF(t, back)
			var qn, rn []string
			for _, ti := range q.Tensors() {
				qn = append(qn, ti.Name)
			}
			for _, ti := range r.Tensors() {
				rn = append(rn, ti.Name)
			}
			if !slices.Equal(qn, rn) {
				t.Fatalf("tensors %v imported back as %v", qn, rn)
			}
			for _, ti := range q.Tensors() {
				want, got := dequantized(t, q, ti.Name), dequantized(t, r, ti.Name)
				if rt, _ := r.Tensor(ti.Name); rt.Type != gguf.TypeF32 {
					t.Fatalf("%s imported back as %v, want F32", ti.Name, rt.Type)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s[%d] is %v imported back, %v dequantized", ti.Name, i, got[i], want[i])
					}
				}
			}
			m := manifestOf(t, c, path)
			t.Logf("%s: %v", c.quant, m.Counts)
			if out != "" {
				b, err := json.MarshalIndent(m, "", " ")
				if err != nil {
					t.Fatal(err)
				}
				dir := filepath.Join("testdata", "peft", "quant", c.name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "base.json"), append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// quantizedBase makes c's base: the f16 folder (the family's, or the
// widened Llama written to a temporary folder) imported to GGUF and
// requantized to c.quant as hearth quantize does. It returns the folder
// and the quantized file.
func quantizedBase(t *testing.T, c quantBase) (src, path string) {
	t.Helper()
	tmp := t.TempDir()
	src = filepath.Join("..", "engine", "model", "testdata", "hf", c.family)
	if c.widen {
		w := filepath.Join(tmp, c.family+"-wide")
		if err := widenedLlama(src, w); err != nil {
			t.Fatal(err)
		}
		src = w
	}
	f16 := filepath.Join(tmp, "f16.gguf")
	if err := hfimport.Import(src, f16, hfimport.Options{}); err != nil {
		t.Fatal(err)
	}
	target, err := gguf.ParseQuantTarget(c.quant)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(tmp, c.name+".gguf")
	if err := gguf.RequantizeFile(openGGUF(t, f16), path, gguf.RequantizeOptions{Target: target}); err != nil {
		t.Fatal(err)
	}
	return src, path
}

func openGGUF(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func dequantized(t *testing.T, f *gguf.File, name string) []float32 {
	t.Helper()
	ti, _ := f.Tensor(name)
	data, err := f.Data(ti)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, ti.Elements())
	if err := gguf.Dequantize(ti.Type, data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// manifestOf lists the type and SHA-256 of every tensor of the quantized
// base in path.
func manifestOf(t *testing.T, c quantBase, path string) *quantManifest {
	t.Helper()
	f := openGGUF(t, path)
	m := &quantManifest{Family: c.family, Widened: c.widen, Quant: c.quant, Counts: map[string]int{}}
	for _, ti := range f.Tensors() {
		data, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m.Tensors = append(m.Tensors, quantTensor{ti.Name, ti.Type.String(), hex.EncodeToString(sum[:])})
		m.Counts[ti.Type.String()]++
	}
	return m
}

// writeDequantizedHF writes dst, a Hugging Face folder of f32 weights that
// are the GGUF path's tensors dequantized, for the f16 folder src that path
// was imported from (and family's prompt). The mapping is the import's own
// (hfimport.Open's plan: each GGUF tensor's source), inverted: the shape
// reversed to outermost first, Llama's q/k rows permuted back (a row
// permutation, so the blocks of a row dequantize alike before and after),
// and 1 taken off Gemma's norms, which is exact in f32 for gains in
// [0.5, 2] (Sterbenz) and checked by TestQuantBaseReferenceIsExact either
// way. rope_freqs is computed from config.json and is not written.
func writeDequantizedHF(src, path, dst, family string) error {
	plan, err := hfimport.Open(src, hfimport.Options{})
	if err != nil {
		return err
	}
	arch := plan.Architecture
	plan.Close()
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	heads, err := f.Int(arch + ".attention.head_count")
	if err != nil {
		return err
	}
	kvHeads, err := f.Int(arch + ".attention.head_count_kv")
	if err != nil {
		return err
	}
	tensors := map[string]stTensor{}
	for _, info := range plan.Tensors {
		if info.Source == "" {
			continue
		}
		ti, ok := f.Tensor(info.Name)
		if !ok {
			return fmt.Errorf("%s: no tensor %q", path, info.Name)
		}
		data, err := f.Data(ti)
		if err != nil {
			return err
		}
		v := make([]float32, ti.Elements())
		if err := gguf.Dequantize(ti.Type, data, v); err != nil {
			return fmt.Errorf("%s: %w", ti.Name, err)
		}
		shape := make([]int64, len(ti.Shape))
		for i, d := range ti.Shape {
			shape[len(shape)-1-i] = int64(d)
		}
		rows := int(shape[0])
		cols := len(v) / rows
		if arch == "llama" {
			h := 0
			switch {
			case strings.HasPrefix(info.Name, "blk.") && strings.Contains(info.Name, ".attn_q."):
				h = heads
			case strings.HasPrefix(info.Name, "blk.") && strings.Contains(info.Name, ".attn_k."):
				h = kvHeads
			}
			if h > 0 {
				hf := make([]float32, len(v))
				for r := range rows {
					s := permutedRowHF(r, rows, h)
					copy(hf[s*cols:(s+1)*cols], v[r*cols:(r+1)*cols])
				}
				v = hf
			}
		}
		if strings.HasPrefix(arch, "gemma") && strings.HasSuffix(info.Source, "norm.weight") {
			for i := range v {
				v[i]--
			}
		}
		tensors[info.Source] = stTensor{shape, v}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := writeSafetensorsF32(filepath.Join(dst, "model.safetensors"), tensors); err != nil {
		return err
	}
	for _, name := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if os.IsNotExist(err) && name == "generation_config.json" {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	// make_fixtures.py reads the batch's ids from expected.json.
	raw, err := os.ReadFile(filepath.Join("..", "engine", "model", "testdata", "hf", family, "expected.json"))
	if err != nil {
		return err
	}
	var e struct {
		PromptIDs []int `json:"prompt_ids"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"prompt_ids": e.PromptIDs})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "expected.json"), b, 0o644)
}

// permutedRowHF is the Hugging Face row of GGUF row r of a q or k weight
// (hfimport's permutation, llama.cpp's: the two rotate_half halves of each
// head interleaved).
func permutedRowHF(r, rows, heads int) int {
	per := rows / heads
	half := per / 2
	h, rem := r/per, r%per
	return h*per + (rem%2)*half + rem/2
}

type stTensor struct {
	shape []int64
	v     []float32
}

// writeSafetensorsF32 writes tensors as one safetensors file of F32, in
// name order.
func writeSafetensorsF32(path string, tensors map[string]stTensor) error {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		tt := tensors[name]
		start := int64(data.Len())
		if err := binary.Write(&data, binary.LittleEndian, tt.v); err != nil {
			return err
		}
		header[name] = stEntry{"F32", tt.shape, [2]int64{start, int64(data.Len())}}
	}
	return writeSafetensorsFile(path, header, data.Bytes())
}

// stEntry is a safetensors header's entry for one tensor.
type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// writeSafetensorsFile writes a safetensors file: the 8-byte header length,
// the JSON header padded with spaces to a multiple of 8, the data.
func writeSafetensorsFile(path string, header map[string]any, data []byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(h)))
	out.Write(h)
	out.Write(data)
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// widenedLlama writes to dst the Llama of src at width 256: hidden 256,
// head_dim 64 (4 query and 2 KV heads, so q is 256 wide too), intermediate
// 512, the same vocabulary, tokenizer and RoPE, so that every row holds
// whole 256-value K-quant blocks. The weights are src's make_fixtures.py
// spreads, drawn here and scaled to the width: N(0, σ²) with σ 0.5 for the
// embedding, 0.075 for the projections and 0.15 for the head (half of
// width 64's: the same variance gain per projection, 256·0.075² = 1.44,
// and the same logit spread, 0.15·√256 = 0.3·√64) and 1 + 0.2·N(0, 1) for
// the norm gains, each rounded to f16. The normals are Irwin–Hall sums of twelve
// 24-bit uniforms from splitmix64, in integer arithmetic and one multiply,
// so the weights are the same bits on every machine and Go release (no
// math library call, no fused multiply-add to differ).
func widenedLlama(src, dst string) error {
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	const H, F, headDim, heads, kvHeads = 256, 512, 64, 4, 2
	cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"] = H, F, headDim
	cfg["num_attention_heads"], cfg["num_key_value_heads"] = heads, kvHeads
	if cfg["model_type"] != "llama" || cfg["tie_word_embeddings"] != false {
		return fmt.Errorf("%s: widenedLlama wants an untied llama", src)
	}
	V := int64(cfg["vocab_size"].(float64))
	layers := int(cfg["num_hidden_layers"].(float64))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "config.json"), b, 0o644); err != nil {
		return err
	}
	for _, name := range []string{"generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}

	state := uint64(0x5eed_1a3a_0256)
	normal := func() float64 {
		var s int64
		for range 12 {
			state += 0x9e3779b97f4a7c15
			z := state
			z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			s += int64((z ^ z>>31) >> 40)
		}
		return float64(s-6<<24) / (1 << 24)
	}
	type spec struct {
		name  string
		shape []int64
		std   float64
		mean  float64
	}
	specs := []spec{{"model.embed_tokens.weight", []int64{V, H}, 0.5, 0}}
	for i := range layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			spec{p + "input_layernorm.weight", []int64{H}, 0.2, 1},
			spec{p + "self_attn.q_proj.weight", []int64{heads * headDim, H}, 0.075, 0},
			spec{p + "self_attn.k_proj.weight", []int64{kvHeads * headDim, H}, 0.075, 0},
			spec{p + "self_attn.v_proj.weight", []int64{kvHeads * headDim, H}, 0.075, 0},
			spec{p + "self_attn.o_proj.weight", []int64{H, heads * headDim}, 0.075, 0},
			spec{p + "post_attention_layernorm.weight", []int64{H}, 0.2, 1},
			spec{p + "mlp.gate_proj.weight", []int64{F, H}, 0.075, 0},
			spec{p + "mlp.up_proj.weight", []int64{F, H}, 0.075, 0},
			spec{p + "mlp.down_proj.weight", []int64{H, F}, 0.075, 0})
	}
	specs = append(specs, spec{"model.norm.weight", []int64{H}, 0.2, 1}, spec{"lm_head.weight", []int64{V, H}, 0.15, 0})

	header := map[string]any{}
	var data bytes.Buffer
	for _, s := range specs {
		n := int64(1)
		for _, d := range s.shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			// The conversion rounds the product, so that no machine fuses
			// the multiply and the add.
			v[i] = float32(s.mean + float64(s.std*normal()))
		}
		h := make([]byte, 2*n)
		if err := gguf.Quantize(gguf.TypeF16, v, h); err != nil {
			return err
		}
		start := int64(data.Len())
		data.Write(h)
		header[s.name] = stEntry{"F16", s.shape, [2]int64{start, int64(data.Len())}}
	}
	return writeSafetensorsFile(filepath.Join(dst, "model.safetensors"), header, data.Bytes())
}
