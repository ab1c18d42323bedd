package hfimport

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/safetensors"
)

// embeddingGemma is a tiny EmbeddingGemma folder as sentence-transformers
// saves it: Gemma3TextModel's config with use_bidirectional_attention and
// its unprefixed tensors, modules.json, mean pooling, a Dense H→2H and a
// Dense 2H→H (linear.weight, no bias) and Normalize. edit, when set,
// changes the modules before they are written.
func embeddingGemma(t *testing.T, edit func(modules []map[string]any, dense map[string]map[string]any)) (dir string, d2, d3 stTensor) {
	t.Helper()
	d := dims{vocab: 10, hidden: 8, layers: 6, ff: 12, heads: 2, kvHeads: 1, headDim: 6}
	m := newModel("Gemma3TextModel", d, safetensors.F16, map[string]any{
		"sliding_window": 8, "query_pre_attn_scalar": 24, "use_bidirectional_attention": true,
	})
	for i := range m.tensors {
		m.tensors[i].name = strings.TrimPrefix(m.tensors[i].name, "model.")
	}
	dir = m.write(t)
	rng := rand.New(rand.NewPCG(5, 9))
	H := int64(d.hidden)
	d2 = randomTensor(rng, "linear.weight", safetensors.F32, 2*H, H)
	d3 = randomTensor(rng, "linear.weight", safetensors.F32, H, 2*H)
	modules := []map[string]any{
		{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
		{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
		{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
		{"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
		{"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"},
	}
	dense := map[string]map[string]any{
		"2_Dense": {"in_features": H, "out_features": 2 * H, "bias": false, "activation_function": "torch.nn.modules.linear.Identity"},
		"3_Dense": {"in_features": 2 * H, "out_features": H, "bias": false, "activation_function": "torch.nn.modules.linear.Identity"},
	}
	if edit != nil {
		edit(modules, dense)
	}
	writeJSON(t, filepath.Join(dir, "modules.json"), modules)
	if err := os.Mkdir(filepath.Join(dir, "1_Pooling"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, "1_Pooling", "config.json"), map[string]any{"word_embedding_dimension": H, "pooling_mode_mean_tokens": true, "pooling_mode_cls_token": false})
	for name, w := range map[string]stTensor{"2_Dense": d2, "3_Dense": d3} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeJSON(t, filepath.Join(dir, name, "config.json"), dense[name])
		writeSafetensors(t, filepath.Join(dir, name, "model.safetensors"), []stTensor{w})
	}
	return dir, d2, d3
}

// TestImportEmbeddingGemma: a sentence-transformers EmbeddingGemma
// imports as llama.cpp's converter writes it: gemma-embedding, the window
// config.json says (not transformers' halved one), the pooling and the
// dense layers' widths as keys, the dense weights value for value, the
// base model's unprefixed tensors found.
func TestImportEmbeddingGemma(t *testing.T) {
	dir, d2, d3 := embeddingGemma(t, nil)
	f := importModel(t, dir, Options{})
	if a, _ := f.StringOr("general.architecture", ""); a != "gemma-embedding" {
		t.Fatalf("architecture %q", a)
	}
	for key, want := range map[string]int{
		"gemma-embedding.attention.sliding_window": 8, "gemma-embedding.pooling_type": 1,
		"gemma-embedding.dense_2_feat_in": 8, "gemma-embedding.dense_2_feat_out": 16,
		"gemma-embedding.dense_3_feat_in": 16, "gemma-embedding.dense_3_feat_out": 8,
	} {
		if got, err := f.Int(key); err != nil || got != want {
			t.Errorf("%s = %d (%v), want %d", key, got, err, want)
		}
	}
	for name, src := range map[string]stTensor{"dense_2.weight": d2, "dense_3.weight": d3} {
		info, _ := f.Tensor(name)
		if want := []uint64{uint64(src.shape[1]), uint64(src.shape[0])}; !slices.Equal(info.Shape, want) {
			t.Errorf("%s: shape %v, want %v", name, info.Shape, want)
		}
		if got := floats(t, f, name); !slices.Equal(got, src.values) {
			t.Errorf("%s: the values differ from 2_Dense/3_Dense's", name)
		}
	}
	if _, ok := f.Tensor("blk.5.attn_q_norm.weight"); !ok {
		t.Error("the base model's layers were not found")
	}
	// Hearth's loader takes it as the encoder it is.
	m, err := model.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config; !c.Bidirectional || c.Window(0) != 5 || m.Dense2 == nil || m.Dense3 == nil || m.Dense2.Rows != 16 {
		t.Errorf("loaded: bidirectional %v, window %d, dense %v %v", c.Bidirectional, c.Window(0), m.Dense2 != nil, m.Dense3 != nil)
	}
}

// TestImportEmbeddingGemmaRefuses: what the GGUF cannot say, or Hearth
// cannot run, is refused by name.
func TestImportEmbeddingGemmaRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func([]map[string]any, map[string]map[string]any)
		want string
	}{
		{"a dense bias", func(_ []map[string]any, d map[string]map[string]any) { d["2_Dense"]["bias"] = true }, "bias"},
		{"an activation", func(_ []map[string]any, d map[string]map[string]any) {
			d["3_Dense"]["activation_function"] = "torch.nn.modules.activation.Tanh"
		}, "Tanh"},
		{"widths that do not chain", func(_ []map[string]any, d map[string]map[string]any) { d["3_Dense"]["in_features"] = 12 }, "Dense modules map"},
		{"another module", func(m []map[string]any, _ map[string]map[string]any) {
			m[4]["type"] = "sentence_transformers.models.LayerNorm"
		}, "LayerNorm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, _ := embeddingGemma(t, tc.edit)
			err := Import(dir, filepath.Join(t.TempDir(), "out.gguf"), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	// Gemma3TextModel without the bidirectional key is Gemma 3's base
	// model, not an encoder; Gemma 3's causal class with it is neither.
	m := newModel("Gemma3TextModel", dims{vocab: 10, hidden: 8, layers: 6, ff: 12, heads: 2, kvHeads: 1, headDim: 6}, safetensors.F16, nil)
	importRefused(t, m, "use_bidirectional_attention", "is not true")
	c := newModel("Gemma3ForCausalLM", dims{vocab: 10, hidden: 8, layers: 6, ff: 12, heads: 2, kvHeads: 1, headDim: 6}, safetensors.F16, map[string]any{"use_bidirectional_attention": true})
	importRefused(t, c, "use_bidirectional_attention", "only EmbeddingGemma")
}
