package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/logitstest"
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

// embeddingFromGemma3 rewrites tiny-gemma3 (F32) as a gemma-embedding
// file: its keys under the new architecture's name, and dense_2 (Hidden
// to 3·Hidden) and dense_3 (back) of random values. A model for the
// backends' parity; the numbers transformers gives are the fixture's.
func embeddingFromGemma3(t *testing.T) string {
	t.Helper()
	m := synthModel(t, "tiny-gemma3", "F32")
	set := map[string]gguf.Value{"general.architecture": gguf.ValueOf("gemma-embedding")}
	for _, kv := range m.File.Metadata() {
		if rest, ok := strings.CutPrefix(kv.Key, "gemma3."); ok {
			set[kv.Key] = gguf.Value{}
			set["gemma-embedding."+rest] = kv.Value
		}
	}
	hidden := m.Config.Hidden
	r := rand.New(rand.NewPCG(11, 0xe))
	dense := func(name string, rows, cols int) addedTensor {
		b := make([]byte, 0, 4*rows*cols)
		for range rows * cols {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(r.NormFloat64()*0.1)))
		}
		return addedTensor{Name: name, Type: gguf.TypeF32, Shape: []uint64{uint64(cols), uint64(rows)}, Data: b}
	}
	add := []addedTensor{dense("dense_2.weight", 3*hidden, hidden), dense("dense_3.weight", hidden, 3*hidden)}
	return rewriteAdding(t, m.Path, set, add)
}

// TestEmbeddingModelGPUMatchesCPU: the backends agree on an encoder's
// hidden states over an input four windows long (the symmetric window on
// the sliding layers, the whole input on the global one), within the
// model tests' tolerance; and the first token's state depends on the
// last token's on both, where a causal mask would leave it alone.
func TestEmbeddingModelGPUMatchesCPU(t *testing.T) {
	m, err := Load(embeddingFromGemma3(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	if !c.Bidirectional || m.Dense2 == nil || c.Window(0) != c.SlidingWindow/2+1 {
		t.Fatalf("loaded %s: bidirectional %v, dense %v, window %d of %d", c.Arch, c.Bidirectional, m.Dense2 != nil, c.Window(0), c.SlidingWindow)
	}
	n := 4 * c.SlidingWindow
	cpu, g, prompt := backends(t, m, n, 16, n, 7919)
	d := c.Hidden
	states := map[string][]float32{}
	for name, r := range map[string]Runner{"cpu": cpu, "gpu": g} {
		res, err := r.Forward(prompt, 0, Output{Hidden: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		states[name] = res.Hidden
		alt := slices.Clone(prompt)
		alt[n-1] = (alt[n-1] + 1) % int32(c.Vocab)
		other, err := r.Forward(alt, 0, Output{Hidden: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if slices.Equal(other.Hidden[:d], res.Hidden[:d]) {
			t.Errorf("%s: the last token leaves the first token's state: the attention is causal", name)
		}
	}
	if diff, at := logitstest.MaxRelDiff(states["gpu"], states["cpu"]); diff > tolFor(m) {
		t.Errorf("hidden states differ by %.3g of the range at token %d", diff, at/d)
	}
}
