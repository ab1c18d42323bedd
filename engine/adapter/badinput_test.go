package adapter

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

type rawTensor struct {
	name string
	ne   []uint64
}

// writeRaw writes a GGUF adapter by hand: the keys llama.cpp wants, with
// typ and arch, and F32 tensors of zeros.
func writeRaw(t *testing.T, typ, arch string, ts []rawTensor) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raw.gguf")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w := gguf.NewWriter(fh)
	w.SetString("general.architecture", arch)
	w.SetString("general.type", typ)
	w.SetString("adapter.type", "lora")
	w.SetFloat32("adapter.lora.alpha", 8)
	for _, x := range ts {
		w.AddTensor(x.name, gguf.TypeF32, x.ne)
	}
	for _, x := range ts {
		n := uint64(1)
		for _, d := range x.ne {
			n *= d
		}
		w.WriteTensorBytes(x.name, make([]byte, 4*n))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadAdapterFiles: every malformed adapter is an error that says what
// is wrong and names the tensor, never a panic.
func TestBadAdapterFiles(t *testing.T) {
	m := loadModel(t, synthFile(t, "tiny-llama", "F32"))
	c := m.Config
	h, q := uint64(c.Hidden), uint64(c.QDim())
	const qn = "blk.0.attn_q.weight"
	cases := []struct {
		name string
		path string
		want string
	}{
		{"a model, not an adapter", writeRaw(t, "model", "llama", nil), `general.type is "model"`},
		{"another architecture", writeRaw(t, "adapter", "qwen2", []rawTensor{{qn + ".lora_a", []uint64{h, 4}}, {qn + ".lora_b", []uint64{4, q}}}), `made for a "qwen2" model, the base is "llama"`},
		{"unknown suffix", writeRaw(t, "adapter", "llama", []rawTensor{{qn + ".lora_c", []uint64{h, 4}}}), qn + `.lora_c" is neither`},
		{"missing half", writeRaw(t, "adapter", "llama", []rawTensor{{qn + ".lora_a", []uint64{h, 4}}}), qn + `" has only one`},
		{"rank mismatch", writeRaw(t, "adapter", "llama", []rawTensor{{qn + ".lora_a", []uint64{h, 4}}, {qn + ".lora_b", []uint64{3, q}}}), qn + `": lora_a has rank 4`},
		{"wrong rows", writeRaw(t, "adapter", "llama", []rawTensor{{qn + ".lora_a", []uint64{h, 4}}, {qn + ".lora_b", []uint64{4, q + 2}}}), qn + `" is `},
		{"wrong columns", writeRaw(t, "adapter", "llama", []rawTensor{{qn + ".lora_a", []uint64{h - 1, 4}}, {qn + ".lora_b", []uint64{4, q}}}), qn + `" is `},
		{"not in the base", writeRaw(t, "adapter", "llama", []rawTensor{{"blk.99.attn_q.weight.lora_a", []uint64{h, 4}}, {"blk.99.attn_q.weight.lora_b", []uint64{4, q}}}), `"blk.99.attn_q.weight" is not a weight`},
		{"a norm", writeRaw(t, "adapter", "llama", []rawTensor{{"blk.0.attn_norm.weight.lora_a", []uint64{h, 4}}, {"blk.0.attn_norm.weight.lora_b", []uint64{4, 1}}}), `"blk.0.attn_norm.weight" is not a weight`},
		{"3-D", writeRaw(t, "adapter", "llama", []rawTensor{{qn + ".lora_a", []uint64{h, 4, 2}}, {qn + ".lora_b", []uint64{4, q}}}), qn + `.lora_a" has shape`},
	}
	for _, tc := range cases {
		_, err := Load(tc.path, m)
		t.Logf("%s: %v", tc.name, err)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}

	// Truncated anywhere: in the header, the tensor infos, the data.
	good := filepath.Join(t.TempDir(), "good.gguf")
	if err := WriteGGUF(good, randomAdapter(m, 2, 5)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 7, 40, 200, len(raw) / 2, len(raw) - 1} {
		p := filepath.Join(t.TempDir(), "cut.gguf")
		if err := os.WriteFile(p, raw[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p, m); err == nil {
			t.Errorf("a file cut to %d of %d bytes loaded", n, len(raw))
		}
	}
}

// TestBadScalesAndPEFT: NaN and infinite scales, and PEFT folders that are
// not LoRA or name modules the model lacks.
func TestBadScalesAndPEFT(t *testing.T) {
	base := synthFile(t, "tiny-qwen2", "F32")
	m := loadModel(t, base)
	a := randomAdapter(m, 2, 6)
	for _, s := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		if _, err := a.LoRA(s); err == nil || !strings.Contains(err.Error(), "not a finite number") {
			t.Errorf("LoRA(%v): %v", s, err)
		}
		err := Merge(base, []Weighted{{a, s}}, filepath.Join(t.TempDir(), "m.gguf"), SameType)
		if err == nil || !strings.Contains(err.Error(), "not a finite number") {
			t.Errorf("Merge at scale %v: %v", s, err)
		}
	}
	nan := randomAdapter(m, 2, 6)
	nan.Pairs["blk.1.ffn_up.weight"].A[5] = float32(math.NaN())
	if err := WriteGGUF(filepath.Join(t.TempDir(), "nan.gguf"), nan); err == nil || !strings.Contains(err.Error(), `"blk.1.ffn_up.weight" holds NaN`) {
		t.Errorf("writing a NaN: %v", err)
	}
	if err := Merge(base, []Weighted{{a, 1}}, base, SameType); err == nil || !strings.Contains(err.Error(), "is the base model") {
		t.Errorf("merging over the base: %v", err)
	}

	p := a.Pairs["blk.0.attn_q.weight"]
	for _, tc := range []struct {
		name, config string
		ts           []hfTensor
		want         string
	}{
		{"prefix tuning", `{"peft_type": "PREFIX_TUNING", "r": 2, "lora_alpha": 2}`, nil, `peft_type "PREFIX_TUNING"`},
		{"DoRA", `{"peft_type": "LORA", "r": 2, "lora_alpha": 2, "use_dora": true}`, nil, "DoRA"},
		{"unknown module", `{"peft_type": "LORA", "r": 2, "lora_alpha": 2}`, []hfTensor{
			{peftPrefix + "model.layers.0.self_attn.rotary.lora_A.weight", "F32", []int64{2, int64(p.Cols)}, p.A},
		}, `module "model.layers.0.self_attn.rotary" is not a projection`},
		{"a full weight", `{"peft_type": "LORA", "r": 2, "lora_alpha": 2}`, []hfTensor{
			{peftPrefix + "model.layers.0.self_attn.q_proj.base_layer.weight", "F32", []int64{2, int64(p.Cols)}, p.A},
		}, `q_proj.base_layer.weight" is not a LoRA A or B`},
		{"rank mismatch", `{"peft_type": "LORA", "r": 2, "lora_alpha": 2}`, []hfTensor{
			{peftPrefix + "model.layers.0.self_attn.q_proj.lora_A.weight", "F32", []int64{2, int64(p.Cols)}, p.A},
			{peftPrefix + "model.layers.0.self_attn.q_proj.lora_B.weight", "F32", []int64{int64(p.Rows) * 2, 1}, p.B},
		}, `has rank 2`},
	} {
		dir := t.TempDir()
		writeHF(t, dir, tc.ts, tc.config)
		if _, err := Load(dir, m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load(t.TempDir(), m); err == nil || !strings.Contains(err.Error(), "adapter_config.json") {
		t.Errorf("an empty folder: %v", err)
	}
}
