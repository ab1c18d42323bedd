package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/app"
)

// ollamaDocsRequests are the request bodies of the examples in Ollama's API
// documentation (docs/api.md: "Generate a completion", "Generate a chat
// completion", with their streaming, no-streaming, options, reproducible,
// load, unload and tools variants), "llama3.2" standing for the model. The
// examples that set no num_predict get a small one, except the first,
// which runs as written, until an end-of-turn token or the context's end.
var ollamaDocsRequests = []struct {
	name, path, body string
	stream           bool   // a stream of objects comes back
	reason           string // the final done_reason; "" is stop or length
}{
	{"generate streaming", "/api/generate", `{"model": "llama3.2", "prompt": "Why is the sky blue?"}`, true, ""},
	{"generate no streaming", "/api/generate", `{"model": "llama3.2", "prompt": "Why is the sky blue?", "stream": false, "options": {"num_predict": 6}}`, false, ""},
	{"generate reproducible", "/api/generate", `{"model": "mistral", "prompt": "Why is the sky blue?", "options": {"seed": 123, "num_predict": 6}}`, true, "length"},
	{"generate raw", "/api/generate", `{"model": "mistral", "prompt": "[INST] why is the sky blue? [/INST]", "raw": true, "stream": false, "options": {"num_predict": 6}}`, false, ""},
	{"generate with options", "/api/generate", `{
  "model": "llama3.2",
  "prompt": "Why is the sky blue?",
  "stream": false,
  "options": {
    "num_keep": 5,
    "seed": 42,
    "num_predict": 100,
    "top_k": 20,
    "top_p": 0.9,
    "min_p": 0.0,
    "typical_p": 0.7,
    "repeat_last_n": 33,
    "temperature": 0.8,
    "repeat_penalty": 1.2,
    "presence_penalty": 1.5,
    "frequency_penalty": 1.0,
    "mirostat": 1,
    "mirostat_tau": 0.8,
    "mirostat_eta": 0.6,
    "penalize_newline": true,
    "stop": ["\n", "user:"],
    "numa": false,
    "num_ctx": 1024,
    "num_batch": 2,
    "num_gpu": 1,
    "main_gpu": 0,
    "low_vram": false,
    "vocab_only": false,
    "use_mmap": true,
    "use_mlock": false,
    "num_thread": 8
  }
}`, false, ""},
	{"generate load", "/api/generate", `{"model": "llama3.2"}`, false, "load"},
	{"generate unload", "/api/generate", `{"model": "llama3.2", "keep_alive": 0}`, false, "unload"},
	{"chat streaming", "/api/chat", `{"model": "llama3.2", "messages": [{"role": "user", "content": "why is the sky blue?"}], "options": {"num_predict": 6}}`, true, ""},
	{"chat no streaming", "/api/chat", `{"model": "llama3.2", "messages": [{"role": "user", "content": "why is the sky blue?"}], "stream": false, "options": {"num_predict": 6}}`, false, ""},
	{"chat with history", "/api/chat", `{"model": "llama3.2", "messages": [
    {"role": "user", "content": "why is the sky blue?"},
    {"role": "assistant", "content": "due to rayleigh scattering."},
    {"role": "user", "content": "how is that different than mie scattering?"}
  ], "options": {"num_predict": 6}}`, true, ""},
	{"chat reproducible", "/api/chat", `{"model": "llama3.2", "messages": [{"role": "user", "content": "Hello!"}], "options": {"seed": 101, "temperature": 0, "num_predict": 6}}`, true, "length"},
	{"chat with tools", "/api/chat", `{
  "model": "llama3.2",
  "messages": [{"role": "user", "content": "What is the weather today in Paris?"}],
  "stream": false,
  "tools": [{
    "type": "function",
    "function": {
      "name": "get_current_weather",
      "description": "Get the current weather for a location",
      "parameters": {
        "type": "object",
        "properties": {
          "location": {"type": "string", "description": "The location to get the weather for, e.g. San Francisco, CA"},
          "format": {"type": "string", "description": "The format to return the weather in, e.g. 'celsius' or 'fahrenheit'", "enum": ["celsius", "fahrenheit"]}
        },
        "required": ["location", "format"]
      }
    }
  }],
  "options": {"num_predict": 6}
}`, false, ""},
	{"chat load", "/api/chat", `{"model": "llama3.2", "messages": []}`, false, "load"},
	{"chat unload", "/api/chat", `{"model": "llama3.2", "messages": [], "keep_alive": 0}`, false, "unload"},
}

// checkOllamaFinal checks the statistics of a final object.
func checkOllamaFinal(t testing.TB, what string, m map[string]any) {
	t.Helper()
	hasKeys(t, what, m, "model", "created_at", "done", "done_reason", "total_duration", "load_duration",
		"prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration")
	for _, k := range []string{"total_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count"} {
		if v, _ := m[k].(float64); v <= 0 || v != float64(int64(v)) {
			t.Errorf("%s: %s = %v, want a positive integer", what, k, m[k])
		}
	}
	if m["total_duration"].(float64) < m["load_duration"].(float64)+m["prompt_eval_duration"].(float64) {
		t.Errorf("%s: total_duration shorter than its parts: %v", what, m)
	}
	if ts, _ := m["created_at"].(string); !validTime(ts) {
		t.Errorf("%s: created_at %v", what, m["created_at"])
	}
}

func validTime(s string) bool {
	tm, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && time.Since(tm) < time.Minute
}

func TestOllamaDocsExamples(t *testing.T) {
	// The context bounds the example that sets no num_predict; 512 holds
	// the tools example's prompt.
	ts := newTestServer(t, app.EngineOptions{Context: 512}, Options{})
	for _, tt := range ollamaDocsRequests {
		t.Run(tt.name, func(t *testing.T) {
			body := strings.NewReplacer(`"llama3.2"`, `"`+qwen+`"`, `"mistral"`, `"`+qwen+`:latest"`).Replace(tt.body)
			resp, data := ts.do(t, "POST", tt.path, body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %s", resp.Status, data)
			}
			objs := ndjson(t, data)
			if !tt.stream && len(objs) != 1 {
				t.Fatalf("%d objects for stream false:\n%s", len(objs), data)
			}
			wantType := map[bool]string{true: "application/x-ndjson", false: "application/json"}[tt.stream]
			if ct := resp.Header.Get("Content-Type"); ct != wantType {
				t.Errorf("Content-Type %q, want %q", ct, wantType)
			}
			final := objs[len(objs)-1]
			if final["done"] != true || final["model"] != qwen {
				t.Fatalf("final object %v", final)
			}
			if r := final["done_reason"]; tt.reason != "" && r != tt.reason || tt.reason == "" && r != "stop" && r != "length" {
				// Without a seed a request samples with a random one, and
				// may end on an end-of-turn token.
				t.Errorf("done_reason %v, want %s", r, tt.reason)
			}
			chatPath := tt.path == "/api/chat"
			var text string
			for i, o := range objs {
				if chatPath {
					msg, ok := o["message"].(map[string]any)
					if !ok || msg["role"] != "assistant" {
						t.Fatalf("object %d: message %v", i, o["message"])
					}
					text += msg["content"].(string)
				} else {
					r, ok := o["response"].(string)
					if !ok {
						t.Fatalf("object %d: response %v", i, o["response"])
					}
					text += r
				}
				if i < len(objs)-1 {
					if o["done"] != false || !validTime(o["created_at"].(string)) {
						t.Errorf("object %d: %v", i, o)
					}
					if _, ok := o["total_duration"]; ok {
						t.Errorf("object %d carries statistics: %v", i, o)
					}
				}
			}
			if final["done_reason"] == "load" || final["done_reason"] == "unload" {
				if text != "" {
					t.Errorf("%s answered %q", final["done_reason"], text)
				}
				st := ts.engine.Status()
				if loaded := st.Model != nil && st.Model.Name == qwen; loaded != (final["done_reason"] == "load") {
					t.Errorf("after %s the engine holds %+v", final["done_reason"], st.Model)
				}
				return
			}
			checkOllamaFinal(t, tt.name, final)
			if final["eval_count"].(float64) < 1 || text == "" && final["done_reason"] != "stop" {
				t.Errorf("eval_count %v, text %q", final["eval_count"], text)
			}
			if tt.stream && final["done_reason"] == "length" && len(objs) < 2 {
				t.Errorf("streamed %d objects", len(objs))
			}
		})
	}

}

func TestOllamaListings(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{IdleUnload: time.Hour}, Options{IdleUnload: time.Hour})
	resp, data := ts.do(t, "GET", "/api/version", nil)
	var v map[string]string
	if json.Unmarshal(data, &v); resp.StatusCode != 200 || v["version"] == "" {
		t.Errorf("version: %s %s", resp.Status, data)
	}

	for _, method := range []string{"GET", "HEAD"} {
		resp, data := ts.do(t, method, "/", nil)
		if want := map[string]string{"GET": "Ollama is running", "HEAD": ""}[method]; resp.StatusCode != 200 || string(data) != want {
			t.Errorf("%s /: %s %q", method, resp.Status, data)
		}
	}

	var tags struct{ Models []map[string]any }
	resp, data = ts.do(t, "GET", "/api/tags", nil)
	if err := json.Unmarshal(data, &tags); err != nil || len(tags.Models) != 4 { // embeddinggemma, llama, qwen, toolCaller
		t.Fatalf("tags: %v %s", err, data)
	}
	for _, m := range tags.Models {
		hasKeys(t, "tag", m, "name", "model", "modified_at", "size", "digest", "details")
		d := m["details"].(map[string]any)
		hasKeys(t, "details", d, "format", "family", "families", "parameter_size", "quantization_level")
		quant := map[string]string{toolCaller: "F32", embedder: "F32"}[m["name"].(string)]
		if quant == "" {
			quant = "Q8_0"
		}
		if d["format"] != "gguf" || d["quantization_level"] != quant || d["parameter_size"] == "" || m["size"].(float64) <= 0 {
			t.Errorf("tag %v", m)
		}
	}
	if tags.Models[1]["name"] != llama || tags.Models[1]["details"].(map[string]any)["family"] != "llama" {
		t.Errorf("second tag %v", tags.Models[1])
	}

	// Nothing runs yet.
	var ps struct{ Models []map[string]any }
	_, data = ts.do(t, "GET", "/api/ps", nil)
	if json.Unmarshal(data, &ps); len(ps.Models) != 0 {
		t.Errorf("ps before any request: %s", data)
	}
	ts.post(t, "/api/generate", map[string]any{"model": llama, "prompt": "Hi", "stream": false, "options": map[string]any{"num_predict": 2}}, nil)
	_, data = ts.do(t, "GET", "/api/ps", nil)
	if err := json.Unmarshal(data, &ps); err != nil || len(ps.Models) != 1 {
		t.Fatalf("ps: %v %s", err, data)
	}
	p := ps.Models[0]
	hasKeys(t, "ps", p, "name", "model", "size", "digest", "details", "expires_at", "size_vram")
	if exp, err := time.Parse(time.RFC3339Nano, p["expires_at"].(string)); err != nil || time.Until(exp) < 59*time.Minute {
		t.Errorf("expires_at %v", p["expires_at"])
	}
	if p["name"] != llama || p["size_vram"] != 0.0 {
		t.Errorf("ps on the CPU: %v", p)
	}

	// show, by the name as listed and with Ollama's :latest.
	for _, name := range []string{llama, llama + ":latest"} {
		var show map[string]any
		ts.post(t, "/api/show", map[string]any{"model": name}, &show)
		hasKeys(t, "show", show, "template", "parameters", "details", "model_info", "capabilities", "modified_at")
		info := show["model_info"].(map[string]any)
		if info["general.architecture"] != "llama" || info["llama.context_length"] != 2048.0 || info["general.parameter_count"].(float64) <= 0 {
			t.Errorf("model_info %v", info)
		}
		if toks, ok := info["tokenizer.ggml.tokens"].([]any); !ok || len(toks) != 0 {
			t.Errorf("tokens without verbose: %v", info["tokenizer.ggml.tokens"])
		}
		if !strings.Contains(show["template"].(string), "start_header_id") || !strings.Contains(show["parameters"].(string), "stop") {
			t.Errorf("template %q, parameters %q", show["template"], show["parameters"])
		}
	}
	var verbose map[string]any
	ts.post(t, "/api/show", map[string]any{"name": llama, "verbose": true}, &verbose)
	if toks, _ := verbose["model_info"].(map[string]any)["tokenizer.ggml.tokens"].([]any); len(toks) != 512 {
		t.Errorf("verbose: %d tokens", len(toks))
	}
}

func TestOllamaErrors(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	tests := []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"unknown model", "POST", "/api/chat", `{"model": "llama9:70b", "messages": [{"role": "user", "content": "hi"}]}`, 404, "model 'llama9:70b' not found"},
		{"unknown model generate", "POST", "/api/generate", `{"model": "nope", "prompt": "hi"}`, 404, "model 'nope' not found"},
		{"unknown model show", "POST", "/api/show", `{"model": "nope"}`, 404, "model 'nope' not found"},
		{"path as model", "POST", "/api/generate", `{"model": "../../etc/passwd", "prompt": "hi"}`, 404, "not found"},
		{"malformed", "POST", "/api/chat", `{"model": `, 400, "not valid JSON"},
		{"no model", "POST", "/api/chat", `{"messages": []}`, 400, "model is required"},
		{"format yaml", "POST", "/api/generate", `{"model": "tiny-llama", "prompt": "hi", "format": "yaml"}`, 400, `format must be "json" or a JSON schema`},
		{"format schema with a pattern", "POST", "/api/chat", `{"model": "tiny-llama", "messages": [], "format": {"type": "string", "pattern": "a+"}}`, 400, `keyword "pattern" is not supported`},
		{"think", "POST", "/api/chat", `{"model": "tiny-llama", "messages": [], "think": true}`, 400, "think is not supported yet"},
		{"images not images", "POST", "/api/chat", `{"model": "tiny-llama", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}`, 400, "messages[0].images[0]: not a PNG, JPEG, GIF or WebP image"},
		{"suffix", "POST", "/api/generate", `{"model": "tiny-llama", "prompt": "def f(", "suffix": "return 1"}`, 400, "suffix"},
		{"context", "POST", "/api/generate", `{"model": "tiny-llama", "prompt": "hi", "context": [1, 2, 3]}`, 400, "/api/chat"},
		{"bad keep_alive", "POST", "/api/generate", `{"model": "tiny-llama", "keep_alive": "forever"}`, 400, "keep_alive"},
		{"bad temperature", "POST", "/api/chat", `{"model": "tiny-llama", "messages": [], "options": {"temperature": -1}}`, 400, "temperature"},
		{"bad top_p", "POST", "/api/chat", `{"model": "tiny-llama", "messages": [], "options": {"top_p": 2}}`, 400, "top_p"},
		{"bad option type", "POST", "/api/chat", `{"model": "tiny-llama", "messages": [], "options": {"top_k": "forty"}}`, 400, "options.top_k must be an integer"},
		{"bad role", "POST", "/api/chat", `{"model": "tiny-llama", "messages": [{"role": "narrator", "content": "x"}]}`, 400, "narrator"},
		{"wrong method", "GET", "/api/chat", ``, 405, "use POST"},
		{"wrong method tags", "POST", "/api/tags", `{}`, 405, "use GET"},
		{"unknown endpoint", "POST", "/api/pull", `{"model": "x"}`, 404, "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			resp, data := ts.do(t, tt.method, tt.path, body)
			var e map[string]any
			if err := json.Unmarshal(data, &e); err != nil || len(e) != 1 {
				t.Fatalf("not Ollama's error format: %v %s", err, data)
			}
			msg, _ := e["error"].(string)
			if resp.StatusCode != tt.status || !strings.Contains(msg, tt.msg) {
				t.Errorf("%s %q, want %d and %q", resp.Status, msg, tt.status, tt.msg)
			}
		})
	}
}

// TestOllamaChatMatchesOpenAI: the two APIs give one greedy reply, and
// Ollama's stop option ends it as OpenAI's stop does.
func TestOllamaChatMatchesOpenAI(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	var oa chatCompletion
	ts.post(t, "/v1/chat/completions", chatBody(llama, 10, nil), &oa)
	want := *oa.Choices[0].Message.Content

	body := map[string]any{"model": llama, "messages": conversation, "options": map[string]any{"temperature": 0, "num_predict": 10}}
	for _, stream := range []bool{false, true} {
		body["stream"] = stream
		_, data := ts.do(t, "POST", "/api/chat", body)
		objs := ndjson(t, data)
		var text string
		for _, o := range objs {
			text += o["message"].(map[string]any)["content"].(string)
		}
		final := objs[len(objs)-1]
		checkOllamaFinal(t, "chat", final)
		if text != want || final["eval_count"] != 10.0 || final["done_reason"] != "length" ||
			final["prompt_eval_count"] != float64(oa.Usage.PromptTokens) {
			t.Errorf("stream %v: %q %v; OpenAI's: %q %+v", stream, text, final, want, oa.Usage)
		}
	}

	stop, before := pickStop(t, want)
	body["options"] = map[string]any{"temperature": 0, "num_predict": 10, "stop": []string{stop}}
	body["stream"] = false
	var stopped map[string]any
	ts.post(t, "/api/chat", body, &stopped)
	if got := stopped["message"].(map[string]any)["content"]; got != before || stopped["done_reason"] != "stop" {
		t.Errorf("stop %q: %q (%v), want %q", stop, got, stopped["done_reason"], before)
	}
}
