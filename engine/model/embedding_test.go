package model

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// embeddingGemmaFile is the EmbeddingGemma fixture as llama.cpp's converter
// wrote it (testdata/embeddinggemma: make_fixture.py, convert.py); its
// embeddings are checked against transformers in app's
// TestEmbeddingGemmaMatchesTransformers.
var embeddingGemmaFile = filepath.Join("testdata", "embeddinggemma", "embeddinggemma.gguf")

// TestEmbeddingModelRefusesBadFiles: EmbeddingGemma's dense layers come
// as a pair, read the embedding's width and write it back, and the file's
// widths must agree with its tensors.
func TestEmbeddingModelRefusesBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		want string
	}{
		{"dense_3 missing", rewrite(t, embeddingGemmaFile, nil, "dense_3.weight"), `"dense_2.weight" and "dense_3.weight" come as a pair`},
		{"dense_2 missing", rewrite(t, embeddingGemmaFile, nil, "dense_2.weight"), `come as a pair`},
		{"dense_2 reads another width", rewrite(t, embeddingGemmaFile, map[string]gguf.Value{"gemma-embedding.dense_2_feat_in": gguf.ValueOf(uint32(32))}), "dense_2_feat_in is 32, want the embedding width 64"},
		{"dense_3 writes another width", rewrite(t, embeddingGemmaFile, map[string]gguf.Value{"gemma-embedding.dense_3_feat_out": gguf.ValueOf(uint32(65))}), "dense_3_feat_out is 65"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(tc.path)
			if err == nil {
				m.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestEmbeddingModelWritesNoText: an encoder's forward is one whole input
// from position 0 whose hidden states are wanted; logits, or a position
// past 0 (a cache to continue), are refused by name on both backends, and
// the GPU takes the whole context in one chain.
func TestEmbeddingModelWritesNoText(t *testing.T) {
	m, err := Load(embeddingGemmaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cpu, g, _ := backends(t, m, 64, 16, 3, 1)
	if g.batch != 64 {
		t.Errorf("the GPU evaluates %d tokens a chain, want the context's 64", g.batch)
	}
	for name, r := range map[string]Runner{"cpu": cpu, "gpu": g} {
		for _, c := range []struct {
			pos int
			out Output
		}{{0, Output{}}, {0, Output{All: true}}, {5, Output{Hidden: true}}} {
			if _, err := r.Forward([]int32{2, 5, 7}, c.pos, c.out); err == nil || !strings.Contains(err.Error(), "embedding model") {
				t.Errorf("%s: forward at %d with %+v: %v, want a refusal naming an embedding model", name, c.pos, c.out, err)
			}
		}
		if res, err := r.Forward([]int32{2, 5, 7}, 0, Output{Hidden: true}); err != nil || len(res.Hidden) != 3*m.Config.Hidden {
			t.Errorf("%s: the hidden states: %d floats, %v", name, len(res.Hidden), err)
		}
	}
}
