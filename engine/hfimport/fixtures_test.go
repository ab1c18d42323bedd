package hfimport

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// TestImportFixtures imports every Hugging Face folder that
// engine/model/testdata/hf/make_fixtures.py made (transformers' own
// save_pretrained output, so the config layout of the real library) and
// checks what its expected.json says of the model. engine/model's tests
// compare the forward pass; this one only that the import succeeds and
// agrees on the shapes and the prompt's token ids.
func TestImportFixtures(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "model", "testdata", "hf", "*", "expected.json"))
	if len(dirs) == 0 {
		t.Skip("no fixtures in engine/model/testdata/hf (make_fixtures.py has not been run)")
	}
	arch := map[string]string{
		"llama": "llama", "mistral": "llama", "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3",
		"qwen2": "qwen2", "qwen3": "qwen3", "phi3": "phi3", "phi3_longrope": "phi3", "qwen2_yarn": "qwen2",
		"gemma4": "gemma4", "gemma3n": "gemma3n", "qwen3moe": "qwen3moe", "gemma4moe": "gemma4", "gptoss": "gpt-oss",
	}
	for _, exp := range dirs {
		dir := filepath.Dir(exp)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Family      string  `json:"family"`
				LogitsShape []int   `json:"logits_shape"`
				PromptText  string  `json:"prompt_text"`
				PromptIDs   []int32 `json:"prompt_ids"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			f := importModel(t, dir, Options{})
			if got := f.Architecture(); got != arch[e.Family] {
				t.Errorf("architecture %q, want %q", got, arch[e.Family])
			}
			// The long-context RoPE in the key forms llama.cpp's converter
			// writes: LongRoPE's factor tensors and attention factor
			// sqrt(1 + ln(64/16) / ln 16), YaRN's type, factor and original
			// context.
			switch e.Family {
			case "phi3_longrope":
				for _, n := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
					if ti, ok := f.Tensor(n); !ok || len(ti.Shape) != 1 || ti.Shape[0] != 8 {
						t.Errorf("%s: %v, want 8 factors", n, ti.Shape)
					}
				}
				if a, err := f.Float32("phi3.rope.scaling.attn_factor"); err != nil || math.Abs(float64(a)-math.Sqrt(1.5)) > 1e-6 {
					t.Errorf("phi3.rope.scaling.attn_factor = %v (%v), want sqrt(1.5)", a, err)
				}
			case "gemma3n":
				// transformers saves no k or v for the layers past the
				// KV-sharing boundary; llama.cpp's loader requires them,
				// so they are there, zeros.
				for _, n := range []string{"blk.4.attn_k.weight", "blk.5.attn_v.weight", "blk.5.attn_k_norm.weight"} {
					if _, ok := f.Tensor(n); !ok {
						t.Errorf("no %s", n)
					} else if v := floats(t, f, n); slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) {
						t.Errorf("%s is not zeros", n)
					}
				}
			case "qwen3moe":
				// The experts stacked whichever form save_pretrained
				// wrote them in, and the router in F32.
				n, _ := f.Int("qwen3moe.expert_count")
				ff, _ := f.Int("qwen3moe.expert_feed_forward_length")
				emb, _ := f.Tensor("token_embd.weight")
				down, ok := f.Tensor("blk.0.ffn_down_exps.weight")
				if n < 2 || ff < 1 || !ok || !slices.Equal(down.Shape, []uint64{uint64(ff), emb.Shape[0], uint64(n)}) {
					t.Errorf("expert_count %d, expert_feed_forward_length %d, blk.0.ffn_down_exps.weight %v", n, ff, down.Shape)
				}
				if router, _ := f.Tensor("blk.0.ffn_gate_inp.weight"); router.Type != gguf.TypeF32 {
					t.Errorf("blk.0.ffn_gate_inp.weight is %v, want F32", router.Type)
				}
			case "gptoss":
				// gate_up_proj split into its interleaved halves and every
				// expert transposed to GGUF's rows; biases, sinks and the
				// router F32; the alternation llama.cpp assumes, so no
				// pattern key.
				n, _ := f.Int("gpt-oss.expert_count")
				ff, _ := f.Int("gpt-oss.expert_feed_forward_length")
				emb, _ := f.Tensor("token_embd.weight")
				for name, shape := range map[string][]uint64{
					"blk.0.ffn_gate_exps.weight": {emb.Shape[0], uint64(ff), uint64(n)},
					"blk.0.ffn_down_exps.weight": {uint64(ff), emb.Shape[0], uint64(n)},
					"blk.0.ffn_up_exps.bias":     {uint64(ff), uint64(n)},
				} {
					if ti, ok := f.Tensor(name); n < 2 || !ok || !slices.Equal(ti.Shape, shape) {
						t.Errorf("expert_count %d, expert_feed_forward_length %d, %s %v, want %v", n, ff, name, ti.Shape, shape)
					}
				}
				for _, name := range []string{"blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_inp.bias", "blk.0.attn_sinks.weight", "blk.0.ffn_down_exps.bias"} {
					if ti, _ := f.Tensor(name); ti.Type != gguf.TypeF32 {
						t.Errorf("%s is %v, want F32", name, ti.Type)
					}
				}
				if _, ok := f.Value("gpt-oss.attention.sliding_window_pattern"); ok {
					t.Error("gpt-oss.attention.sliding_window_pattern is written for the alternation")
				}
			case "qwen2_yarn":
				typ, _ := f.String("qwen2.rope.scaling.type")
				factor, _ := f.Float32("qwen2.rope.scaling.factor")
				orig, _ := f.Int("qwen2.rope.scaling.original_context_length")
				if typ != "yarn" || factor != 4 || orig != 16 {
					t.Errorf("rope.scaling type %q factor %v original context %d, want yarn, 4, 16", typ, factor, orig)
				}
			}
			emb, ok := f.Tensor("token_embd.weight")
			if !ok || len(e.LogitsShape) != 2 || emb.Shape[1] != uint64(e.LogitsShape[1]) {
				t.Errorf("token_embd.weight %v, logits shape %v", emb.Shape, e.LogitsShape)
			}
			toks, err := f.Strings("tokenizer.ggml.tokens")
			if err != nil || len(toks) != e.LogitsShape[1] {
				t.Errorf("%d tokens (%v), want %d", len(toks), err, e.LogitsShape[1])
			}
			if pre, _ := f.String("tokenizer.ggml.pre"); pre != "gpt-2" {
				t.Errorf("tokenizer.ggml.pre = %q, want gpt-2", pre)
			}
			// The imported tokenizer gives the ids Hugging Face tokenizers
			// gave for the prompt.
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Encode(e.PromptText, tokenizer.EncodeOptions{AddSpecial: true}); !slices.Equal(got, e.PromptIDs) {
				t.Errorf("Encode(%q) = %v, want %v", e.PromptText, got, e.PromptIDs)
			}
		})
	}
}
