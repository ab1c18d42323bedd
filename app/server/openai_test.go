package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/chat"
)

var conversation = []chat.Message{
	{Role: "system", Content: "You are terse."},
	{Role: "user", Content: "Why is the sky blue?"},
}

// chatBody is a greedy chat completion request of at most n tokens.
func chatBody(name string, n int, extra map[string]any) map[string]any {
	b := map[string]any{"model": name, "messages": conversation, "temperature": 0, "max_tokens": n}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// hasKeys fails unless m has every key.
func hasKeys(t testing.TB, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s has no %q: %v", what, k, m)
		}
	}
}

// streamedChat checks a streamed chat completion's chunks against OpenAI's
// format and returns the text, the finish reason and the usage chunk's
// counts (nil without one).
func streamedChat(t testing.TB, body []byte) (text, finish string, u *usage) {
	t.Helper()
	events := sseData(t, body)
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]:\n%s", body)
	}
	var id string
	for i, ev := range events[:len(events)-1] {
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			Model   string `json:"model"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Role    *string `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("chunk %d: %v: %s", i, err, ev)
		}
		if i == 0 {
			id = c.ID
		}
		if c.ID != id || !strings.HasPrefix(id, "chatcmpl-") || c.Object != "chat.completion.chunk" || c.Created == 0 || c.Model == "" {
			t.Errorf("chunk %d: %s", i, ev)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 || u != nil {
				t.Errorf("usage chunk %d: %s", i, ev)
			}
			u = c.Usage
			continue
		}
		if len(c.Choices) != 1 || c.Choices[0].Index != 0 {
			t.Fatalf("chunk %d: %s", i, ev)
		}
		ch := c.Choices[0]
		switch {
		case i == 0:
			// The role comes first, alone.
			if ch.Delta.Role == nil || *ch.Delta.Role != "assistant" || ch.Delta.Content == nil || *ch.Delta.Content != "" {
				t.Errorf("first chunk: %s", ev)
			}
		case ch.FinishReason != nil:
			if finish != "" || ch.Delta.Content != nil || ch.Delta.Role != nil {
				t.Errorf("finish chunk %d: %s", i, ev)
			}
			finish = *ch.FinishReason
		default:
			if finish != "" || ch.Delta.Content == nil || *ch.Delta.Content == "" || ch.Delta.Role != nil {
				t.Errorf("content chunk %d: %s", i, ev)
			} else {
				text += *ch.Delta.Content
			}
		}
	}
	if finish == "" {
		t.Errorf("no finish chunk:\n%s", body)
	}
	return text, finish, u
}

func TestChatCompletionsMatchEngine(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	const n = 12
	direct, err := ts.engine.Chat(context.Background(), app.ChatRequest{
		GenerateOptions: app.GenerateOptions{Model: llama, MaxTokens: n}, Messages: conversation}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if direct.Stats.Generated != n || direct.Stats.Stop != "length" || direct.Text == "" {
		t.Fatalf("the engine: %+v %q", direct.Stats, direct.Text)
	}

	// In one piece.
	var whole map[string]any
	ts.post(t, "/v1/chat/completions", chatBody(llama, n, nil), &whole)
	hasKeys(t, "completion", whole, "id", "object", "created", "model", "choices", "usage")
	if id, _ := whole["id"].(string); !strings.HasPrefix(id, "chatcmpl-") || whole["object"] != "chat.completion" || whole["model"] != llama {
		t.Errorf("completion: %v", whole)
	}
	if c, _ := whole["created"].(float64); time.Since(time.Unix(int64(c), 0)) > time.Minute {
		t.Errorf("created %v", whole["created"])
	}
	choices, _ := whole["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("choices: %v", whole["choices"])
	}
	choice := choices[0].(map[string]any)
	hasKeys(t, "choice", choice, "index", "message", "finish_reason", "logprobs")
	msg := choice["message"].(map[string]any)
	if msg["role"] != "assistant" || msg["content"] != direct.Text || choice["finish_reason"] != "length" {
		t.Errorf("choice %v, the engine said %q", choice, direct.Text)
	}
	u := whole["usage"].(map[string]any)
	want := map[string]float64{"prompt_tokens": float64(direct.Stats.PromptTokens), "completion_tokens": n,
		"total_tokens": float64(direct.Stats.PromptTokens + n)}
	for k, v := range want {
		if u[k] != v {
			t.Errorf("usage.%s = %v, want %v", k, u[k], v)
		}
	}

	// Streamed, with usage.
	resp, body := ts.do(t, "POST", "/v1/chat/completions", chatBody(llama, n, map[string]any{
		"stream": true, "stream_options": map[string]bool{"include_usage": true}}))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s %s\n%s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	text, finish, su := streamedChat(t, body)
	if text != direct.Text || finish != "length" {
		t.Errorf("streamed %q (%s), the engine said %q", text, finish, direct.Text)
	}
	if su == nil || su.PromptTokens != direct.Stats.PromptTokens || su.CompletionTokens != n || su.TotalTokens != su.PromptTokens+n {
		t.Errorf("usage chunk %+v", su)
	}
	// Without include_usage there is no usage chunk.
	_, body = ts.do(t, "POST", "/v1/chat/completions", chatBody(llama, 3, map[string]any{"stream": true}))
	if _, _, su := streamedChat(t, body); su != nil {
		t.Errorf("usage chunk without include_usage: %+v", su)
	}
}

// pickStop picks a stop string from the middle of a greedy reply, and the
// reply it leaves: the text before the stop string's first occurrence.
func pickStop(t testing.TB, text string) (stop, before string) {
	t.Helper()
	runes := []rune(text)
	for i := 2; i+2 <= len(runes); i++ {
		if s := string(runes[i : i+2]); !strings.ContainsRune(s, utf8.RuneError) && strings.Index(text, s) > 0 {
			return s, text[:strings.Index(text, s)]
		}
	}
	t.Fatalf("no stop string to pick in %q", text)
	return "", ""
}

func TestChatCompletionsStopAndLength(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	var full chatCompletion
	ts.post(t, "/v1/chat/completions", chatBody(llama, 24, nil), &full)
	text := *full.Choices[0].Message.Content

	stop, want := pickStop(t, text)
	for _, stopField := range []any{stop, []string{"never in the text", stop}} {
		var got chatCompletion
		ts.post(t, "/v1/chat/completions", chatBody(llama, 24, map[string]any{"stop": stopField}), &got)
		if c := got.Choices[0]; *c.Message.Content != want || *c.FinishReason != "stop" {
			t.Errorf("stop %q: %q (%s), want %q", stopField, *c.Message.Content, *c.FinishReason, want)
		}
		_, body := ts.do(t, "POST", "/v1/chat/completions", chatBody(llama, 24, map[string]any{"stop": stopField, "stream": true}))
		if streamed, finish, _ := streamedChat(t, body); streamed != want || finish != "stop" {
			t.Errorf("streamed with stop %q: %q (%s), want %q", stopField, streamed, finish, want)
		}
	}

	// max_tokens and max_completion_tokens bound the reply exactly.
	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		for _, n := range []int{1, 5} {
			b := chatBody(llama, 0, map[string]any{field: n})
			if field != "max_tokens" {
				delete(b, "max_tokens")
			}
			var got chatCompletion
			ts.post(t, "/v1/chat/completions", b, &got)
			if got.Usage.CompletionTokens != n || *got.Choices[0].FinishReason != "length" || !strings.HasPrefix(text, *got.Choices[0].Message.Content) {
				t.Errorf("%s %d: %d tokens, %s, %q", field, n, got.Usage.CompletionTokens, *got.Choices[0].FinishReason, *got.Choices[0].Message.Content)
			}
		}
	}
}

func TestMaxTokensBeyondTheContext(t *testing.T) {
	const ctx = 48
	ts := newTestServer(t, app.EngineOptions{Context: ctx}, Options{})
	// 10^9 is not refused: the reply runs to the context's end.
	var got chatCompletion
	ts.post(t, "/v1/chat/completions", chatBody(llama, 1e9, nil), &got)
	if *got.Choices[0].FinishReason != "length" || got.Usage.TotalTokens > ctx+1 || got.Usage.CompletionTokens < 2 {
		t.Errorf("%s, %+v", *got.Choices[0].FinishReason, got.Usage)
	}
	// A prompt longer than the context is the client's error.
	long := chatBody(llama, 4, map[string]any{"messages": []map[string]string{{"role": "user", "content": strings.Repeat("blue sky ", 40)}}})
	resp, data := ts.do(t, "POST", "/v1/chat/completions", long)
	if e := openAIErr(t, data); resp.StatusCode != 400 || deref(e.Code) != "context_length_exceeded" {
		t.Errorf("%s: %s", resp.Status, data)
	}
}

func TestCompletionsMatchEngine(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	const prompt, n = "Once upon a time", 10
	direct, err := ts.engine.Complete(context.Background(), app.CompleteRequest{
		GenerateOptions: app.GenerateOptions{Model: llama, MaxTokens: n}, Prompt: prompt, Special: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"model": llama, "prompt": prompt, "temperature": 0, "max_tokens": n}
	var whole map[string]any
	ts.post(t, "/v1/completions", body, &whole)
	hasKeys(t, "completion", whole, "id", "object", "created", "model", "choices", "usage")
	choice := whole["choices"].([]any)[0].(map[string]any)
	hasKeys(t, "choice", choice, "text", "index", "logprobs", "finish_reason")
	if id, _ := whole["id"].(string); !strings.HasPrefix(id, "cmpl-") || whole["object"] != "text_completion" ||
		choice["text"] != direct.Text || choice["finish_reason"] != "length" {
		t.Errorf("%v; the engine said %q", whole, direct.Text)
	}
	if u := whole["usage"].(map[string]any); u["prompt_tokens"] != float64(direct.Stats.PromptTokens) || u["completion_tokens"] != float64(n) {
		t.Errorf("usage %v, the engine's %+v", u, direct.Stats)
	}
	// A prompt in an array of one is the same prompt.
	var one completion
	ts.post(t, "/v1/completions", map[string]any{"model": llama, "prompt": []string{prompt}, "temperature": 0, "max_tokens": n}, &one)
	if one.Choices[0].Text != direct.Text {
		t.Errorf("array prompt: %q", one.Choices[0].Text)
	}

	// Streamed.
	body["stream"] = true
	body["stream_options"] = map[string]bool{"include_usage": true}
	_, data := ts.do(t, "POST", "/v1/completions", body)
	events := sseData(t, data)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("no [DONE]:\n%s", data)
	}
	var text, finish string
	var u *usage
	for _, ev := range events[:len(events)-1] {
		var c completion
		if err := json.Unmarshal([]byte(ev), &c); err != nil || c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") {
			t.Fatalf("chunk %s: %v", ev, err)
		}
		if c.Usage != nil {
			u = c.Usage
			continue
		}
		text += c.Choices[0].Text
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if text != direct.Text || finish != "length" || u == nil || u.CompletionTokens != n {
		t.Errorf("streamed %q (%s, %+v), the engine said %q", text, finish, u, direct.Text)
	}
}

func TestModelsEndpoints(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	resp, data := ts.do(t, "GET", "/v1/models", nil)
	if err := json.Unmarshal(data, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %v\n%s", resp.Status, err, data)
	}
	if list.Object != "list" || len(list.Data) != 4 || list.Data[0]["id"] != embedder || list.Data[1]["id"] != llama || list.Data[2]["id"] != qwen || list.Data[3]["id"] != toolCaller {
		t.Fatalf("%s", data)
	}
	for _, m := range list.Data {
		hasKeys(t, "model", m, "id", "object", "created", "owned_by")
		if m["object"] != "model" || m["created"].(float64) <= 0 {
			t.Errorf("%v", m)
		}
	}
	// One model, by its name or Ollama's spelling of it.
	for _, name := range []string{llama, llama + ":latest"} {
		resp, data := ts.do(t, "GET", "/v1/models/"+name, nil)
		var m map[string]any
		if json.Unmarshal(data, &m); resp.StatusCode != 200 || m["id"] != llama {
			t.Errorf("%s: %s %s", name, resp.Status, data)
		}
	}
}

// TestGreedyOnTheGPU runs the API on the GPU (lavapipe here): the same
// greedy reply as on the CPU, streamed and whole.
func TestGreedyOnTheGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("the GPU run takes a few seconds on lavapipe")
	}
	const n = 4 // lavapipe decodes tiny-qwen3 at about 20 tokens/s
	gpu := newTestServer(t, app.EngineOptions{Backend: "gpu"}, Options{})
	cpu := newTestServer(t, app.EngineOptions{}, Options{})
	var onCPU chatCompletion
	cpu.post(t, "/v1/chat/completions", chatBody(qwen, n, nil), &onCPU)

	_, body := gpu.do(t, "POST", "/v1/chat/completions", chatBody(qwen, n, map[string]any{
		"stream": true, "stream_options": map[string]bool{"include_usage": true}}))
	text, finish, u := streamedChat(t, body)
	if st := gpu.engine.Status(); st.Model == nil || st.Model.Backend == "cpu" {
		t.Errorf("asked for the GPU, the model ran on the CPU (%+v)", st.Model)
	}
	if text != *onCPU.Choices[0].Message.Content || finish != "length" || u == nil || u.CompletionTokens != n {
		t.Errorf("GPU: %q (%s, %+v); CPU: %q", text, finish, u, *onCPU.Choices[0].Message.Content)
	}
}

func TestUsageCountsCachedTokens(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	var first, again chatCompletion
	ts.post(t, "/v1/chat/completions", chatBody(llama, 3, nil), &first)
	ts.post(t, "/v1/chat/completions", chatBody(llama, 3, nil), &again)
	// The same prompt again: the KV cache holds all of it but the last
	// token, which is evaluated again for its logits; usage still counts
	// the whole prompt, as OpenAI bills it.
	if again.Usage.PromptTokens != first.Usage.PromptTokens || again.Usage.PromptTokensDetails.CachedTokens != first.Usage.PromptTokens-1 {
		t.Errorf("first %+v, again %+v", first.Usage, again.Usage)
	}
}

// TestSeed: a seed makes a sampled reply repeatable, on both APIs.
func TestSeed(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	var texts [3]string
	for i, seed := range []int{42, 42, 7} {
		var c chatCompletion
		ts.post(t, "/v1/chat/completions", chatBody(qwen, 16, map[string]any{"temperature": 1.5, "seed": seed}), &c)
		texts[i] = *c.Choices[0].Message.Content
	}
	if texts[0] != texts[1] || texts[0] == texts[2] {
		t.Errorf("seed 42 gave %q and %q, seed 7 %q", texts[0], texts[1], texts[2])
	}
	var a, b map[string]any
	for _, out := range []*map[string]any{&a, &b} {
		ts.post(t, "/api/generate", map[string]any{"model": qwen, "prompt": "Hi", "stream": false,
			"options": map[string]any{"seed": 123, "temperature": 1.5, "num_predict": 16}}, out)
	}
	if a["response"] != b["response"] {
		t.Errorf("Ollama seed 123: %q, then %q", a["response"], b["response"])
	}
}
