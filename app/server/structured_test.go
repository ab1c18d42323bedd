package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// weatherSchema bounds every string and array, so that a random model's
// reply, which samples at random among what the schema allows, ends.
const weatherSchema = `{"type": "object", "properties": {
  "city": {"type": "string", "maxLength": 10},
  "unit": {"enum": ["celsius", "fahrenheit"]},
  "days": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
  "windy": {"type": "boolean"}},
  "required": ["city", "unit"], "additionalProperties": false}`

func validator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// valid reports why text is not a document of s, or nil.
func valid(s *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestStructuredOutput asks random-weight models for 100 replies under a
// schema, sampled with seeds and temperature 1 through both APIs, and
// checks each with an independent JSON Schema validator.
func TestStructuredOutput(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	v := validator(t, weatherSchema)
	anyObject := validator(t, `{"type": "object"}`)
	for i := range 100 {
		name := []string{qwen, llama}[i%2]
		seed := 1000 + i
		var text string
		switch i % 4 {
		case 0, 1: // OpenAI json_schema
			var r chatCompletion
			ts.post(t, "/v1/chat/completions", map[string]any{"model": name, "messages": weatherQuestion, "seed": seed, "max_tokens": 400,
				"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "weather", "schema": json.RawMessage(weatherSchema)}}}, &r)
			text = deref(r.Choices[0].Message.Content)
			if f := *r.Choices[0].FinishReason; f != "stop" {
				t.Fatalf("#%d %s: finish %s after %q", i, name, f, text)
			}
		case 2: // Ollama format schema, streamed
			body := map[string]any{"model": name, "messages": weatherQuestion, "format": json.RawMessage(weatherSchema),
				"options": map[string]any{"seed": seed, "temperature": 1}}
			_, data := ts.do(t, "POST", "/api/chat", body)
			for _, o := range ndjson(t, data) {
				text += o["message"].(map[string]any)["content"].(string)
			}
		case 3: // OpenAI json_object
			var r chatCompletion
			ts.post(t, "/v1/chat/completions", map[string]any{"model": name, "messages": weatherQuestion, "seed": seed, "max_tokens": 400,
				"response_format": map[string]any{"type": "json_object"}}, &r)
			text = deref(r.Choices[0].Message.Content)
			if err := valid(anyObject, text); err != nil && *r.Choices[0].FinishReason == "stop" {
				t.Errorf("#%d %s json_object: %q: %v", i, name, text, err)
			}
			continue
		}
		if err := valid(v, text); err != nil {
			t.Errorf("#%d %s: %q: %v", i, name, text, err)
		}
	}
}

// On /api/generate, format "json" lets the tool-caller write its JSON
// object (one token) and end; a schema it does not fit makes it write what
// the schema allows instead.
func TestOllamaFormat(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{}, Options{})
	for _, tc := range []struct {
		format any
		want   string
	}{
		{"json", toolCallReply},
		{json.RawMessage(`{"type": "array", "maxItems": 0}`), "[]"},
		{json.RawMessage(`{"enum": [true]}`), "true"},
	} {
		var r struct {
			Response   string `json:"response"`
			DoneReason string `json:"done_reason"`
		}
		ts.post(t, "/api/generate", map[string]any{"model": toolCaller, "prompt": "weather?", "format": tc.format, "stream": false,
			"options": map[string]any{"temperature": 0, "num_predict": 50}}, &r)
		// Whitespace is the greedy pick where every other token ties at
		// logit 0 (the tab has the lowest id): compare the JSON.
		var got bytes.Buffer
		if err := json.Compact(&got, []byte(r.Response)); err != nil || r.DoneReason != "stop" {
			t.Errorf("format %s: %q (%s): %v", tc.format, r.Response, r.DoneReason, err)
			continue
		}
		var want bytes.Buffer
		json.Compact(&want, []byte(tc.want))
		if got.String() != want.String() {
			t.Errorf("format %s: %q, want %s", tc.format, r.Response, tc.want)
		}
	}
}
