package server

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
)

var weatherTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "The weather in a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
}}

var weatherQuestion = []map[string]any{{"role": "user", "content": "What is the weather in Paris?"}}

// wantWeatherArgs are toolCallReply's arguments: the Llama 3 "parameters" become
// OpenAI's arguments, compacted.
const wantWeatherArgs = `{"city":"Paris","unit":"celsius"}`

func TestOpenAIToolCalls(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	body := map[string]any{"model": toolCaller, "messages": weatherQuestion, "tools": []any{weatherTool}, "temperature": 0}

	var whole struct {
		Choices []struct {
			Message struct {
				Role      string          `json:"role"`
				Content   *string         `json:"content"`
				ToolCalls []openAIToolUse `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	ts.post(t, "/v1/chat/completions", body, &whole)
	c := whole.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != nil || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("reply %+v, want one call, no content, finish tool_calls", c)
	}
	call := c.Message.ToolCalls[0]
	if !strings.HasPrefix(call.ID, "call_") || call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != wantWeatherArgs {
		t.Errorf("call %+v, want get_weather(%s)", call, wantWeatherArgs)
	}

	// Streamed: no byte of the call as content, then one tool_calls delta
	// with its index, then finish_reason tool_calls.
	body["stream"] = true
	_, data := ts.do(t, "POST", "/v1/chat/completions", body)
	var content string
	var deltas []openAIToolUse
	var finish string
	for _, ev := range sseData(t, data) {
		if ev == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta        chatMessageOut `json:"delta"`
				FinishReason *string        `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &ch); err != nil {
			t.Fatalf("%v: %s", err, ev)
		}
		for _, choice := range ch.Choices {
			content += deref(choice.Delta.Content)
			deltas = append(deltas, choice.Delta.ToolCalls...)
			if choice.FinishReason != nil {
				finish = *choice.FinishReason
			}
		}
	}
	if content != "" || finish != "tool_calls" || len(deltas) != 1 || deltas[0].Index == nil || *deltas[0].Index != 0 ||
		deltas[0].Function.Name != "get_weather" || deltas[0].Function.Arguments != wantWeatherArgs || !strings.HasPrefix(deltas[0].ID, "call_") {
		t.Errorf("stream: content %q, finish %q, calls %+v", content, finish, deltas)
	}

	// Without tools, or with tool_choice none, the same output is text.
	for _, extra := range []map[string]any{{"tools": nil}, {"tool_choice": "none"}} {
		b := map[string]any{"model": toolCaller, "messages": weatherQuestion, "tools": []any{weatherTool}, "temperature": 0}
		for k, v := range extra {
			b[k] = v
		}
		var plain chatCompletion
		ts.post(t, "/v1/chat/completions", b, &plain)
		if got := deref(plain.Choices[0].Message.Content); got != toolCallReply || *plain.Choices[0].FinishReason != "stop" {
			t.Errorf("%v: %q (%s), want the call as text", extra, got, *plain.Choices[0].FinishReason)
		}
	}

	// The conversation goes on: the assistant's call and the tool's result
	// render through the template, and the model answers.
	history := append(weatherQuestion,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": call.ID, "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": wantWeatherArgs}}}},
		map[string]any{"role": "tool", "tool_call_id": call.ID, "content": `{"temperature": 18}`})
	resp, data := ts.do(t, "POST", "/v1/chat/completions", map[string]any{"model": toolCaller, "messages": history, "tools": []any{weatherTool}})
	if resp.StatusCode != 200 {
		t.Errorf("a conversation with a tool result: %d %s", resp.StatusCode, data)
	}
}

// A random model with tools writes no call: whatever it writes comes back
// as text, and a stream carries all of it.
func TestToolsWithoutACall(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	for _, name := range []string{qwen, llama} {
		body := map[string]any{"model": name, "messages": weatherQuestion, "tools": []any{weatherTool}, "temperature": 0, "max_tokens": 12}
		var whole chatCompletion
		ts.post(t, "/v1/chat/completions", body, &whole)
		body["stream"] = true
		_, data := ts.do(t, "POST", "/v1/chat/completions", body)
		text, finish, _ := streamedChat(t, data)
		if want := deref(whole.Choices[0].Message.Content); text != want || finish != *whole.Choices[0].FinishReason || whole.Choices[0].Message.ToolCalls != nil {
			t.Errorf("%s: streamed %q (%s), whole %q (%s) %v", name, text, finish, want, *whole.Choices[0].FinishReason, whole.Choices[0].Message.ToolCalls)
		}
	}
}

func TestOllamaToolCalls(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	body := map[string]any{"model": toolCaller, "messages": weatherQuestion, "tools": []any{weatherTool}, "stream": false}
	var whole struct {
		Message struct {
			Content   string           `json:"content"`
			ToolCalls []ollamaToolCall `json:"tool_calls"`
		} `json:"message"`
		Done bool `json:"done"`
	}
	ts.post(t, "/api/chat", body, &whole)
	if whole.Message.Content != "" || len(whole.Message.ToolCalls) != 1 || whole.Message.ToolCalls[0].Function.Name != "get_weather" ||
		string(whole.Message.ToolCalls[0].Function.Arguments) != wantWeatherArgs || !whole.Done {
		t.Errorf("/api/chat: %+v", whole)
	}

	body["stream"] = true
	_, data := ts.do(t, "POST", "/api/chat", body)
	objs := ndjson(t, data)
	var content string
	calls := 0
	for _, o := range objs {
		msg := o["message"].(map[string]any)
		content += msg["content"].(string)
		if tc, ok := msg["tool_calls"].([]any); ok {
			calls += len(tc)
			args := tc[0].(map[string]any)["function"].(map[string]any)["arguments"].(map[string]any)
			if args["city"] != "Paris" {
				t.Errorf("streamed call arguments %v", args)
			}
		}
	}
	if content != "" || calls != 1 || objs[len(objs)-1]["done"] != true {
		t.Errorf("streamed /api/chat: content %q, %d calls, last %v", content, calls, objs[len(objs)-1])
	}
}

// modelfileModels gives every model of a catalogue an Ollama Modelfile's
// system prompt and parameters.
type modelfileModels struct {
	Models
	system, options string
}

func (m modelfileModels) List() []Model {
	ms := m.Models.List()
	for i := range ms {
		ms[i].System, ms[i].Options = m.system, m.options
	}
	return ms
}

// An Ollama store model's own system prompt opens a conversation without
// one, and its parameters are the defaults under a request's options, as
// Ollama applies them; OpenAI's endpoints keep OpenAI's temperature and
// top_p defaults.
func TestModelfileSystemAndParameters(t *testing.T) {
	plain := newTestServer(t, app.EngineOptions{}, Options{})
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	ts.Config.Handler = New(ts.engine, Options{Models: modelfileModels{Library(library.New(library.Roots{Folders: []string{modelsDir}})),
		"You are a pirate. Answer as one.", `{"num_predict": 3, "top_k": 1, "repeat_last_n": 0, "stop": ["<|im_end|>"]}`}})

	type ollamaCounts struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		PromptEvalCount int `json:"prompt_eval_count"`
		EvalCount       int `json:"eval_count"`
	}
	ask := func(s *testServer, msgs []map[string]any, options map[string]any) ollamaCounts {
		var out ollamaCounts
		body := map[string]any{"model": qwen, "messages": msgs, "stream": false}
		if options != nil {
			body["options"] = options
		}
		s.post(t, "/api/chat", body, &out)
		return out
	}
	q := []map[string]any{{"role": "user", "content": "Why is the sky blue?"}}
	withOwn := append([]map[string]any{{"role": "system", "content": "Be brief."}}, q...)
	base := ask(plain, q, map[string]any{"num_predict": 3})
	got := ask(ts, q, nil)
	if got.EvalCount != 3 || got.PromptEvalCount <= base.PromptEvalCount {
		t.Errorf("Modelfile defaults: %d tokens from a %d-token prompt, want 3 from more than %d (the system prompt)", got.EvalCount, got.PromptEvalCount, base.PromptEvalCount)
	}
	if own, want := ask(ts, withOwn, map[string]any{"num_predict": 5}), ask(plain, withOwn, map[string]any{"num_predict": 5}); own.PromptEvalCount != want.PromptEvalCount || own.EvalCount != 5 {
		t.Errorf("a request's own system prompt and num_predict: %+v, want the prompt of %+v and 5 tokens", own, want)
	}

	// top_k 1 from the Modelfile makes OpenAI's temperature-1 default
	// sampling greedy: the same reply as temperature 0 without it.
	var greedy, sampled chatCompletion
	plain.post(t, "/v1/chat/completions", map[string]any{"model": qwen, "messages": withOwn, "temperature": 0, "max_tokens": 6}, &greedy)
	ts.post(t, "/v1/chat/completions", map[string]any{"model": qwen, "messages": withOwn, "max_tokens": 6, "seed": 99}, &sampled)
	if g, s := deref(greedy.Choices[0].Message.Content), deref(sampled.Choices[0].Message.Content); g != s {
		t.Errorf("OpenAI with the Modelfile's top_k 1: %q, want the greedy %q", s, g)
	}

	// Parameters that are not Ollama's options are ignored, not fatal.
	ts.Config.Handler = New(ts.engine, Options{Models: modelfileModels{Library(library.New(library.Roots{Folders: []string{modelsDir}})), "", `{"num_predict": "many"}`}})
	if got := ask(ts, q, map[string]any{"num_predict": 2}); got.EvalCount != 2 {
		t.Errorf("with unreadable Modelfile parameters: %+v", got)
	}
}

// tool_choice required or a named function makes even a random model
// call: each reply, whatever the seed, is one call to an allowed function
// whose arguments validate against its parameters.
func TestRequiredToolCalls(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	params := `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "days": {"type": "integer"}}, "required": ["city"], "additionalProperties": false}`
	v := validator(t, params)
	clock := map[string]any{"type": "function", "function": map[string]any{"name": "now", "parameters": map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}}}
	weather := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": json.RawMessage(params)}}
	for i := range 12 {
		name := []string{qwen, llama}[i%2]
		choice := any("required")
		if i%3 == 2 {
			choice = map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}
		}
		var r struct {
			Choices []struct {
				Message struct {
					ToolCalls []openAIToolUse `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		ts.post(t, "/v1/chat/completions", map[string]any{"model": name, "messages": weatherQuestion, "tools": []any{clock, weather},
			"tool_choice": choice, "seed": i, "max_tokens": 300}, &r)
		c := r.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
			t.Errorf("#%d %s: %+v", i, name, c)
			continue
		}
		call := c.Message.ToolCalls[0].Function
		switch {
		case call.Name == "get_weather":
			if err := valid(v, call.Arguments); err != nil {
				t.Errorf("#%d %s: get_weather(%s): %v", i, name, call.Arguments, err)
			}
		case call.Name == "now" && i%3 != 2:
			if call.Arguments != "{}" {
				t.Errorf("#%d %s: now(%s)", i, name, call.Arguments)
			}
		default:
			t.Errorf("#%d %s: called %s with tool_choice %v", i, name, call.Name, choice)
		}
	}
}

// TestRecordGetsAnsweredChats: Options.Record sees each chat answered, with
// the messages the model read and the tool calls under the IDs the client
// got, whole or streamed, on both APIs; a refused request is not recorded.
func TestRecordGetsAnsweredChats(t *testing.T) {
	var mu sync.Mutex
	var got []Exchange
	ts := newTestServer(t, app.EngineOptions{}, Options{Record: func(x Exchange) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, x)
	}})
	last := func() Exchange {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			t.Fatal("nothing recorded")
		}
		return got[len(got)-1]
	}
	body := map[string]any{"model": toolCaller, "messages": weatherQuestion, "tools": []any{weatherTool}, "temperature": 0}
	var whole struct {
		Choices []struct {
			Message struct {
				ToolCalls []openAIToolUse `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	ts.post(t, "/v1/chat/completions", body, &whole)
	x := last()
	if x.API != "OpenAI" || len(x.Messages) != 1 || x.Messages[0].Content != weatherQuestion[0]["content"] {
		t.Errorf("recorded %+v", x)
	}
	if len(x.Reply.ToolCalls) != 1 || x.Reply.ToolCalls[0].ID != whole.Choices[0].Message.ToolCalls[0].ID || string(x.Reply.ToolCalls[0].Function.Arguments) != wantWeatherArgs {
		t.Errorf("recorded calls %+v, the client got %+v", x.Reply.ToolCalls, whole.Choices[0].Message.ToolCalls)
	}

	body["stream"] = true
	_, data := ts.do(t, "POST", "/v1/chat/completions", body)
	var id string
	for _, ev := range sseData(t, data) {
		var ch struct {
			Choices []struct {
				Delta chatMessageOut `json:"delta"`
			} `json:"choices"`
		}
		if ev != "[DONE]" && json.Unmarshal([]byte(ev), &ch) == nil && len(ch.Choices) > 0 && len(ch.Choices[0].Delta.ToolCalls) > 0 {
			id = ch.Choices[0].Delta.ToolCalls[0].ID
		}
	}
	if x := last(); id == "" || len(x.Reply.ToolCalls) != 1 || x.Reply.ToolCalls[0].ID != id {
		t.Errorf("streamed: recorded calls %+v, the client got id %q", x.Reply.ToolCalls, id)
	}

	ts.post(t, "/api/chat", map[string]any{"model": toolCaller, "messages": weatherQuestion, "tools": []any{weatherTool}, "stream": false}, nil)
	if x := last(); x.API != "Ollama" || len(x.Reply.ToolCalls) != 1 || x.Reply.ToolCalls[0].Function.Name != "get_weather" {
		t.Errorf("/api/chat recorded %+v", x)
	}

	mu.Lock()
	n := len(got)
	mu.Unlock()
	if resp, _ := ts.do(t, "POST", "/api/chat", map[string]any{"model": "no-such-model", "messages": weatherQuestion}); resp.StatusCode == 200 {
		t.Fatal("an unknown model was answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("a refused request was recorded: %+v", got[n:])
	}
}
