package chat

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/structured"
)

// The replies are what each family writes, as the model cards and the
// parsers of llama.cpp (common/chat.cpp), Ollama (tools/) and vLLM
// (tool_parsers/) document them.
func TestToolSyntaxParse(t *testing.T) {
	type call struct{ name, args, id string }
	cases := []struct {
		syntax ToolSyntax
		reply  string
		text   string
		calls  []call
	}{
		// Llama 3.1/3.2/3.3: the reply is the JSON object, "parameters".
		{ToolsJSON, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, "", []call{{"get_weather", `{"city":"Paris"}`, ""}}},
		{ToolsJSON, "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}", "", []call{{"search", `{"q":"x"}`, ""}}},
		// Two calls separated by ';' (Llama 3.2's parallel form), and a list.
		{ToolsJSON, `{"name": "a", "parameters": {}}; {"name": "b", "arguments": {"n": 1}}`, "", []call{{"a", `{}`, ""}, {"b", `{"n":1}`, ""}}},
		{ToolsJSON, `[{"name": "a", "arguments": {"x": [1, 2]}}, {"name": "b"}]`, "", []call{{"a", `{"x":[1,2]}`, ""}, {"b", `{}`, ""}}},
		{ToolsJSON, "```json\n{\"name\": \"f\", \"arguments\": \"{\\\"k\\\": true}\"}\n```", "", []call{{"f", `{"k":true}`, ""}}},
		// OpenAI's own shape.
		{ToolsJSON, `{"type": "function", "function": {"name": "f", "arguments": {"a": "b"}}}`, "", []call{{"f", `{"a":"b"}`, ""}}},
		// Prose, malformed and non-call JSON stay text.
		{ToolsJSON, "The weather in Paris is sunny.", "The weather in Paris is sunny.", nil},
		{ToolsJSON, `{"name": "f", "parameters": {"a": `, `{"name": "f", "parameters": {"a": `, nil},
		{ToolsJSON, `{"answer": 42}`, `{"answer": 42}`, nil},
		{ToolsJSON, `{"name": "f", "parameters": [1]}`, `{"name": "f", "parameters": [1]}`, nil},
		{ToolsJSON, `{"name": "f"} and then text`, `{"name": "f"} and then text`, nil},

		// Qwen 2.5/3 and Hermes: text, then the tagged calls.
		{ToolsHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []call{{"get_weather", `{"city":"Paris"}`, ""}}},
		{ToolsHermes, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"n\": 2}}\n</tool_call>", "Let me check.", []call{{"a", `{}`, ""}, {"b", `{"n":2}`, ""}}},
		// The last close tag missing (the reply stopped at the end of turn).
		{ToolsHermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n", "", []call{{"a", `{}`, ""}}},
		{ToolsHermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}\n</tool_call>", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}\n</tool_call>", nil},
		{ToolsHermes, "no call here", "no call here", nil},

		// Mistral v0.3 (with its marker, and without: the control token
		// dropped), and the v11 name[ARGS]{…} form.
		{ToolsMistral, `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}]`, "", []call{{"get_weather", `{"city":"Paris"}`, "abc123def"}}},
		{ToolsMistral, ` [{"name": "f", "arguments": {}}]`, "", []call{{"f", `{}`, ""}}},
		{ToolsMistral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}`, "", []call{{"get_weather", `{"city":"Paris"}`, ""}, {"get_time", `{}`, ""}}},
		{ToolsMistral, `Sure.[TOOL_CALLS]f[ARGS]{"a": 1}`, "Sure.", []call{{"f", `{"a":1}`, ""}}},
		{ToolsMistral, `[TOOL_CALLS]f[ARGS]{"a": `, `[TOOL_CALLS]f[ARGS]{"a": `, nil},
		{ToolsMistral, `[1] is a citation`, `[1] is a citation`, nil},

		// Phi-4-mini.
		{ToolsPhi4, `functools[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "f", "parameters": {}}]`, "", []call{{"get_weather", `{"city":"Paris"}`, ""}, {"f", `{}`, ""}}},
		{ToolsPhi4, `functools[{"name": "get_weather"`, `functools[{"name": "get_weather"`, nil},
	}
	for _, tc := range cases {
		text, calls := tc.syntax.Parse(tc.reply)
		if text != tc.text {
			t.Errorf("%v %q: text %q, want %q", tc.syntax, tc.reply, text, tc.text)
		}
		if len(calls) != len(tc.calls) {
			t.Errorf("%v %q: %d calls %+v, want %d", tc.syntax, tc.reply, len(calls), calls, len(tc.calls))
			continue
		}
		for i, c := range calls {
			w := tc.calls[i]
			if c.Function.Name != w.name || string(c.Function.Arguments) != w.args || c.ID != w.id || c.Type != "function" {
				t.Errorf("%v %q: call %d %s(%s) id %q, want %s(%s) id %q", tc.syntax, tc.reply, i, c.Function.Name, c.Function.Arguments, c.ID, w.name, w.args, w.id)
			}
			if !json.Valid(c.Function.Arguments) {
				t.Errorf("%v %q: arguments %s are not JSON", tc.syntax, tc.reply, c.Function.Arguments)
			}
		}
	}
}

// Held must never let a client see a byte of a call: for every prefix of
// each reply, the content released (all but the held suffix) is a prefix
// of the final text when the reply holds calls; plain text is held back by
// less than a marker; and releasing never goes back.
func TestToolSyntaxHeld(t *testing.T) {
	cases := []struct {
		syntax ToolSyntax
		reply  string
	}{
		{ToolsHermes, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"},
		{ToolsHermes, "Plain <tool answer> with < and <tool_ in it."},
		{ToolsJSON, `{"name": "get_weather", "parameters": {"city": "Paris"}}`},
		{ToolsJSON, "<|python_tag|>{\"name\": \"s\", \"parameters\": {}}"},
		{ToolsJSON, "The weather is sunny."},
		{ToolsMistral, `Sure.[TOOL_CALLS]f[ARGS]{"a": 1}`},
		{ToolsMistral, ` [{"name": "f", "arguments": {}}]`},
		{ToolsMistral, "Plain text [with brackets]."},
		{ToolsPhi4, `Calling: functools[{"name": "f", "arguments": {}}]`},
		{ToolsPhi4, "func tools are fun"},
	}
	for _, tc := range cases {
		final, calls := tc.syntax.Parse(tc.reply)
		released := 0
		for n := 0; n <= len(tc.reply); n++ {
			prefix := tc.reply[:n]
			r := n - tc.syntax.Held(prefix)
			if r < released {
				t.Errorf("%v %q: released %d bytes after %d", tc.syntax, prefix, r, released)
			}
			released = max(released, r)
			out := prefix[:r]
			if calls != nil && !strings.HasPrefix(final+"\n", strings.TrimRight(out, " \n")) && strings.TrimSpace(out) != "" {
				t.Errorf("%v %q: released %q, beyond the text %q", tc.syntax, prefix, out, final)
			}
		}
		// Plain text must flow: at most a marker's length is held back
		// (the server flushes it at the end), unless the syntax holds a
		// reply that may be a call whole.
		if calls == nil && !strings.HasPrefix(strings.TrimSpace(tc.reply), "[") && len(tc.reply)-released >= len(tc.syntax.opening()) {
			t.Errorf("%v %q: %d bytes still held at the end", tc.syntax, tc.reply, len(tc.reply)-released)
		}
	}
}

func TestToolSyntaxFor(t *testing.T) {
	for src, want := range map[string]ToolSyntax{
		`{%- for tool in tools %}...<tool_call>\n{"name": <function-name>, ...}\n</tool_call>`:                   ToolsHermes,
		`{{- "[AVAILABLE_TOOLS]" + tools|tojson + "[/AVAILABLE_TOOLS]" }}...{{ "[TOOL_CALLS]" }}`:                ToolsMistral,
		`<|tool|>{{ message['tools'] }}<|/tool|>... functools[...]`:                                              ToolsPhi4,
		`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}`: ToolsJSON,
		``: ToolsJSON,
	} {
		if got := ToolSyntaxFor(src); got != want {
			t.Errorf("ToolSyntaxFor(%q) = %v, want %v", src, got, want)
		}
	}
}

// A reply held to Forced's schema is a call Parse reads: for each syntax,
// 12 replies drawn byte by byte at random among what the matcher allows
// parse into one call to an allowed function with valid arguments.
func TestForcedCallsParse(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "days": {"type": "integer"}}, "required": ["city"], "additionalProperties": false}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "now"}}`),
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for _, syntax := range []ToolSyntax{ToolsJSON, ToolsHermes, ToolsMistral, ToolsPhi4} {
		for _, name := range []string{"", "get_weather"} {
			s, err := syntax.Forced(tools, name)
			if err != nil {
				t.Fatal(err)
			}
			for g := range 12 {
				m := structured.NewMatcher(s)
				var out []byte
				for !m.Done() || (m.More() && rng.IntN(4) > 0) {
					var ok []byte
					for c := range 256 {
						if m.Clone().Feed([]byte{byte(c)}) {
							ok = append(ok, byte(c))
						}
					}
					if len(ok) == 0 {
						break
					}
					c := ok[rng.IntN(len(ok))]
					m.Feed([]byte{c})
					out = append(out, c)
					if len(out) > 2000 {
						t.Fatalf("%v #%d: no end: %q", syntax, g, out)
					}
				}
				text, calls := syntax.Parse(string(out))
				if len(calls) != 1 || text != "" || (name != "" && calls[0].Function.Name != name) ||
					(calls[0].Function.Name != "get_weather" && calls[0].Function.Name != "now") {
					t.Errorf("%v %q #%d: %q parsed to %q %+v", syntax, name, g, out, text, calls)
				}
			}
		}
	}
	if _, err := ToolsHermes.Forced(tools, "fly"); err == nil || !strings.Contains(err.Error(), `"fly"`) {
		t.Errorf("an unknown function: %v", err)
	}
	bad := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "x"}}}`)}
	if _, err := ToolsJSON.Forced(bad, ""); err == nil || !strings.Contains(err.Error(), "pattern") {
		t.Errorf("parameters with a pattern: %v", err)
	}
}
