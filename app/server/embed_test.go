package server

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app"
)

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestEmbeddings(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{Context: 32}, Options{})
	type openAIEmbeddings struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Model string `json:"model"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	var f openAIEmbeddings
	inputs := []string{"Why is the sky blue?", "Rayleigh scattering.", "Why is the sky blue?"}
	ts.post(t, "/v1/embeddings", map[string]any{"model": qwen, "input": inputs}, &f)
	if f.Object != "list" || len(f.Data) != 3 || f.Model != qwen || f.Usage.PromptTokens == 0 || f.Usage.TotalTokens != f.Usage.PromptTokens {
		t.Fatalf("%+v", f)
	}
	for i, d := range f.Data {
		if d.Object != "embedding" || d.Index != i || len(d.Embedding) != 128 || math.Abs(norm(d.Embedding)-1) > 1e-5 {
			t.Errorf("data[%d]: %s, index %d, %d floats of norm %v", i, d.Object, d.Index, len(d.Embedding), norm(d.Embedding))
		}
	}
	same := func(a, b []float32) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return len(a) == len(b)
	}
	if !same(f.Data[0].Embedding, f.Data[2].Embedding) || same(f.Data[0].Embedding, f.Data[1].Embedding) {
		t.Error("the same text must embed the same, different texts differently")
	}

	// base64: the same floats, little-endian.
	var b struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	ts.post(t, "/v1/embeddings", map[string]any{"model": qwen, "input": inputs[1], "encoding_format": "base64"}, &b)
	raw, err := base64.StdEncoding.DecodeString(b.Data[0].Embedding)
	if err != nil || len(raw) != 4*128 {
		t.Fatalf("base64: %v, %d bytes", err, len(raw))
	}
	for j := range 128 {
		if math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])) != f.Data[1].Embedding[j] {
			t.Fatalf("base64 float %d differs", j)
		}
	}

	// Ollama's /api/embed gives the same unit vectors; /api/embeddings the
	// vector before scaling.
	var o struct {
		Model           string      `json:"model"`
		Embeddings      [][]float32 `json:"embeddings"`
		PromptEvalCount int         `json:"prompt_eval_count"`
	}
	ts.post(t, "/api/embed", map[string]any{"model": qwen, "input": inputs[:2]}, &o)
	if len(o.Embeddings) != 2 || !same(o.Embeddings[0], f.Data[0].Embedding) || !same(o.Embeddings[1], f.Data[1].Embedding) || o.PromptEvalCount == 0 {
		t.Errorf("/api/embed: %d vectors, %d tokens", len(o.Embeddings), o.PromptEvalCount)
	}
	var legacy struct {
		Embedding []float32 `json:"embedding"`
	}
	ts.post(t, "/api/embeddings", map[string]any{"model": qwen, "prompt": inputs[0]}, &legacy)
	n := norm(legacy.Embedding)
	for j, x := range legacy.Embedding {
		if math.Abs(float64(x)/n-float64(f.Data[0].Embedding[j])) > 1e-6 {
			t.Fatalf("/api/embeddings scaled to unit length differs at %d", j)
		}
	}

	// An input past the 32-token context: cut by default on /api/embed,
	// an error with truncate false and on OpenAI's endpoint.
	long := ""
	for range 40 {
		long += "sky blue "
	}
	resp, data := ts.do(t, "POST", "/api/embed", map[string]any{"model": qwen, "input": long})
	if resp.StatusCode != 200 {
		t.Errorf("/api/embed of a long input: %s %s", resp.Status, data)
	}
	for _, c := range []struct {
		path string
		body map[string]any
	}{{"/api/embed", map[string]any{"model": qwen, "input": long, "truncate": false}}, {"/v1/embeddings", map[string]any{"model": qwen, "input": long}}} {
		if resp, data := ts.do(t, "POST", c.path, c.body); resp.StatusCode != 400 {
			t.Errorf("%s of a long input without truncation: %s %s", c.path, resp.Status, data)
		}
	}
	for _, body := range []map[string]any{{"model": qwen, "input": []int{1, 2}}, {"model": qwen, "input": 5}, {"model": qwen, "input": "x", "dimensions": 0},
		{"model": qwen, "input": "x", "encoding_format": "int8"}} {
		if resp, data := ts.do(t, "POST", "/v1/embeddings", body); resp.StatusCode != 400 {
			t.Errorf("%v: %s %s", body, resp.Status, data)
		}
	}
	if resp, data := ts.do(t, "POST", "/api/embeddings", map[string]any{"model": qwen, "prompt": "x", "dimensions": 8}); resp.StatusCode != 400 {
		t.Errorf("/api/embeddings with dimensions: %s %s", resp.Status, data)
	}

	// dimensions: the first values of the unit vector, scaled back to
	// unit length (Ollama's rule), on both endpoints; a width past the
	// model's leaves the vector whole.
	var short openAIEmbeddings
	ts.post(t, "/v1/embeddings", map[string]any{"model": qwen, "input": inputs[1], "dimensions": 32}, &short)
	full := f.Data[1].Embedding
	n32 := norm(full[:32])
	if v := short.Data[0].Embedding; len(v) != 32 || math.Abs(norm(v)-1) > 1e-6 {
		t.Fatalf("dimensions 32: %d floats of norm %v", len(v), norm(v))
	}
	for j, x := range short.Data[0].Embedding {
		if math.Abs(float64(x)-float64(full[j])/n32) > 1e-6 {
			t.Fatalf("dimensions 32: float %d is %v, the full vector's %v over the norm of its first 32 (%v)", j, x, full[j], n32)
		}
	}
	ts.post(t, "/api/embed", map[string]any{"model": qwen, "input": inputs[1], "dimensions": 32}, &o)
	if !same(o.Embeddings[0], short.Data[0].Embedding) {
		t.Error("/api/embed with dimensions 32 differs from /v1/embeddings'")
	}
	ts.post(t, "/v1/embeddings", map[string]any{"model": qwen, "input": inputs[1], "dimensions": 4096}, &short)
	if !same(short.Data[0].Embedding, full) {
		t.Error("dimensions past the model's width changed the vector")
	}
}

// TestEmbeddingModel: EmbeddingGemma (as llama.cpp's converter writes it)
// is listed by /api/show as Ollama lists an embedding model, embeds
// through both APIs, and a chat or a completion with it is the client's
// error, naming the endpoints that take it.
func TestEmbeddingModel(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	var show struct {
		Capabilities []string `json:"capabilities"`
	}
	ts.post(t, "/api/show", map[string]any{"model": embedder}, &show)
	if len(show.Capabilities) != 1 || show.Capabilities[0] != "embedding" {
		t.Errorf("capabilities %v, want [embedding]", show.Capabilities)
	}
	var o struct {
		Embeddings [][]float32 `json:"embeddings"`
	}
	ts.post(t, "/api/embed", map[string]any{"model": embedder, "input": []string{"The fire.", "Why does bread rise?"}}, &o)
	if len(o.Embeddings) != 2 || len(o.Embeddings[0]) != 64 || math.Abs(norm(o.Embeddings[0])-1) > 1e-5 {
		t.Fatalf("/api/embed: %d vectors of %d", len(o.Embeddings), len(o.Embeddings[0]))
	}
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	for path, body := range map[string]map[string]any{
		"/v1/chat/completions": {"model": embedder, "messages": msgs},
		"/api/chat":            {"model": embedder, "messages": msgs, "stream": false},
		"/api/generate":        {"model": embedder, "prompt": "hi", "stream": false},
	} {
		resp, data := ts.do(t, "POST", path, body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "embedding model") || !strings.Contains(string(data), "/api/embed") {
			t.Errorf("%s: %d %s, want 400 naming an embedding model and the embeddings endpoints", path, resp.StatusCode, data)
		}
	}
}
