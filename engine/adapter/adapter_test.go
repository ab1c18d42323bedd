package adapter

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// synthFile writes preset at quant into a temporary file.
func synthFile(t testing.TB, preset, quant string) string {
	t.Helper()
	p, ok := synth.PresetByName(preset)
	if !ok {
		t.Fatalf("no preset %q", preset)
	}
	path := filepath.Join(t.TempDir(), preset+"-"+quant+".gguf")
	if err := synth.WriteFile(path, p, synth.Options{Quant: quant, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadModel(t testing.TB, path string) *model.Model {
	t.Helper()
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randomAdapter targets every LoRA target of m at rank: A from N(0, 1/cols),
// B from N(0, 1/rank), alpha = rank, so that B·A·x is about as large as
// W·x and an adapter moves the logits a long way.
func randomAdapter(m *model.Model, rank int, seed uint64) *Adapter {
	rng := rand.New(rand.NewPCG(seed, 2))
	a := &Adapter{Arch: m.Config.Arch, Alpha: float32(rank), Pairs: map[string]*Pair{}, BaseModel: "test/base", Dropout: 0.05}
	names := mapKeys(m.LoRATargets())
	slices.Sort(names) // a deterministic draw
	for _, n := range names {
		s := m.LoRATargets()[n]
		p := &Pair{Rank: rank, Rows: s[0], Cols: s[1], A: make([]float32, rank*s[1]), B: make([]float32, s[0]*rank)}
		for i := range p.A {
			p.A[i] = float32(rng.NormFloat64() / math.Sqrt(float64(s[1])))
		}
		for i := range p.B {
			p.B[i] = float32(rng.NormFloat64() / math.Sqrt(float64(rank)))
		}
		a.Pairs[n] = p
	}
	return a
}

func sameAdapter(t *testing.T, got, want *Adapter) {
	t.Helper()
	if got.Arch != want.Arch || got.Alpha != want.Alpha {
		t.Errorf("arch %q alpha %v, want %q %v", got.Arch, got.Alpha, want.Arch, want.Alpha)
	}
	if !slices.Equal(got.Names(), want.Names()) {
		t.Fatalf("targets %v, want %v", got.Names(), want.Names())
	}
	for _, n := range want.Names() {
		g, w := got.Pairs[n], want.Pairs[n]
		if g.Rank != w.Rank || g.Rows != w.Rows || g.Cols != w.Cols || !slices.Equal(g.A, w.A) || !slices.Equal(g.B, w.B) {
			t.Errorf("tensor %q: rank %d %d×%d differs from rank %d %d×%d, or its values do", n, g.Rank, g.Rows, g.Cols, w.Rank, w.Rows, w.Cols)
		}
	}
}

// TestGGUFRoundTrip writes an adapter on every target (token_embd and the
// head included) as a GGUF LoRA and reads it back bit for bit, and checks
// the file against llama.cpp's loader: its keys, and the shape checks of
// llama_adapter_lora_init_impl for every pair.
func TestGGUFRoundTrip(t *testing.T) {
	m := loadModel(t, synthFile(t, "tiny-llama", "F32"))
	a := randomAdapter(m, 3, 1)
	path := filepath.Join(t.TempDir(), "lora.gguf")
	if err := WriteGGUF(path, a); err != nil {
		t.Fatal(err)
	}
	got, err := ReadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	sameAdapter(t, got, a)
	if err := got.Check(m); err != nil {
		t.Error(err)
	}

	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for key, want := range map[string]string{"general.type": "adapter", "adapter.type": "lora", "general.architecture": "llama"} {
		if v, err := f.String(key); err != nil || v != want {
			t.Errorf("%s = %q (%v), want %q", key, v, err, want)
		}
	}
	if v, ok := f.Value("adapter.lora.alpha"); !ok || v.Type() != gguf.ValueFloat32 || v.Any() != float32(3) {
		t.Errorf("adapter.lora.alpha = %v, want FLOAT32 3", v.Any())
	}
	for _, n := range a.Names() {
		mt, _ := m.File.Tensor(n)
		ta, ok1 := f.Tensor(n + ".lora_a")
		tb, ok2 := f.Tensor(n + ".lora_b")
		if !ok1 || !ok2 || ta.Type != gguf.TypeF32 || tb.Type != gguf.TypeF32 {
			t.Fatalf("%s: lora_a/lora_b missing or not F32", n)
		}
		ne := func(ti gguf.TensorInfo, i int) uint64 { return ti.Shape[i] }
		if n == tokenEmbd {
			if ne(mt, 0) != ne(tb, 1) || ne(mt, 1) != ne(ta, 1) {
				t.Errorf("%s: model ne %v, lora_a %v, lora_b %v fail llama.cpp's token_embd check", n, mt.Shape, ta.Shape, tb.Shape)
			}
			continue
		}
		if ne(mt, 0) != ne(ta, 0) || ne(mt, 1) != ne(tb, 1) || ne(ta, 1) != ne(tb, 0) {
			t.Errorf("%s: model ne %v, lora_a %v, lora_b %v fail llama.cpp's shape check", n, mt.Shape, ta.Shape, tb.Shape)
		}
	}
}

// TestPEFTRoundTrip writes a Qwen 2 adapter (no permutation) and a Llama
// one as PEFT folders and reads them back bit for bit; the names, shapes
// and config are peft's.
func TestPEFTRoundTrip(t *testing.T) {
	for _, preset := range []string{"tiny-qwen2", "tiny-llama", "tiny-phi3", "tiny-gemma3"} {
		t.Run(preset, func(t *testing.T) {
			m := loadModel(t, synthFile(t, preset, "F32"))
			a := randomAdapter(m, 4, 2)
			dir := filepath.Join(t.TempDir(), "peft")
			if err := WritePEFT(dir, a, &m.Config); err != nil {
				t.Fatal(err)
			}
			got, err := ReadPEFT(dir, &m.Config)
			if err != nil {
				t.Fatal(err)
			}
			sameAdapter(t, got, a)
			if got.BaseModel != a.BaseModel || got.Dropout != a.Dropout {
				t.Errorf("base %q dropout %v, want %q %v", got.BaseModel, got.Dropout, a.BaseModel, a.Dropout)
			}

			var cfg map[string]any
			raw, err := os.ReadFile(filepath.Join(dir, peftConfig))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg["peft_type"] != "LORA" || cfg["r"] != 4.0 || cfg["lora_alpha"] != 4.0 || cfg["bias"] != "none" || cfg["task_type"] != "CAUSAL_LM" {
				t.Errorf("adapter_config.json: %s", raw)
			}
			st, err := safetensors.Open(filepath.Join(dir, peftWeights))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			shapes := map[string][]int64{}
			for _, ts := range st.Tensors {
				shapes[ts.Name] = ts.Shape
			}
			c := m.Config
			want := map[string][]int64{
				"base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight": {4, int64(c.QDim())},
				"base_model.model.model.layers.0.self_attn.o_proj.lora_B.weight": {int64(c.Hidden), 4},
				"base_model.model.model.layers.1.mlp.down_proj.lora_A.weight":    {4, int64(c.FF)},
				"base_model.model.model.embed_tokens.lora_embedding_A":           {4, int64(c.Vocab)},
				"base_model.model.model.embed_tokens.lora_embedding_B":           {int64(c.Hidden), 4},
			}
			if preset == "tiny-phi3" {
				want["base_model.model.model.layers.0.self_attn.qkv_proj.lora_B.weight"] = []int64{int64(c.QDim() + 2*c.KVDim()), 4}
				want["base_model.model.model.layers.0.mlp.gate_up_proj.lora_B.weight"] = []int64{int64(2 * c.FF), 4}
			} else {
				want["base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight"] = []int64{int64(c.KVDim()), 4}
				want["base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight"] = []int64{4, int64(c.Hidden)}
			}
			for n, s := range want {
				if !slices.Equal(shapes[n], s) {
					t.Errorf("%s: shape %v, want %v", n, shapes[n], s)
				}
			}
		})
	}
}

// TestPEFTPermutesLlamaQK: a Llama adapter's q and k lora_B rows are in
// llama.cpp's order in GGUF and in transformers' in PEFT. The expected
// order is built from convert_hf_to_gguf.py's LlamaModel.permute directly,
// w.reshape(heads, 2, half, ·).swapaxes(1, 2): the GGUF row h·per + 2j + i
// is the Hugging Face row h·per + i·half + j. Qwen's rows stay in place.
func TestPEFTPermutesLlamaQK(t *testing.T) {
	for _, preset := range []string{"tiny-llama", "tiny-qwen3"} {
		m := loadModel(t, synthFile(t, preset, "F32"))
		a := randomAdapter(m, 2, 3)
		dir := filepath.Join(t.TempDir(), "peft")
		if err := WritePEFT(dir, a, &m.Config); err != nil {
			t.Fatal(err)
		}
		st, err := safetensors.Open(filepath.Join(dir, peftWeights))
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*safetensors.Tensor{}
		for _, ts := range st.Tensors {
			byName[ts.Name] = ts
		}
		c := m.Config
		for _, proj := range []struct {
			gg, hf string
			heads  int
		}{{"attn_q", "q_proj", c.Heads}, {"attn_k", "k_proj", c.KVHeads}, {"attn_v", "v_proj", 0}} {
			p := a.Pairs["blk.1."+proj.gg+".weight"]
			hb, err := byName["base_model.model.model.layers.1.self_attn."+proj.hf+".lora_B.weight"].Float32()
			if err != nil {
				t.Fatal(err)
			}
			ha, err := byName["base_model.model.model.layers.1.self_attn."+proj.hf+".lora_A.weight"].Float32()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ha, p.A) {
				t.Errorf("%s %s: lora_A is not A unchanged", preset, proj.hf)
			}
			heads := proj.heads
			if m.Config.Arch != "llama" || heads == 0 {
				heads = 1 // no permutation: every row in place
			}
			per := p.Rows / heads
			half := per / 2
			for h := range heads {
				for i := range 2 {
					for j := range half {
						g, hfRow := h*per+2*j+i, h*per+i*half+j
						if m.Config.Arch != "llama" || proj.heads == 0 {
							g, hfRow = h*per+i*half+j, h*per+i*half+j
						}
						if !slices.Equal(hb[hfRow*p.Rank:(hfRow+1)*p.Rank], p.B[g*p.Rank:(g+1)*p.Rank]) {
							t.Fatalf("%s %s: GGUF row %d is not Hugging Face row %d", preset, proj.hf, g, hfRow)
						}
					}
				}
			}
		}
		st.Close()

		// GGUF → PEFT → GGUF is the identity, and so is the file route.
		got, err := ReadPEFT(dir, &m.Config)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "from-peft.gguf")
		if err := WriteGGUF(path, got); err != nil {
			t.Fatal(err)
		}
		back, err := ReadGGUF(path)
		if err != nil {
			t.Fatal(err)
		}
		back.BaseModel, back.Dropout = a.BaseModel, a.Dropout
		sameAdapter(t, back, a)
	}
}

// TestPEFTReadsOtherForms: rsLoRA's alpha/√r factor, F16 and BF16 tensors,
// rank_pattern, and Gemma 3's multimodal prefix.
func TestPEFTReadsOtherForms(t *testing.T) {
	m := loadModel(t, synthFile(t, "tiny-gemma3", "F32"))
	a := randomAdapter(m, 4, 4)
	for n, p := range a.Pairs { // keep a few, one at rank 2
		switch n {
		case "blk.0.attn_q.weight":
		case "blk.1.ffn_down.weight":
			p.Rank, p.A, p.B = 2, p.A[:2*p.Cols], make([]float32, p.Rows*2)
			for i := range p.B {
				p.B[i] = float32(i%7) * 0.125 // exact in F16 and BF16
			}
		default:
			delete(a.Pairs, n)
		}
	}
	for _, p := range a.Pairs {
		for i := range p.A {
			p.A[i] = float32(int(p.A[i]*64)) / 64 // exact in BF16
		}
		for i := range p.B {
			p.B[i] = float32(int(p.B[i]*64)) / 64
		}
	}
	dir := t.TempDir()
	var ts []hfTensor
	for n, p := range a.Pairs {
		mod, _ := hfModule(a.Arch, n)
		mod = strings.Replace(mod, "model.", "model.language_model.", 1)
		ts = append(ts, hfTensor{peftPrefix + mod + ".lora_A.weight", "BF16", []int64{int64(p.Rank), int64(p.Cols)}, p.A},
			hfTensor{peftPrefix + mod + ".lora_B.weight", "F16", []int64{int64(p.Rows), int64(p.Rank)}, p.B})
	}
	writeHF(t, dir, ts, `{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": true, "rank_pattern": {"model.language_model.layers.1.mlp.down_proj": 2}, "target_modules": ["q_proj", "down_proj"]}`)
	got, err := ReadPEFT(dir, &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	a.Alpha = 16 // 8·√4
	a.Dropout, a.BaseModel = 0, ""
	sameAdapter(t, got, a)
	if err := got.Check(m); err != nil {
		t.Error(err)
	}
}

// hfTensor is a tensor for writeHF in any of F32, F16, BF16.
type hfTensor struct {
	name  string
	dtype string
	shape []int64
	data  []float32
}

// writeHF writes a PEFT folder by hand, as peft would, with dtypes
// writeSafetensors does not write.
func writeHF(t *testing.T, dir string, ts []hfTensor, config string) {
	t.Helper()
	header := map[string]any{}
	var data []byte
	for _, x := range ts {
		typ := map[string]gguf.Type{"F32": gguf.TypeF32, "F16": gguf.TypeF16, "BF16": gguf.TypeBF16}[x.dtype]
		b := make([]byte, len(x.data)*typ.TypeSize())
		if err := gguf.Quantize(typ, x.data, b); err != nil {
			t.Fatal(err)
		}
		header[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(data), len(data) + len(b)}}
		data = append(data, b...)
	}
	h, _ := json.Marshal(header)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(filepath.Join(dir, peftWeights), out, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, peftConfig), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoRAFactor: the runner's factor is scale·alpha/rank per pair, as
// llama.cpp's get_scale has it (scale alone when alpha is 0); with mixed
// ranks each B carries its own factor.
func TestLoRAFactor(t *testing.T) {
	pair := func(rank int) *Pair {
		return &Pair{Rank: rank, Rows: 2, Cols: 3, A: make([]float32, rank*3), B: []float32{1, 2, 3, 4, 5, 6, 7, 8}[:2*rank]}
	}
	a := &Adapter{Arch: "llama", Alpha: 8, Pairs: map[string]*Pair{"blk.0.attn_q.weight": pair(4), "blk.0.attn_k.weight": pair(4)}}
	l, err := a.LoRA(0.5)
	if err != nil {
		t.Fatal(err)
	}
	if l.Scale != 1 || &l.Weights["blk.0.attn_q.weight"].B[0] != &a.Pairs["blk.0.attn_q.weight"].B[0] {
		t.Errorf("one rank: scale %v (want 0.5·8/4 = 1), B shared: the adapter's memory", l.Scale)
	}
	a.Pairs["blk.0.attn_k.weight"] = pair(2)
	if l, err = a.LoRA(0.5); err != nil {
		t.Fatal(err)
	}
	for n, f := range map[string]float32{"blk.0.attn_q.weight": 1, "blk.0.attn_k.weight": 2} {
		for i, b := range l.Weights[n].B {
			if got, want := l.Scale*b, f*a.Pairs[n].B[i]; got != want {
				t.Errorf("%s: B[%d] acts as %v, want %v", n, i, got, want)
			}
		}
	}
	a.Alpha = 0
	if l, err = a.LoRA(0.25); err != nil || l.Weights["blk.0.attn_k.weight"].B[1]*l.Scale != 0.25*2 {
		t.Errorf("alpha 0: the factor is the scale alone; got %v", err)
	}
}
