package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a conversation, with the fields chat templates
// read. A field that is empty is left out of the message the template sees,
// so "message.tool_calls is defined" means what it does for a Python dict.
type Message struct {
	Role    string `json:"role"` // system, user, assistant, tool
	Content string `json:"content"`
	// ReasoningContent is an assistant's thinking, for templates that
	// render it (Qwen 3, Nemotron, gpt-oss).
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"` // a tool message answers this call
	Name             string     `json:"name,omitempty"`         // a tool message's function name
	// Images are the message's images: each stands where ImageMarker
	// stands in Content, in order, or, when Content has no marker, before
	// its text. Templates never see them; the marker is what they render,
	// and the engine puts the image's tokens in its place.
	Images []Image `json:"-"`
}

// ImageMarker stands for an image in a Message's Content (llama.cpp's
// server uses <__media__> the same way).
const ImageMarker = "<__image__>"

// Image is an image in a message: the encoded file (PNG, JPEG, GIF or
// WebP), and where a kept conversation finds it again.
type Image struct {
	Data []byte
	// Ref names the image where the conversation is kept (a chat file's
	// images are named by the SHA-256 of their bytes); "" for none.
	Ref string
}

// ToolCall is a function call an assistant made, in OpenAI's shape.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function and arguments of a ToolCall. Arguments is a
// JSON object: templates iterate over it or pass it to tojson (OpenAI's API
// sends it as a string holding JSON, which the caller decodes first).
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Request is what a template renders.
type Request struct {
	Messages []Message
	// Tools are the tool definitions (OpenAI's {"type": "function",
	// "function": {...}}), each a JSON object. Templates see them with
	// their keys in the order given, as transformers passes them.
	Tools []json.RawMessage
	// AddGenerationPrompt opens an assistant turn after the messages.
	AddGenerationPrompt bool
	// BOS and EOS are bos_token and eos_token.
	BOS, EOS string
	// Vars are more variables for the template (enable_thinking,
	// reasoning_effort, …): bool, string, numbers, nil, []any,
	// map[string]any or json.RawMessage.
	Vars map[string]any
	// Now is the clock of strftime_now; nil means time.Now.
	Now func() time.Time
}

// Template is a compiled chat template. It may be rendered by several
// goroutines at once.
type Template struct {
	name   string
	source string
	t      *jinja.Template
}

// Parse compiles a Jinja chat template. name says where it came from, for
// errors ("tokenizer.chat_template", "builtin:gemma").
func Parse(name, source string) (*Template, error) {
	resolved, err := resolveWhitespace(source)
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", name, err)
	}
	t, err := jinja.Compile(resolved)
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", name, err)
	}
	return &Template{name: name, source: source, t: t}, nil
}

// Name is where the template came from.
func (t *Template) Name() string { return t.name }

// Source is the template's Jinja source.
func (t *Template) Source() string { return t.source }

// TemplateError is the error of a template that called raise_exception: the
// template itself refused the conversation ("Conversation roles must
// alternate user/assistant/user/assistant/...").
type TemplateError struct {
	Template string // the template's name
	Message  string
}

// Error names the template and says what it refused.
func (e *TemplateError) Error() string {
	return fmt.Sprintf("chat: %s: %s", e.Template, e.Message)
}

// Render renders the conversation of r with the variables transformers'
// apply_chat_template gives a template: messages, tools, documents (none),
// add_generation_prompt, bos_token, eos_token, raise_exception and
// strftime_now, plus r.Vars.
func (t *Template) Render(r Request) (string, error) {
	data, err := t.variables(r)
	if err != nil {
		return "", err
	}
	out, err := t.t.RenderValues(data)
	if err != nil {
		if te := (*TemplateError)(nil); errors.As(err, &te) {
			return "", te
		}
		return "", fmt.Errorf("chat: %s: %w", t.name, err)
	}
	return out, nil
}

// variables builds the template's variables from r.
func (t *Template) variables(r Request) (map[string]jinja.Value, error) {
	msgs := make([]jinja.Value, len(r.Messages))
	for i, m := range r.Messages {
		v, err := messageValue(m)
		if err != nil {
			return nil, fmt.Errorf("chat: message %d: %w", i, err)
		}
		msgs[i] = v
	}
	tools := jinja.None()
	if len(r.Tools) > 0 {
		list := make([]jinja.Value, len(r.Tools))
		for i, raw := range r.Tools {
			v, err := jsonValue(raw)
			if err != nil {
				return nil, fmt.Errorf("chat: tool %d: %w", i, err)
			}
			list[i] = v
		}
		tools = jinja.NewList(list)
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	data := map[string]jinja.Value{
		"messages":              jinja.NewList(msgs),
		"tools":                 tools,
		"documents":             jinja.None(),
		"add_generation_prompt": jinja.NewBool(r.AddGenerationPrompt),
		"bos_token":             jinja.NewString(r.BOS),
		"eos_token":             jinja.NewString(r.EOS),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := "raise_exception called"
			if len(args) > 0 {
				msg = display(args[0])
			}
			return jinja.Undefined(), &TemplateError{Template: t.name, Message: msg}
		}),
		"strftime_now": jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) != 1 || !args[0].IsString() {
				return jinja.Undefined(), fmt.Errorf("strftime_now wants one format string")
			}
			return jinja.NewString(strftime(args[0].AsString(), now())), nil
		}),
		// The tojson filter, which Parse rewrote into calls of this: it
		// is transformers' json.dumps (see rewriteToJSON).
		toJSONFunc: jinja.NewCallable("tojson", filterToJSON),
	}
	for k, v := range r.Vars {
		jv, err := goValue(v)
		if err != nil {
			return nil, fmt.Errorf("chat: variable %q: %w", k, err)
		}
		data[k] = jv
	}
	return data, nil
}

// display is how Jinja prints a value in {{ }}.
func display(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return v.String()
}

// messageValue is m as the dict a template sees, keys in a fixed order and
// empty optional fields left out.
func messageValue(m Message) (jinja.Value, error) {
	d := jinja.NewDict()
	dict := d.AsDict()
	dict.Set("role", jinja.NewString(m.Role))
	dict.Set("content", jinja.NewString(m.Content))
	if m.ReasoningContent != "" {
		dict.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			c := jinja.NewDict()
			cd := c.AsDict()
			if tc.ID != "" {
				cd.Set("id", jinja.NewString(tc.ID))
			}
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			cd.Set("type", jinja.NewString(typ))
			f := jinja.NewDict()
			fd := f.AsDict()
			fd.Set("name", jinja.NewString(tc.Function.Name))
			args := jinja.NewDict()
			if len(bytes.TrimSpace(tc.Function.Arguments)) > 0 {
				var err error
				if args, err = jsonValue(tc.Function.Arguments); err != nil {
					return jinja.Value{}, fmt.Errorf("tool call %d arguments: %w", i, err)
				}
			}
			fd.Set("arguments", args)
			cd.Set("function", f)
			calls[i] = c
		}
		dict.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		dict.Set("name", jinja.NewString(m.Name))
	}
	return d, nil
}

// jsonValue decodes JSON into a template value, keeping the order of
// object keys (tojson of a tool definition must print it as written).
func jsonValue(raw []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSON(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				v, err := decodeJSON(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(k.(string), v)
			}
			_, err := dec.Token() // '}'
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeJSON(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
		return jinja.Value{}, fmt.Errorf("unexpected %v", x)
	case json.Number:
		return jinja.FromGoValue(x), nil
	case string:
		return jinja.NewString(x), nil
	case bool:
		return jinja.NewBool(x), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// goValue converts a Go value of Request.Vars.
func goValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return jsonValue(x)
	case nil, bool, string, int, int64, float64, []any, map[string]any:
		return jinja.FromGoValue(x), nil
	case int32:
		return jinja.NewInt(int64(x)), nil
	case float32:
		return jinja.NewFloat(float64(x)), nil
	}
	return jinja.Value{}, fmt.Errorf("unsupported type %T", v)
}
