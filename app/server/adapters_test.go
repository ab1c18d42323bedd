package server

import (
	"context"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/model"
)

// TestAdaptersApplyToEveryRequest: a server given an adapter (hearth serve
// --lora) answers both APIs as the engine answers with that adapter, which
// is not what the base says.
func TestAdaptersApplyToEveryRequest(t *testing.T) {
	m, err := model.Load(filepath.Join(modelsDir, qwen+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	a := &adapter.Adapter{Arch: m.Config.Arch, Alpha: 4, Pairs: map[string]*adapter.Pair{}}
	targets := m.LoRATargets()
	for _, name := range slices.Sorted(maps.Keys(targets)) { // the seed's draws in a fixed order
		s := targets[name]
		p := &adapter.Pair{Rank: 2, Rows: s[0], Cols: s[1], A: make([]float32, 2*s[1]), B: make([]float32, 2*s[0])}
		for i := range p.A {
			p.A[i] = float32(rng.NormFloat64() * 0.2)
		}
		for i := range p.B {
			p.B[i] = float32(rng.NormFloat64() * 0.2)
		}
		a.Pairs[name] = p
	}
	m.Close()
	path := filepath.Join(t.TempDir(), "lora.gguf")
	if err := adapter.WriteGGUF(path, a); err != nil {
		t.Fatal(err)
	}
	specs := []app.AdapterSpec{{Path: path, Scale: 1}}
	ts := newTestServer(t, app.EngineOptions{}, Options{Adapters: specs})
	const n = 8
	ask := func(adapters []app.AdapterSpec) string {
		r, err := ts.engine.Chat(context.Background(), app.ChatRequest{
			GenerateOptions: app.GenerateOptions{Model: qwen, MaxTokens: n, Adapters: adapters}, Messages: conversation}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Text
	}
	base, tuned := ask(nil), ask(specs)
	if base == tuned {
		t.Fatalf("the adapter changed nothing: %q", base)
	}
	var openai struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	ts.post(t, "/v1/chat/completions", chatBody(qwen, n, nil), &openai)
	if len(openai.Choices) != 1 || openai.Choices[0].Message.Content != tuned {
		t.Errorf("OpenAI API: %+v, want %q", openai, tuned)
	}
	var ollama struct {
		Message struct{ Content string } `json:"message"`
	}
	ts.post(t, "/api/chat", map[string]any{"model": qwen, "messages": conversation, "stream": false,
		"options": map[string]any{"num_predict": n, "temperature": 0}}, &ollama)
	if ollama.Message.Content != tuned {
		t.Errorf("Ollama API: %q, want %q", ollama.Message.Content, tuned)
	}
}
