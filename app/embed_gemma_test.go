package app

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// embeddingGemmaExpected is engine/model/testdata/embeddinggemma/expected.json, written
// by make_fixture.py from transformers (the encoder) and the
// sentence-transformers modules' arithmetic (mean pooling, the two dense
// layers, unit length).
type embeddingGemmaExpected struct {
	Texts      []string    `json:"texts"`
	IDs        [][]int32   `json:"ids"`
	Embeddings [][]float64 `json:"embeddings"`
	Window     int         `json:"window"`
	HFWindow   int         `json:"hf_window"`
}

// embeddingGemmaTol bounds each component's difference from the
// reference. The vectors have unit length over 64 components (about 0.12
// each); Hearth's f32 forward and transformers' differ by f32 roundings
// through 6 layers, measured at 2.9e-7 (GPU, lavapipe) and 1.6e-7 (CPU).
// A missing window, a causal mask or a dense layer left out moves
// components by 1e-2 and more.
const embeddingGemmaTol = 1e-5

// embeddingGemmaConvertedTol is embeddingGemmaTol for llama.cpp's file,
// whose converter adds Gemma's 1 to each norm gain in the checkpoint's f16
// (torch's f16 add), so every gain is 1 + w rounded to f16 (off by up to
// 2^-11 relative, where transformers adds in f32). That moves the
// vectors by 3.0e-4 on both backends; a wrong scale, window or mask moves
// them by 1e-2 and more.
const embeddingGemmaConvertedTol = 1e-3

// TestEmbeddingGemmaMatchesTransformers embeds the fixture's texts with a
// tiny random EmbeddingGemma, as hearth import writes its
// sentence-transformers folder and as llama.cpp's own converter wrote it
// (convert.py), on both backends: the tokens, the window, the dense
// layers, and every vector within embeddingGemmaTol of the reference. The
// inputs are longer and shorter than the symmetric window, so the window
// and the bidirectional mask both show. The model writes no text: a chat
// with it is refused by name.
//
// llama.cpp's converter writes no attention scale for gemma-embedding, and
// llama.cpp scales such a model's scores by 1/sqrt(head_dim) whatever the
// file says; hearth import writes transformers' 1/sqrt(query_pre_attn_scalar).
// The fixture has query_pre_attn_scalar = head_dim, as the real model
// (256 = 256), so both files give transformers' vectors, llama.cpp's within
// its converter's rounding of the norm gains (embeddingGemmaConvertedTol).
func TestEmbeddingGemmaMatchesTransformers(t *testing.T) {
	dir := filepath.Join("..", "engine", "model", "testdata", "embeddinggemma")
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp embeddingGemmaExpected
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	imported := filepath.Join(t.TempDir(), "imported.gguf")
	if err := hfimport.Import(filepath.Join(dir, "model"), imported, hfimport.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Run("hearth import", func(t *testing.T) { checkEmbeddingGemma(t, imported, exp, embeddingGemmaTol) })
	t.Run("llama.cpp", func(t *testing.T) {
		checkEmbeddingGemma(t, filepath.Join(dir, "embeddinggemma.gguf"), exp, embeddingGemmaConvertedTol)
	})
}

// checkEmbeddingGemma embeds exp's texts with the file at path, as
// TestEmbeddingGemmaMatchesTransformers says, each vector within tol of
// the reference.
func checkEmbeddingGemma(t *testing.T, path string, exp embeddingGemmaExpected, tol float64) {
	t.Helper()
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.Arch != "gemma-embedding" || !c.Bidirectional || m.Dense2 == nil || m.Dense3 == nil {
		t.Fatalf("loaded %s (bidirectional %v, dense layers %v %v)", c.Arch, c.Bidirectional, m.Dense2 != nil, m.Dense3 != nil)
	}
	// llama.cpp's for this architecture, and transformers' for the fixture.
	if want := float32(1 / math.Sqrt(float64(c.HeadDim))); c.AttnScale != want {
		t.Errorf("attention scale %v, want %v", c.AttnScale, want)
	}
	if c.SlidingWindow != exp.Window || c.Window(0) != exp.HFWindow || c.Window(c.Layers-1) != 0 {
		t.Errorf("window %d (layer 0 sees |i-j| < %d, the last %d), want %d (< %d) and a global last layer", c.SlidingWindow, c.Window(0), c.Window(c.Layers-1), exp.Window, exp.HFWindow)
	}
	longest := 0
	for i, text := range exp.Texts {
		ids := m.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
		if !slices.Equal(ids, exp.IDs[i]) {
			t.Fatalf("text %d: tokens %v, want %v", i, ids, exp.IDs[i])
		}
		longest = max(longest, len(ids))
	}
	m.Close()
	if longest <= 2*exp.HFWindow {
		t.Fatalf("the longest input is %d tokens: it must pass the window on both sides of some token", longest)
	}
	vectors := map[string][][]float32{}
	for _, backend := range []string{"cpu", "gpu"} {
		t.Run(backend, func(t *testing.T) {
			e := NewEngine(EngineOptions{Backend: backend})
			defer e.Close()
			ctx := context.Background()
			reply, err := e.Embed(ctx, EmbedRequest{Model: path, Inputs: exp.Texts})
			if err != nil {
				t.Fatal(err)
			}
			vectors[backend] = reply.Vectors
			worst := 0.0
			for i, v := range reply.Vectors {
				if len(v) != len(exp.Embeddings[i]) {
					t.Fatalf("text %d: %d values, want %d", i, len(v), len(exp.Embeddings[i]))
				}
				for j, x := range v {
					worst = max(worst, math.Abs(float64(x)-exp.Embeddings[i][j]))
				}
			}
			t.Logf("largest difference from the reference: %.3g", worst)
			if worst > tol {
				t.Errorf("embeddings differ from the reference by %.3g, over %.0e", worst, tol)
			}
			req := hello(2)
			req.Model = path
			if _, err := e.Chat(ctx, req, nil); err == nil || !strings.Contains(err.Error(), "embedding model") {
				t.Errorf("a chat with the embedding model: %v, want a refusal naming it an embedding model", err)
			}
		})
	}
	// Both backends give the same vectors.
	cpu, gpu := vectors["cpu"], vectors["gpu"]
	if len(cpu) != len(exp.Texts) || len(gpu) != len(cpu) {
		return // a subtest failed above
	}
	worst := 0.0
	for i := range cpu {
		for j := range cpu[i] {
			worst = max(worst, math.Abs(float64(cpu[i][j]-gpu[i][j])))
		}
	}
	if worst > embeddingGemmaTol {
		t.Errorf("the CPU's and the GPU's vectors differ by %.3g, over %.0e", worst, embeddingGemmaTol)
	}
}
