package server

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/internal/visiontest"
)

// clientTestsVar turns on the tests that drive the server with real client
// programs (node with the openai package, curl). make test sets it.
const clientTestsVar = "HEARTH_CLIENT_TESTS"

// clientTool is the path of a client program. The tests that need one are
// skipped without clientTestsVar; with it a missing program fails them, so
// a machine that should run them cannot pass without.
func clientTool(t *testing.T, name string) string {
	t.Helper()
	if os.Getenv(clientTestsVar) != "1" {
		t.Skipf("set %s=1 to run the tests with real clients (node and npm, curl)", clientTestsVar)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s=1 but %s is missing: %v", clientTestsVar, name, err)
	}
	return path
}

// run runs a client program and returns its standard output.
func runClient(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// TestOpenAINodeClient runs testdata/clients/openai_client.mjs, which uses
// the official openai package (the version package-lock.json pins, from
// the npm registry), against the server with an API key.
func TestOpenAINodeClient(t *testing.T) {
	node := clientTool(t, "node")
	npm := clientTool(t, "npm")

	// npm ci writes node_modules; a copy keeps the source tree clean.
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", ".npmrc", "openai_client.mjs", "openai_tools.mjs", "openai_structured.mjs", "openai_vision.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "clients", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runClient(t, dir, nil, npm, "ci", "--registry=https://registry.npmjs.org/", "--ignore-scripts", "--no-audit", "--no-fund")

	const key = "node-client-key"
	ts := newTestServer(t, app.EngineOptions{}, Options{APIKey: key})
	// The greedy reply, as Go gets it.
	_, data := ts.do(t, "POST", "/v1/chat/completions", chatBody(llama, 8, nil), "Authorization", "Bearer "+key)
	var want chatCompletion
	if err := json.Unmarshal(data, &want); err != nil || len(want.Choices) != 1 {
		t.Fatalf("%v: %s", err, data)
	}
	out := runClient(t, dir, []string{"HEARTH_BASE_URL=" + ts.URL + "/v1", "HEARTH_MODEL=" + llama, "HEARTH_API_KEY=" + key}, node, "openai_client.mjs")

	var got struct {
		Models []struct{ ID, Object string } `json:"models"`
		Chat   struct {
			ID, Object, Model, Role, Content string
			FinishReason                     string `json:"finish_reason"`
			Usage                            usage
		} `json:"chat"`
		ChatStream struct {
			Chunks       int
			Role         string
			Content      string
			FinishReason string `json:"finish_reason"`
			Usage        *usage
		} `json:"chat_stream"`
		Completion struct {
			Object, Text string
			FinishReason string `json:"finish_reason"`
			Usage        usage
		} `json:"completion"`
		NotFound struct {
			Status     int
			Code, Type string
		} `json:"not_found"`
		Embeddings struct {
			Object  string
			Vectors [][]float32
			Usage   struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)

	var ids []string
	for _, m := range got.Models {
		ids = append(ids, m.ID)
	}
	if !slices.Contains(ids, llama) || !slices.Contains(ids, qwen) {
		t.Errorf("models.list: %v", ids)
	}
	c := got.Chat
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Model != llama || c.Role != "assistant" ||
		c.Content != *want.Choices[0].Message.Content || c.FinishReason != "length" || c.Usage.CompletionTokens != 8 || c.Usage.TotalTokens != c.Usage.PromptTokens+8 {
		t.Errorf("chat: %+v", c)
	}
	s := got.ChatStream
	if s.Content != c.Content || s.Role != "assistant" || s.FinishReason != "length" || s.Usage == nil || *s.Usage != c.Usage || s.Chunks < 3 {
		t.Errorf("streamed chat: %+v, whole: %q", s, c.Content)
	}
	if p := got.Completion; p.Object != "text_completion" || p.Text == "" || p.FinishReason != "length" || p.Usage.CompletionTokens != 6 {
		t.Errorf("completion: %+v", p)
	}
	if nf := got.NotFound; nf.Status != 404 || nf.Code != "model_not_found" || nf.Type != "invalid_request_error" {
		t.Errorf("unknown model: %+v", nf)
	}
	// The embeddings as the package decoded them from base64 are the
	// floats the server gives in JSON.
	var floats struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	_, data = ts.do(t, "POST", "/v1/embeddings", map[string]any{"model": llama, "input": []string{"Why is the sky blue?", "Rayleigh scattering."}},
		"Authorization", "Bearer "+key)
	if err := json.Unmarshal(data, &floats); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if e := got.Embeddings; e.Object != "list" || len(e.Vectors) != 2 || e.Usage.PromptTokens == 0 || len(floats.Data) != 2 {
		t.Errorf("embeddings: %+v", e)
	} else {
		for i, v := range e.Vectors {
			if !slices.Equal(v, floats.Data[i].Embedding) {
				t.Errorf("embedding %d: the client's decoding differs from the JSON floats", i)
			}
		}
	}

	// Tool calling through the package's helpers, against the model that
	// answers with a call (toolcaller_test.go).
	out = runClient(t, dir, []string{"HEARTH_BASE_URL=" + ts.URL + "/v1", "HEARTH_MODEL=" + toolCaller, "HEARTH_API_KEY=" + key}, node, "openai_tools.mjs")
	t.Logf("%s", out)
	type toolMessage struct {
		Role      string          `json:"role"`
		Content   *string         `json:"content"`
		ToolCalls []openAIToolUse `json:"tool_calls"`
	}
	var tools struct {
		Chat, Stream struct {
			FinishReason string      `json:"finish_reason"`
			Message      toolMessage `json:"message"`
		}
		RunTools struct {
			Calls    []map[string]any `json:"calls"`
			Messages []struct {
				Role      string `json:"role"`
				ToolCalls int    `json:"tool_calls"`
			} `json:"messages"`
		} `json:"run_tools"`
	}
	if err := json.Unmarshal(out, &tools); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for what, r := range map[string]struct {
		FinishReason string      `json:"finish_reason"`
		Message      toolMessage `json:"message"`
	}{"create": tools.Chat, "stream helper": tools.Stream} {
		m := r.Message
		if r.FinishReason != "tool_calls" || m.Role != "assistant" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" ||
			m.ToolCalls[0].Function.Arguments != wantWeatherArgs || !strings.HasPrefix(m.ToolCalls[0].ID, "call_") || (m.Content != nil && *m.Content != "") {
			t.Errorf("%s: %+v", what, r)
		}
	}
	// Two rounds: each called get_weather with the parsed arguments, and
	// the second request carried the first call and its result.
	rt := tools.RunTools
	var roles []string
	for _, m := range rt.Messages {
		roles = append(roles, m.Role)
	}
	if len(rt.Calls) != 2 || rt.Calls[0]["city"] != "Paris" || rt.Calls[0]["unit"] != "celsius" ||
		strings.Join(roles, ",") != "user,assistant,tool,assistant,tool" {
		t.Errorf("runTools: calls %v, messages %v", rt.Calls, roles)
	}

	// Structured output through the parse helper, from a random model.
	out = runClient(t, dir, []string{"HEARTH_BASE_URL=" + ts.URL + "/v1", "HEARTH_MODEL=" + qwen, "HEARTH_API_KEY=" + key,
		"HEARTH_SCHEMA=" + weatherSchema}, node, "openai_structured.mjs")
	t.Logf("%s", out)
	var parsed struct {
		FinishReason string          `json:"finish_reason"`
		Content      string          `json:"content"`
		Parsed       json.RawMessage `json:"parsed"`
	}
	if err := json.Unmarshal(out, &parsed); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := valid(validator(t, weatherSchema), string(parsed.Parsed)); err != nil || parsed.FinishReason != "stop" {
		t.Errorf("parse helper: %s (%s): %v", parsed.Parsed, parsed.FinishReason, err)
	}

	// An image in a data URL, the reply streamed, as Go gets it (the
	// second time, from the cache: usage differs in cached_tokens); a
	// remote URL refused.
	vs := newVisionServer(t, Options{APIKey: key})
	img := dataURL(visiontest.PNG(40, 30, 1))
	parts := []map[string]any{{"type": "image_url", "image_url": map[string]string{"url": img}}, {"type": "text", "text": "What is in it?"}}
	_, data = vs.do(t, "POST", "/v1/chat/completions", imageChatBody(parts, nil), "Authorization", "Bearer "+key)
	var seen chatCompletion
	if err := json.Unmarshal(data, &seen); err != nil || len(seen.Choices) != 1 {
		t.Fatalf("%v: %s", err, data)
	}
	out = runClient(t, dir, []string{"HEARTH_BASE_URL=" + vs.URL + "/v1", "HEARTH_MODEL=" + gemma, "HEARTH_API_KEY=" + key, "HEARTH_IMAGE=" + img}, node, "openai_vision.mjs")
	t.Logf("%s", out)
	var vision struct {
		Stream struct {
			Chunks       int
			Content      string
			FinishReason string `json:"finish_reason"`
			Usage        *usage
		}
		Remote struct {
			Status               int
			Code, Param, Message string
		}
	}
	if err := json.Unmarshal(out, &vision); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s := vision.Stream; s.Content != *seen.Choices[0].Message.Content || s.FinishReason != "length" || s.Chunks < 3 || s.Usage == nil || seen.Usage == nil ||
		s.Usage.PromptTokens != seen.Usage.PromptTokens || s.Usage.CompletionTokens != 8 {
		t.Errorf("streamed image chat: %+v, Go got %q %+v", s, *seen.Choices[0].Message.Content, seen.Usage)
	}
	if r := vision.Remote; r.Status != 400 || r.Code != "invalid_image_url" || r.Param != "messages[0].content[0].image_url.url" || !strings.Contains(r.Message, "data URL") {
		t.Errorf("remote image URL: %+v", r)
	}
}

// TestCurl streams both APIs through curl -N, as a shell user would, and
// checks that the stream carries the same reply as the whole response.
func TestCurl(t *testing.T) {
	curl := clientTool(t, "curl")
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	var whole chatCompletion
	ts.post(t, "/v1/chat/completions", chatBody(llama, 8, nil), &whole)
	want := *whole.Choices[0].Message.Content

	body, _ := json.Marshal(chatBody(llama, 8, map[string]any{"stream": true}))
	out := runClient(t, "", nil, curl, "-sS", "-N", "--fail-with-body", "-H", "Content-Type: application/json",
		"-d", string(body), ts.URL+"/v1/chat/completions")
	if text, finish, _ := streamedChat(t, out); text != want || finish != "length" {
		t.Errorf("curl /v1/chat/completions: %q (%s), want %q", text, finish, want)
	}

	body, _ = json.Marshal(map[string]any{"model": llama, "messages": conversation, "options": map[string]any{"temperature": 0, "num_predict": 8}})
	out = runClient(t, "", nil, curl, "-sS", "-N", "--fail-with-body", "-d", string(body), ts.URL+"/api/chat")
	objs := ndjson(t, out)
	var text string
	for _, o := range objs {
		text += o["message"].(map[string]any)["content"].(string)
	}
	if final := objs[len(objs)-1]; text != want || final["done"] != true || final["eval_count"] != 8.0 {
		t.Errorf("curl /api/chat: %q %v, want %q", text, final, want)
	}

	// The probe Ollama clients send.
	out = runClient(t, "", nil, curl, "-sS", "-I", "--fail", ts.URL+"/")
	if !strings.HasPrefix(string(out), "HTTP/1.1 200") {
		t.Errorf("curl -I /: %s", out)
	}
}
