package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
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
	src := synthModel(t, "tiny-gemma3", "F32").Path
	in, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(t.TempDir(), "embedding.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter(f)
	hidden := 0
	for _, kv := range in.Metadata() {
		key, v := kv.Key, kv.Value
		switch {
		case key == "general.architecture":
			v = gguf.ValueOf("gemma-embedding")
		case strings.HasPrefix(key, "gemma3."):
			key = "gemma-embedding." + strings.TrimPrefix(key, "gemma3.")
		}
		if key == "gemma-embedding.embedding_length" {
			hidden = int(v.Any().(uint32))
		}
		if err := w.Set(key, v); err != nil {
			t.Fatal(err)
		}
	}
	dense := map[string][2]int{"dense_2.weight": {3 * hidden, hidden}, "dense_3.weight": {hidden, 3 * hidden}}
	tensors := in.Tensors()
	for _, ti := range tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Shape); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"dense_2.weight", "dense_3.weight"} {
		rc := dense[name]
		if err := w.AddTensor(name, gguf.TypeF32, []uint64{uint64(rc[1]), uint64(rc[0])}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range tensors {
		data, err := in.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensorBytes(ti.Name, data); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(11, 0xe))
	for _, name := range []string{"dense_2.weight", "dense_3.weight"} {
		rc := dense[name]
		b := make([]byte, 0, 4*rc[0]*rc[1])
		for range rc[0] * rc[1] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(r.NormFloat64()*0.1)))
		}
		if err := w.WriteTensorBytes(name, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
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
