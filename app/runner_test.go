package app

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/model"
)

// TestLoadModelRunsWhereTheEngineDoes: a model opened with LoadModel gets
// the engine's backend, context and runner for the same options, so the
// commands that drive a runner themselves answer as the engine does.
func TestLoadModelRunsWhereTheEngineDoes(t *testing.T) {
	path := tinyModel(t)
	for _, ctxLen := range []int{0, 100} {
		var heard []Backend
		l, err := LoadModel(path, RunnerOptions{Backend: "cpu", Context: ctxLen, OnBackend: func(b Backend) { heard = append(heard, b) }})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if len(heard) != 1 || heard[0].String() != l.Backend.String() || l.Backend.GPU || l.Backend.Reason != "the backend is set to cpu" {
			t.Errorf("context %d: OnBackend heard %+v, the model runs on %+v", ctxLen, heard, l.Backend)
		}
		e := cpuEngine(t, EngineOptions{Context: ctxLen})
		info, err := e.Load(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := ctxLen
		if want == 0 {
			want = min(l.Model.Config.Context, model.DefaultContext)
		}
		if got := l.Runner.Context(); got != want || info.Context != want {
			t.Errorf("context %d: LoadModel's runner has %d positions, the engine's %d, want %d", ctxLen, got, info.Context, want)
		}
		r, err := e.Complete(context.Background(), CompleteRequest{GenerateOptions: GenerateOptions{Sampling: greedy(), MaxTokens: 8}, Prompt: "Once upon"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		req := model.Request{Prompt: l.Model.Tokenizer.Encode("Once upon", tokenizerOpts()), MaxTokens: 8, Sampling: greedy(),
			Decoder: l.Model.Tokenizer.NewDecoder(decodeOpts())}
		if _, err := model.NewSession(l.Runner).Generate(context.Background(), req, func(tok model.Token) error {
			got.WriteString(tok.Text)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got.String() != r.Text {
			t.Errorf("context %d: LoadModel's runner wrote %q, the engine %q", ctxLen, got.String(), r.Text)
		}
	}
}

// TestLoadModelMissingFile: a file that is not there is an error naming
// it, before any backend is chosen.
func TestLoadModelMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing.gguf")
	chose := false
	_, err := LoadModel(missing, RunnerOptions{Backend: "cpu", OnBackend: func(Backend) { chose = true }})
	if err == nil || !strings.Contains(err.Error(), "nothing.gguf") {
		t.Errorf("LoadModel(%s): %v, want an error naming the file", missing, err)
	}
	if chose {
		t.Error("a backend was chosen for a model that could not be read")
	}
}
