package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/internal/visiontest"
)

// startServe runs hearth serve with args until the test ends, and returns
// the URL it printed and what it logged so far (call it after the requests).
func startServe(t *testing.T, args ...string) (url string, logged func() string) {
	t.Helper()
	// No model stores of this machine: only the test's folders.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("OLLAMA_MODELS", home)
	t.Setenv("HF_HUB_CACHE", home)
	t.Setenv("HEARTH_API_KEY", "")

	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	var mu sync.Mutex
	var log strings.Builder
	root := NewRoot(func() error { return nil })
	root.SetOut(outW)
	root.SetErr(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(p)
	}))
	root.SetArgs(append([]string{"serve"}, args...))
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		outW.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		// shutdownGrace (5 s) plus freeing the engine fits in 10 s on an
		// idle machine but not always under load; 30 s still catches a
		// serve that never returns.
		case <-time.After(30 * time.Second):
			t.Error("serve did not shut down within 30 s")
		}
	})
	line, err := bufio.NewReader(outR).ReadString('\n')
	go io.Copy(io.Discard, outR)
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("serve printed no address: %v\n%s", err, log.String())
	}
	_, rest, ok := strings.Cut(line, "http://")
	if !ok {
		t.Fatalf("no URL in %q", line)
	}
	return "http://" + strings.Fields(rest)[0], func() string {
		mu.Lock()
		defer mu.Unlock()
		return log.String()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestServeCommand(t *testing.T) {
	m := tinyModel(t, "tiny-llama")
	url, logged := startServe(t, "--addr", "127.0.0.1:0", "--backend", "cpu", "--api-key", "k", "-m", m, "--idle", "1m")

	get := func(path, key string) (int, string) {
		req, _ := http.NewRequest("GET", url+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/api/tags", ""); code != 401 {
		t.Errorf("without the key: %d %s", code, body)
	}
	// -m loaded the file, served under its name.
	code, body := get("/api/ps", "k")
	var ps struct{ Models []struct{ Name string } }
	if json.Unmarshal([]byte(body), &ps); code != 200 || len(ps.Models) != 1 || ps.Models[0].Name != "tiny-llama" {
		t.Errorf("ps: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(
		`{"model": "tiny-llama", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	json.NewDecoder(resp.Body).Decode(&reply)
	resp.Body.Close()
	if resp.StatusCode != 200 || reply.Usage.CompletionTokens != 3 {
		t.Errorf("chat: %s %+v", resp.Status, reply)
	}
	if log := logged(); !strings.Contains(log, "loaded tiny-llama") || !strings.Contains(log, "path=/v1/chat/completions status=200") || strings.Contains(log, "warning") {
		t.Errorf("log:\n%s", log)
	}
}

func TestServeWarnsOffLoopback(t *testing.T) {
	dir := t.TempDir()
	_, logged := startServe(t, "--addr", "0.0.0.0:0", "--backend", "cpu", "--folder", dir)
	if log := logged(); !strings.Contains(log, "reachable from other machines") || !strings.Contains(log, "no API key") {
		t.Errorf("log:\n%s", log)
	}
}

func TestServeFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--queue", "0"},
		{"--idle", "-1s"},
		{"--max-body", "lots"},
		{"--addr", "127.0.0.1:0", "-m", "no-such-model:1b", "--backend", "cpu"},
	} {
		t.Setenv("HOME", t.TempDir())
		t.Setenv("OLLAMA_MODELS", t.TempDir())
		t.Setenv("HF_HUB_CACHE", t.TempDir())
		if _, log, err := runModelCmd(t, "", append([]string{"serve"}, args...)...); err == nil {
			t.Errorf("%v: no error\n%s", args, log)
		}
	}
}

// TestServeReadsImages: hearth serve gives the engine the projector the
// library pairs with a model, so a chat with an image is answered, and
// /api/show says the model sees images; a model without a projector is
// refused by name.
func TestServeReadsImages(t *testing.T) {
	dir := t.TempDir()
	if err := os.Link(tinyModel(t, "tiny-gemma3"), filepath.Join(dir, "tiny-gemma3.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tinyModel(t, "tiny-llama"), filepath.Join(dir, "tiny-llama.gguf")); err != nil {
		t.Fatal(err)
	}
	pp, _ := synth.ProjectorPresetByName("tiny-gemma3-vision")
	if err := synth.WriteProjector(filepath.Join(dir, "mmproj-tiny-gemma3-f16.gguf"), pp, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cat.png"), visiontest.PNG(20, 12, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(dir, "cat.png"))
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startServe(t, "--addr", "127.0.0.1:0", "--backend", "cpu", "--folder", dir)

	post := func(path string, body any) (int, map[string]any) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(url+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	chat := func(name string, images []string) (int, map[string]any) {
		return post("/api/chat", map[string]any{"model": name, "stream": false, "options": map[string]any{"temperature": 0, "num_predict": 2},
			"messages": []map[string]any{{"role": "user", "content": "What is it?", "images": images}}})
	}
	code, text := chat("tiny-gemma3", nil)
	if code != 200 {
		t.Fatalf("a chat without an image: %d %v", code, text)
	}
	code, withImage := chat("tiny-gemma3", []string{base64.StdEncoding.EncodeToString(img)})
	if code != 200 {
		t.Fatalf("a chat with an image: %d %v", code, withImage)
	}
	if d := withImage["prompt_eval_count"].(float64) - text["prompt_eval_count"].(float64); d < 18 {
		t.Errorf("the image added %v prompt tokens, want its 16 and the framing", d)
	}
	if _, show := post("/api/show", map[string]any{"model": "tiny-gemma3"}); !slices.Contains(show["capabilities"].([]any), any("vision")) {
		t.Errorf("/api/show: capabilities %v", show["capabilities"])
	}
	if code, e := chat("tiny-llama", []string{base64.StdEncoding.EncodeToString(img)}); code != 400 || !strings.Contains(e["error"].(string), "tiny-llama reads no images") {
		t.Errorf("an image for tiny-llama: %d %v", code, e)
	}
}
