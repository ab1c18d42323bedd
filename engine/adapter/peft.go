package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/internal/atomicfile"
	"github.com/hearthstudio/hearth/safetensors"
)

// The Hugging Face PEFT format (peft's save_pretrained of a LoraConfig):
// a folder with adapter_config.json and adapter_model.safetensors, whose
// tensors are named after the transformers modules with the adapter name
// removed: base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight
// [r, in] and ….lora_B.weight [out, r]; an embedding's pair is
// base_model.model.model.embed_tokens.lora_embedding_A [r, vocab] and
// ….lora_embedding_B [hidden, r] (ΔW = (B·A)ᵀ, peft's Embedding layer).
// The factor on a pair is lora_alpha/r (lora_alpha/√r with use_rslora);
// rank_pattern gives some modules another r, which the pair's shape shows.
//
// The module names are transformers' and the GGUF names llama.cpp's
// converter's, both from the architecture's tensor map in engine/arch (the
// one engine/hfimport converts checkpoints with). llama.cpp's converter permutes the rows of Llama's
// q_proj and k_proj (LlamaModel.permute in convert_hf_to_gguf.py) for its
// RoPE layout, and convert_lora_to_gguf.py applies the same permute to the
// LoRA tensor, which moves B's rows (LoraTorchTensor reshapes B, A being
// rank × in): so lora_B of q_proj/k_proj is permuted on the way to GGUF and
// back on the way to PEFT, with the model's head counts.
//
// Gemma 3's embedding: transformers scales it inside the embed_tokens
// module (Gemma3TextScaledWordEmbedding). peft since huggingface/peft#2825
// (October 2025) scales the LoRA delta of such a module too, which is what
// llama.cpp (and a merge) do by adding the delta before the √hidden scale;
// an embed_tokens pair trained with an older peft was meant unscaled and
// acts √hidden times stronger here. The projections are unaffected.

const (
	peftConfig  = "adapter_config.json"
	peftWeights = "adapter_model.safetensors"
	peftPrefix  = "base_model.model."
)

var blockTarget = regexp.MustCompile(`^blk\.(\d+)\.([a-z_]+\.weight)$`)

// blockMatrix is the layer projection of GGUF target name in a model of
// architecture name, with its layer's number.
func blockMatrix(name, target string) (*arch.Tensor, string, bool) {
	a, ok := arch.Lookup(name)
	if !ok {
		return nil, "", false
	}
	m := blockTarget.FindStringSubmatch(target)
	if m == nil {
		return nil, "", false
	}
	t, ok := a.Tensor(m[2])
	if !ok || t.Kind != arch.Matrix {
		return nil, "", false
	}
	return t, m[1], true
}

// hfModule is the transformers module of GGUF target name.
func hfModule(archName, name string) (string, bool) {
	switch name {
	case tokenEmbd:
		return "model.embed_tokens", true
	case "output.weight":
		return "lm_head", true
	}
	t, layer, ok := blockMatrix(archName, name)
	if !ok {
		return "", false
	}
	return "model.layers." + layer + "." + t.Module(), true
}

// ggufTarget is the GGUF name of transformers module mod.
func ggufTarget(archName, mod string) (string, bool) {
	switch mod {
	case "model.embed_tokens":
		return tokenEmbd, true
	case "lm_head":
		return "output.weight", true
	}
	rest, ok := strings.CutPrefix(mod, "model.layers.")
	if !ok {
		return "", false
	}
	i := strings.IndexByte(rest, '.')
	if i <= 0 {
		return "", false
	}
	if _, err := strconv.Atoi(rest[:i]); err != nil {
		return "", false
	}
	a, ok := arch.Lookup(archName)
	if !ok {
		return "", false
	}
	for _, t := range a.Block {
		if t.Kind == arch.Matrix && rest[i+1:] == t.Module() {
			return "blk." + rest[:i] + "." + t.GGUF, true
		}
	}
	return "", false
}

// permuteHeads is the head count llama.cpp's converter permutes the rows
// of target name with (0: none): Llama's q and k.
func permuteHeads(c *model.Config, name string) int {
	a, ok := arch.Lookup(c.Arch)
	if !ok || !a.PermuteQK {
		return 0
	}
	t, _, ok := blockMatrix(c.Arch, name)
	if !ok {
		return 0
	}
	switch t.Permute {
	case arch.QHeads:
		return c.Heads
	case arch.KVHeads:
		return c.KVHeads
	}
	return 0
}

// permuteRows reorders the rows (of cols values) of the GGUF-ordered m into
// Hugging Face order (toHF) or back.
func permuteRows(m []float32, rows, cols, heads int, toHF bool) []float32 {
	out := make([]float32, len(m))
	for r := range rows {
		g, h := r, arch.PermutedRow(r, rows, heads)
		src, dst := g, h
		if !toHF {
			src, dst = h, g
		}
		copy(out[dst*cols:(dst+1)*cols], m[src*cols:(src+1)*cols])
	}
	return out
}

// peftConfigJSON is adapter_config.json: the keys peft's LoraConfig writes
// that matter here.
type peftConfigJSON struct {
	PeftType      string             `json:"peft_type"`
	TaskType      string             `json:"task_type"`
	BaseModel     string             `json:"base_model_name_or_path"`
	R             int                `json:"r"`
	Alpha         float64            `json:"lora_alpha"`
	Dropout       float64            `json:"lora_dropout"`
	Bias          string             `json:"bias"`
	TargetModules []string           `json:"target_modules"`
	FanInFanOut   bool               `json:"fan_in_fan_out"`
	InferenceMode bool               `json:"inference_mode"`
	InitWeights   bool               `json:"init_lora_weights"`
	UseRSLoRA     bool               `json:"use_rslora"`
	UseDoRA       bool               `json:"use_dora"`
	RankPattern   map[string]int     `json:"rank_pattern"`
	AlphaPattern  map[string]float64 `json:"alpha_pattern"`
	ModulesToSave []string           `json:"modules_to_save"`
}

// WritePEFT writes a as a PEFT LoRA folder at dir (created if needed) for
// a base model with configuration c (its head counts undo llama.cpp's
// q/k permutation). Pairs of another rank than the most common are listed
// in rank_pattern, as peft writes them.
func WritePEFT(dir string, a *Adapter, c *model.Config) error {
	if err := a.validate(); err != nil {
		return err
	}
	if a.Arch != c.Arch {
		return fmt.Errorf("adapter: made for a %q model, the base is %q", a.Arch, c.Arch)
	}
	ranks := map[int]int{}
	for _, p := range a.Pairs {
		ranks[p.Rank]++
	}
	r := 0
	for k, n := range ranks {
		if n > ranks[r] || n == ranks[r] && k > r {
			r = k
		}
	}
	cfg := peftConfigJSON{
		PeftType: "LORA", TaskType: "CAUSAL_LM", BaseModel: a.BaseModel,
		R: r, Alpha: float64(a.Alpha), Dropout: float64(a.Dropout), Bias: "none",
		InferenceMode: true, InitWeights: true,
		RankPattern: map[string]int{}, AlphaPattern: map[string]float64{},
	}
	if a.Alpha == 0 {
		// llama.cpp's alpha 0 is a factor of 1; peft has no such case.
		return fmt.Errorf("adapter: alpha 0 (a factor of 1 in llama.cpp) has no PEFT equivalent; set alpha to the rank")
	}
	var tensors []safetensors.Data
	targets := map[string]bool{}
	for _, n := range a.Names() {
		p := a.Pairs[n]
		mod, ok := hfModule(a.Arch, n)
		if !ok {
			return fmt.Errorf("adapter: tensor %q has no Hugging Face module in a %s model", n, a.Arch)
		}
		short := mod[strings.LastIndexByte(mod, '.')+1:]
		targets[short] = true
		if p.Rank != r {
			cfg.RankPattern[mod] = p.Rank
		}
		if n == tokenEmbd {
			tensors = append(tensors,
				safetensors.F32Data(peftPrefix+mod+".lora_embedding_A", []int64{int64(p.Rank), int64(p.Rows)}, ref.Transpose(p.B, p.Rows, p.Rank)),
				safetensors.F32Data(peftPrefix+mod+".lora_embedding_B", []int64{int64(p.Cols), int64(p.Rank)}, ref.Transpose(p.A, p.Rank, p.Cols)))
			continue
		}
		b := p.B
		if h := permuteHeads(c, n); h > 0 {
			b = permuteRows(b, p.Rows, p.Rank, h, true)
		}
		tensors = append(tensors,
			safetensors.F32Data(peftPrefix+mod+".lora_A.weight", []int64{int64(p.Rank), int64(p.Cols)}, p.A),
			safetensors.F32Data(peftPrefix+mod+".lora_B.weight", []int64{int64(p.Rows), int64(p.Rank)}, b))
	}
	cfg.TargetModules = mapKeys(targets)
	slices.Sort(cfg.TargetModules)
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	// The weights first: a folder with a config is a complete adapter.
	if err := safetensors.WriteFile(filepath.Join(dir, peftWeights), tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, peftConfig), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	return nil
}

// ReadPEFT reads a PEFT LoRA folder for a base model with configuration c:
// the tensor names mapped to GGUF's, Llama's q/k rows permuted as llama.cpp
// lays them out. Check validates the result against the base model.
func ReadPEFT(dir string, c *model.Config) (*Adapter, error) {
	raw, err := os.ReadFile(filepath.Join(dir, peftConfig))
	if err != nil {
		return nil, fmt.Errorf("adapter: %w", err)
	}
	var cfg peftConfigJSON
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("adapter: %s: %w", filepath.Join(dir, peftConfig), err)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("adapter: %s: %s", dir, fmt.Sprintf(format, args...))
	}
	switch {
	case cfg.PeftType != "LORA":
		return nil, fail("peft_type %q is not LORA", cfg.PeftType)
	case cfg.R <= 0:
		return nil, fail("r %d must be positive", cfg.R)
	case cfg.UseDoRA:
		return nil, fail("DoRA (use_dora) adapters are not supported")
	case cfg.Bias != "" && cfg.Bias != "none":
		return nil, fail("bias %q: adapters with trained biases are not supported", cfg.Bias)
	case cfg.FanInFanOut:
		return nil, fail("fan_in_fan_out (Conv1D models) is not supported")
	case len(cfg.AlphaPattern) > 0:
		return nil, fail("alpha_pattern is not supported: llama.cpp has one alpha per adapter")
	case len(cfg.ModulesToSave) > 0:
		return nil, fail("modules_to_save %v: fully trained modules are not a LoRA", cfg.ModulesToSave)
	case math.IsNaN(cfg.Alpha) || math.IsInf(cfg.Alpha, 0) || cfg.Alpha <= 0:
		return nil, fail("lora_alpha %v must be a positive number", cfg.Alpha)
	}
	a := &Adapter{Arch: c.Arch, Alpha: float32(cfg.Alpha), Dropout: float32(cfg.Dropout), BaseModel: cfg.BaseModel, Pairs: map[string]*Pair{}}
	if cfg.UseRSLoRA {
		// rsLoRA's factor is alpha/√r; as alpha'/r, alpha' = alpha·√r.
		a.Alpha = float32(cfg.Alpha * math.Sqrt(float64(cfg.R)))
	}

	path := filepath.Join(dir, peftWeights)
	st, err := safetensors.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fail("no %s (adapter_model.bin, a pickle, is not read: convert it with safetensors)", peftWeights)
		}
		return nil, fmt.Errorf("adapter: %w", err)
	}
	defer st.Close()
	type half struct {
		t   *safetensors.Tensor
		emb bool
	}
	halves := map[string][2]*half{}
	for _, t := range st.Tensors {
		name, ok := strings.CutPrefix(t.Name, peftPrefix)
		if !ok {
			return nil, fail("tensor %q does not start with %q", t.Name, peftPrefix)
		}
		var mod string
		var which int
		var emb bool
		switch {
		case strings.HasSuffix(name, ".lora_A.weight"):
			mod = strings.TrimSuffix(name, ".lora_A.weight")
		case strings.HasSuffix(name, ".lora_B.weight"):
			mod, which = strings.TrimSuffix(name, ".lora_B.weight"), 1
		case strings.HasSuffix(name, ".lora_embedding_A"):
			mod, emb = strings.TrimSuffix(name, ".lora_embedding_A"), true
		case strings.HasSuffix(name, ".lora_embedding_B"):
			mod, which, emb = strings.TrimSuffix(name, ".lora_embedding_B"), 1, true
		default:
			return nil, fail("tensor %q is not a LoRA A or B", t.Name)
		}
		// Multimodal checkpoints (Gemma 3) put the text model under a prefix.
		for _, p := range [][2]string{{"language_model.model.", "model."}, {"model.language_model.", "model."}, {"language_model.lm_head", "lm_head"}} {
			if rest, ok := strings.CutPrefix(mod, p[0]); ok {
				mod = p[1] + rest
				break
			}
		}
		gg, ok := ggufTarget(c.Arch, mod)
		if !ok {
			return nil, fail("tensor %q: module %q is not a projection of a %s model", t.Name, mod, c.Arch)
		}
		if emb != (gg == tokenEmbd) {
			return nil, fail("tensor %q: an embedding pair on a linear module or the reverse", t.Name)
		}
		h := halves[gg]
		h[which] = &half{t, emb}
		halves[gg] = h
	}
	for _, gg := range sortTargets(mapKeys(halves)) {
		h := halves[gg]
		if h[0] == nil || h[1] == nil {
			return nil, fail("tensor %q has only one of its LoRA A and B", gg)
		}
		ta, tb := h[0].t, h[1].t
		if len(ta.Shape) != 2 || len(tb.Shape) != 2 {
			return nil, fail("tensors %q %v and %q %v must be matrices", ta.Name, ta.Shape, tb.Name, tb.Shape)
		}
		av, err := ta.Float32()
		if err != nil {
			return nil, fmt.Errorf("adapter: %w", err)
		}
		bv, err := tb.Float32()
		if err != nil {
			return nil, fmt.Errorf("adapter: %w", err)
		}
		p := &Pair{}
		if gg == tokenEmbd {
			// lora_embedding_A [r, vocab], lora_embedding_B [hidden, r].
			p.Rank, p.Rows, p.Cols = int(ta.Shape[0]), int(ta.Shape[1]), int(tb.Shape[0])
			if int(tb.Shape[1]) != p.Rank {
				return nil, fail("tensor %q %v has rank %d but %q %v %d", ta.Name, ta.Shape, p.Rank, tb.Name, tb.Shape, tb.Shape[1])
			}
			p.B, p.A = ref.Transpose(av, p.Rank, p.Rows), ref.Transpose(bv, p.Cols, p.Rank)
		} else {
			p.Rank, p.Cols, p.Rows = int(ta.Shape[0]), int(ta.Shape[1]), int(tb.Shape[0])
			if int(tb.Shape[1]) != p.Rank {
				return nil, fail("tensor %q %v has rank %d but %q %v %d", ta.Name, ta.Shape, p.Rank, tb.Name, tb.Shape, tb.Shape[1])
			}
			p.A, p.B = av, bv
			if heads := permuteHeads(c, gg); heads > 0 {
				if p.Rows%heads != 0 || (p.Rows/heads)%2 != 0 {
					return nil, fail("tensor %q: %d rows do not split into %d heads of an even size", tb.Name, p.Rows, heads)
				}
				p.B = permuteRows(p.B, p.Rows, p.Rank, heads, false)
			}
		}
		a.Pairs[gg] = p
	}
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	return a, nil
}
