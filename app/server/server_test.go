package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/engine/synth"
)

// modelsDir holds the tiny synthetic models every test serves, written once
// by TestMain: tiny-llama (the Llama 3 template, the most common),
// tiny-qwen3 (ChatML, and the faster of the two on lavapipe), and
// tool-caller, built to answer with a tool call (toolcaller_test.go).
// visionDir holds tiny-gemma3 and its vision projector (vision_test.go).
var modelsDir, visionDir string

const (
	llama    = "tiny-llama"
	qwen     = "tiny-qwen3"
	embedder = "embeddinggemma"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hearth-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range []string{llama, qwen} {
		p, ok := synth.PresetByName(name)
		if !ok {
			fmt.Fprintln(os.Stderr, "no preset", name)
			os.Exit(1)
		}
		if err := synth.WriteFile(filepath.Join(dir, name+".gguf"), p, synth.Options{Quant: "Q8_0", Seed: 7}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := writeToolCaller(dir); err != nil {
		fmt.Fprintln(os.Stderr, "tool-calling model:", err)
		os.Exit(1)
	}
	// EmbeddingGemma as llama.cpp's converter writes it (engine/model's
	// fixture).
	if data, err := os.ReadFile(filepath.Join("..", "..", "engine", "model", "testdata", "embeddinggemma", "embeddinggemma.gguf")); err != nil {
		fmt.Fprintln(os.Stderr, "embedding model:", err)
		os.Exit(1)
	} else if err := os.WriteFile(filepath.Join(dir, embedder+".gguf"), data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "embedding model:", err)
		os.Exit(1)
	}
	modelsDir = dir
	if visionDir, err = writeVisionModel(); err != nil {
		fmt.Fprintln(os.Stderr, "vision model:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.RemoveAll(visionDir)
	os.Exit(code)
}

// testServer is the API on a loopback port, over an engine of its own.
type testServer struct {
	*httptest.Server
	engine *app.Engine
}

// newTestServer serves modelsDir's models through the library, as hearth
// serve does. The engine runs on the CPU unless eo names a backend.
func newTestServer(t testing.TB, eo app.EngineOptions, so Options) *testServer {
	t.Helper()
	return newServerOf(t, []string{modelsDir}, eo, so)
}

// newServerOf is newTestServer for the models of folders.
func newServerOf(t testing.TB, folders []string, eo app.EngineOptions, so Options) *testServer {
	t.Helper()
	models := Library(library.New(library.Roots{Folders: folders}))
	if eo.Backend == "" {
		eo.Backend = "cpu"
	}
	eo.Resolve = models.Resolve
	eo.Projector = func(name, _ string) (string, error) { return models.Projector(name) }
	e := app.NewEngine(eo)
	so.Models = models
	ts := httptest.NewServer(New(e, so))
	t.Cleanup(func() {
		ts.Close()
		e.Close()
	})
	return &testServer{ts, e}
}

// do sends a request: body is sent as is when a string, as JSON otherwise;
// header holds name, value pairs.
func (ts *testServer) do(t testing.TB, method, path string, body any, header ...string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp, data
}

// post is do for a POST that must answer 200; it decodes the reply into out
// unless out is nil.
func (ts *testServer) post(t testing.TB, path string, body, out any) []byte {
	t.Helper()
	resp, data := ts.do(t, http.MethodPost, path, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("POST %s: %v\n%s", path, err, data)
		}
	}
	return data
}

// sseData splits a server-sent event stream into the data of its events,
// failing on anything that is not "data: …" followed by a blank line.
func sseData(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.SplitAfter(string(body), "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || !strings.HasSuffix(data, "\n\n") || strings.Count(data, "\n") != 2 {
			t.Fatalf("malformed event %q in\n%s", ev, body)
		}
		out = append(out, strings.TrimSuffix(data, "\n\n"))
	}
	return out
}

// ndjson splits a newline-delimited JSON stream into its objects.
func ndjson(t testing.TB, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// openAIErr decodes an OpenAI error body, failing unless it has that shape.
func openAIErr(t testing.TB, data []byte) openAIErrorBody {
	t.Helper()
	var raw map[string]map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("not an OpenAI error: %v\n%s", err, data)
	}
	e, ok := raw["error"]
	if !ok {
		t.Fatalf("no error object: %s", data)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error object without %q: %s", k, data)
		}
	}
	var body openAIError
	json.Unmarshal(data, &body)
	return body.Error
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestBadRequests(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{MaxBody: 64 << 10})
	user := []map[string]string{{"role": "user", "content": "Hi"}}
	chat := func(extra map[string]any) map[string]any {
		m := map[string]any{"model": llama, "messages": user, "max_tokens": 2}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	big := strings.Repeat("x", 65<<10)
	tests := []struct {
		name         string
		method, path string
		body         any
		status       int
		code, param  string // OpenAI's; "" is not checked
		msg          string // a part of the message
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model": "tiny-llama", "messages": [`, 400, "", "", "not valid JSON"},
		{"not an object", "POST", "/v1/chat/completions", `[1, 2]`, 400, "", "", "JSON object"},
		{"empty body", "POST", "/v1/chat/completions", ``, 400, "", "", "empty"},
		{"trailing data", "POST", "/v1/chat/completions", `{"model": "tiny-llama"} {}`, 400, "", "", "more after"},
		{"wrong type", "POST", "/v1/chat/completions", `{"model": "tiny-llama", "max_tokens": "many"}`, 400, "", "max_tokens", "max_tokens must be an integer"},
		{"unknown model", "POST", "/v1/chat/completions", chat(map[string]any{"model": "gpt-4o"}), 404, "model_not_found", "model", "gpt-4o"},
		{"path as model", "POST", "/v1/chat/completions", chat(map[string]any{"model": "../" + llama}), 404, "model_not_found", "model", ""},
		{"absolute path as model", "POST", "/v1/chat/completions", chat(map[string]any{"model": filepath.Join(modelsDir, llama+".gguf")}), 404, "model_not_found", "model", ""},
		{"no model", "POST", "/v1/chat/completions", chat(map[string]any{"model": ""}), 400, "", "model", "model is required"},
		{"no messages", "POST", "/v1/chat/completions", chat(map[string]any{"messages": []any{}}), 400, "", "messages", "at least one"},
		{"bad role", "POST", "/v1/chat/completions", chat(map[string]any{"messages": []map[string]string{{"role": "robot", "content": "x"}}}), 400, "", "messages[0].role", "robot"},
		{"image part not base64", "POST", "/v1/chat/completions", chat(map[string]any{"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image_url", "image_url": map[string]string{"url": "data:,"}}}}}}), 400, "invalid_image_url", "messages[0].content[0].image_url.url", "base64 data URL"},
		{"audio part", "POST", "/v1/chat/completions", chat(map[string]any{"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "input_audio", "input_audio": map[string]string{"data": "", "format": "wav"}}}}}}), 400, "unsupported_parameter", "messages[0].content[0]", "input_audio"},
		{"n 2", "POST", "/v1/chat/completions", chat(map[string]any{"n": 2}), 400, "", "n", "only one choice"},
		{"max_tokens -1", "POST", "/v1/chat/completions", chat(map[string]any{"max_tokens": -1}), 400, "", "max_tokens", "at least 1"},
		{"max_tokens 0", "POST", "/v1/chat/completions", chat(map[string]any{"max_tokens": 0}), 400, "", "max_tokens", "at least 1"},
		{"max_completion_tokens -5", "POST", "/v1/chat/completions", chat(map[string]any{"max_completion_tokens": -5}), 400, "", "max_completion_tokens", "at least 1"},
		{"temperature 3", "POST", "/v1/chat/completions", chat(map[string]any{"temperature": 3}), 400, "", "temperature", "[0, 2]"},
		{"top_p 1.5", "POST", "/v1/chat/completions", chat(map[string]any{"top_p": 1.5}), 400, "", "top_p", "[0, 1]"},
		{"top_k -1", "POST", "/v1/chat/completions", chat(map[string]any{"top_k": -1}), 400, "", "top_k", "at least 0"},
		{"presence_penalty -3", "POST", "/v1/chat/completions", chat(map[string]any{"presence_penalty": -3}), 400, "", "presence_penalty", "[-2, 2]"},
		{"stop as number", "POST", "/v1/chat/completions", chat(map[string]any{"stop": 7}), 400, "", "stop", "string or an array"},
		{"too many stops", "POST", "/v1/chat/completions", chat(map[string]any{"stop": make([]string, 17)}), 400, "", "stop", "at most 16"},
		{"json_schema without a schema", "POST", "/v1/chat/completions", chat(map[string]any{"response_format": map[string]string{"type": "json_schema"}}), 400, "", "response_format.json_schema.schema", "needs json_schema.schema"},
		{"json_schema with a pattern", "POST", "/v1/chat/completions", chat(map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"type": "string", "pattern": "^a"}}}}), 400, "", "response_format.json_schema.schema", `keyword "pattern" is not supported`},
		{"logprobs", "POST", "/v1/chat/completions", chat(map[string]any{"logprobs": true}), 400, "unsupported_parameter", "logprobs", ""},
		{"tool_choice required without tools", "POST", "/v1/chat/completions", chat(map[string]any{"tool_choice": "required"}), 400, "", "tool_choice", "no tools were given"},
		{"tool_choice of an unknown function", "POST", "/v1/chat/completions", chat(map[string]any{"tools": []any{weatherTool}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "fly"}}}), 400, "", "tool_choice", `no tool is named "fly"`},
		{"tool_choice any", "POST", "/v1/chat/completions", chat(map[string]any{"tools": []any{weatherTool}, "tool_choice": "any"}), 400, "", "tool_choice", "want auto, none, required"},
		{"stream_options without stream", "POST", "/v1/chat/completions", chat(map[string]any{"stream_options": map[string]bool{"include_usage": true}}), 400, "", "stream_options", "only allowed"},
		{"bad tool arguments", "POST", "/v1/chat/completions", chat(map[string]any{"messages": []map[string]any{{"role": "assistant", "content": nil,
			"tool_calls": []map[string]any{{"id": "1", "type": "function", "function": map[string]string{"name": "f", "arguments": "{not json"}}}}}}), 400, "", "messages[0].tool_calls[0].function.arguments", "not JSON"},
		{"oversized body", "POST", "/v1/chat/completions", `{"model": "tiny-llama", "messages": [{"role": "user", "content": "` + big + `"}]}`, 413, "request_too_large", "", "65536"},
		{"token prompt", "POST", "/v1/completions", map[string]any{"model": llama, "prompt": []int{1, 2}}, 400, "unsupported_parameter", "prompt", ""},
		{"echo", "POST", "/v1/completions", map[string]any{"model": llama, "prompt": "x", "echo": true}, 400, "unsupported_parameter", "echo", ""},
		{"completion n 3", "POST", "/v1/completions", map[string]any{"model": llama, "prompt": "x", "n": 3}, 400, "", "n", ""},
		{"wrong method", "GET", "/v1/chat/completions", nil, 405, "method_not_allowed", "", "use POST"},
		{"wrong method models", "POST", "/v1/models", map[string]any{}, 405, "method_not_allowed", "", ""},
		{"unknown endpoint", "GET", "/v1/moderations", nil, 404, "not_found", "", ""},
		{"unknown model by id", "GET", "/v1/models/nope:1b", nil, 404, "model_not_found", "model", ""},
		{"speech as mp3", "POST", "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "hi", "voice": "alloy", "response_format": "mp3"}, 400, "unsupported_parameter", "response_format", "ask for one of those"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := ts.do(t, tt.method, tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %s, want %d: %s", resp.Status, tt.status, data)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			e := openAIErr(t, data)
			if tt.code != "" && deref(e.Code) != tt.code {
				t.Errorf("code %q, want %q", deref(e.Code), tt.code)
			}
			if tt.param != "" && deref(e.Param) != tt.param {
				t.Errorf("param %q, want %q", deref(e.Param), tt.param)
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q lacks %q", e.Message, tt.msg)
			}
			wantType := map[bool]string{true: "server_error", false: "invalid_request_error"}[tt.status >= 500]
			if e.Type != wantType {
				t.Errorf("type %q, want %q", e.Type, wantType)
			}
			if tt.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
	// Nothing above loaded a model: every refusal came before the engine.
	if st := ts.engine.Status(); st.Model != nil {
		t.Errorf("a refused request loaded %s", st.Model.Name)
	}
}

func TestAPIKey(t *testing.T) {
	const key = "s3cret-key"
	ts := newTestServer(t, app.EngineOptions{}, Options{APIKey: key})
	tests := []struct {
		method, path string
		auth         string
		status       int
	}{
		{"HEAD", "/", "", 200}, // the probe needs no key
		{"GET", "/", "", 200},
		{"GET", "/v1/models", "", 401},
		{"GET", "/v1/models", "Bearer wrong", 401},
		{"GET", "/v1/models", "Bearer " + key + "x", 401},
		{"GET", "/v1/models", "Basic " + key, 401},
		{"GET", "/v1/models", key, 401},
		{"GET", "/v1/models", "Bearer " + key, 200},
		{"GET", "/v1/models", "bearer " + key, 200},
		{"GET", "/api/tags", "", 401},
		{"GET", "/api/tags", "Bearer " + key, 200},
		{"POST", "/api/chat", "", 401},
		{"GET", "/api/version", "", 401},
	}
	for _, tt := range tests {
		var header []string
		if tt.auth != "" {
			header = []string{"Authorization", tt.auth}
		}
		resp, data := ts.do(t, tt.method, tt.path, nil, header...)
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s %q: %s, want %d: %s", tt.method, tt.path, tt.auth, resp.Status, tt.status, data)
			continue
		}
		if tt.status != 401 {
			continue
		}
		if resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", tt.method, tt.path)
		}
		// Each API's own error format.
		if strings.HasPrefix(tt.path, "/v1/") {
			if e := openAIErr(t, data); deref(e.Code) != "invalid_api_key" {
				t.Errorf("%s: code %q", tt.path, deref(e.Code))
			}
		} else {
			var e ollamaError
			if err := json.Unmarshal(data, &e); err != nil || !strings.Contains(e.Error, "API key") {
				t.Errorf("%s: %s", tt.path, data)
			}
		}
	}
}

func TestHostAndOrigin(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	tests := []struct {
		name         string
		host, origin string
		method       string
		status       int
		cors         bool
	}{
		{"loopback ip", "", "", "GET", 200, false},
		{"localhost", "localhost:11435", "", "GET", 200, false},
		{"ipv6 loopback", "[::1]:11435", "", "GET", 200, false},
		{"rebound name", "evil.example:11435", "", "GET", 403, false},
		{"lan address", "192.168.1.20:11435", "", "GET", 403, false},
		{"local page", "", "http://localhost:3000", "GET", 200, true},
		{"foreign page", "", "https://evil.example", "GET", 403, false},
		{"sandboxed page", "", "null", "GET", 403, false},
		{"preflight from local page", "", "http://127.0.0.1:8080", "OPTIONS", 204, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+"/api/tags", nil)
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.method == "OPTIONS" {
				req.Header.Set("Access-Control-Request-Method", "POST")
				req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %s, want %d", resp.Status, tt.status)
			}
			if acao := resp.Header.Get("Access-Control-Allow-Origin"); (acao != "") != tt.cors || tt.cors && acao != tt.origin {
				t.Errorf("Access-Control-Allow-Origin %q", acao)
			}
			if tt.method == "OPTIONS" && !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "authorization") {
				t.Errorf("preflight allows headers %q", resp.Header.Get("Access-Control-Allow-Headers"))
			}
		})
	}

	// A non-loopback listener takes any Host; with a key, pages of any
	// origin may call it (they must hold the key).
	open := newTestServer(t, app.EngineOptions{}, Options{AnyHost: true, APIKey: "k"})
	req, _ := http.NewRequest("GET", open.URL+"/api/tags", nil)
	req.Host = "studio.lan:11435"
	req.Header.Set("Origin", "http://studio.lan:3000")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := open.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("any host with a key: %s", resp.Status)
	}
}
