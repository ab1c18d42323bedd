package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/hearthstudio/hearth/engine/structured"
)

// ToolSyntax is how a model family writes function calls in its reply:
// the syntax its chat template teaches it (ToolSyntaxFor). The formats are
// those llama.cpp's common/chat.cpp and Ollama's tools parser read.
type ToolSyntax int

const (
	// ToolsJSON is a reply that is nothing but one or more JSON objects
	// {"name": …, "parameters"|"arguments": {…}} (or a list of them),
	// optionally after Llama 3.x's <|python_tag|> or in a ```json fence:
	// Llama 3.x, and the plain form any template without markers gets.
	ToolsJSON ToolSyntax = iota
	// ToolsHermes is <tool_call>{"name": …, "arguments": {…}}</tool_call>,
	// once per call, after any text: Qwen 2.5 and 3, Hermes 2/3.
	ToolsHermes
	// ToolsMistral is [TOOL_CALLS] and then a JSON list of calls (v0.3:
	// [{"name": …, "arguments": {…}, "id": …}]) or, from the v11
	// tokenizer on, name[ARGS]{…} once per call.
	ToolsMistral
	// ToolsPhi4 is Phi-4-mini's functools[{"name": …, "arguments": {…}}, …].
	ToolsPhi4
)

func (s ToolSyntax) String() string {
	switch s {
	case ToolsHermes:
		return "hermes"
	case ToolsMistral:
		return "mistral"
	case ToolsPhi4:
		return "phi4"
	}
	return "json"
}

// The markers that open calls, as the tokenizer writes them.
const (
	hermesOpen   = "<tool_call>"
	hermesClose  = "</tool_call>"
	mistralCalls = "[TOOL_CALLS]"
	mistralArgs  = "[ARGS]"
	phi4Open     = "functools["
	pythonTag    = "<|python_tag|>"
)

// ToolSyntaxFor is the syntax a chat template's source teaches: the
// markers it writes around the tool calls of an assistant turn.
func ToolSyntaxFor(template string) ToolSyntax {
	switch {
	case strings.Contains(template, hermesOpen):
		return ToolsHermes
	case strings.Contains(template, mistralCalls):
		return ToolsMistral
	case strings.Contains(template, "functools"):
		return ToolsPhi4
	}
	return ToolsJSON
}

// Markers are the special tokens of the syntax that the decoder must write
// as text (it drops control tokens otherwise), so that the parser sees
// where calls begin.
func (s ToolSyntax) Markers() []string {
	switch s {
	case ToolsMistral:
		return []string{mistralCalls, mistralArgs}
	case ToolsJSON:
		return []string{pythonTag}
	}
	return nil
}

// Held is how much of a reply streamed so far must be held back from the
// client as a call that may be starting: text[len(text)-Held(text):] is
// withheld, the rest is plain content. Once a call opens, everything from
// its opening on is held until the reply ends and Parse decides.
func (s ToolSyntax) Held(text string) int {
	switch s {
	case ToolsJSON:
		// A call is the whole reply: hold it all while it may be one.
		t := strings.TrimLeftFunc(text, unicode.IsSpace)
		if t == "" || strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") || strings.HasPrefix(t, "```") ||
			strings.HasPrefix(pythonTag, t) || strings.HasPrefix(t, pythonTag) || strings.HasPrefix("```", t) {
			return len(text)
		}
		return 0
	case ToolsMistral:
		// v0.3's list may also come without its marker, as the whole reply.
		t := strings.TrimLeftFunc(text, unicode.IsSpace)
		if t == "" || strings.HasPrefix(t, "[") {
			return len(text)
		}
	}
	open := s.opening()
	if i := strings.Index(text, open); i >= 0 {
		return len(text) - i
	}
	// The end of text may be the start of the marker.
	for n := min(len(open)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, open[:n]) {
			return n
		}
	}
	return 0
}

func (s ToolSyntax) opening() string {
	switch s {
	case ToolsHermes:
		return hermesOpen
	case ToolsMistral:
		return mistralCalls
	case ToolsPhi4:
		return phi4Open
	}
	return pythonTag
}

// Parse splits a finished reply into its text and its calls. The text is
// what comes before the first call (trimmed of the space around it); a
// reply whose calls are not well-formed JSON of the syntax is returned
// whole as text with no calls, as a model's malformed output must not
// fail the request.
func (s ToolSyntax) Parse(reply string) (string, []ToolCall) {
	var text string
	var calls []ToolCall
	var ok bool
	switch s {
	case ToolsHermes:
		text, calls, ok = parseHermes(reply)
	case ToolsMistral:
		text, calls, ok = parseMistral(reply)
	case ToolsPhi4:
		text, calls, ok = parsePhi4(reply)
	default:
		calls, ok = parseJSONCalls(reply)
	}
	if !ok || len(calls) == 0 {
		return reply, nil
	}
	return strings.TrimSpace(text), calls
}

func parseHermes(reply string) (string, []ToolCall, bool) {
	i := strings.Index(reply, hermesOpen)
	if i < 0 {
		return reply, nil, false
	}
	text, rest := reply[:i], reply[i:]
	var calls []ToolCall
	for {
		rest = strings.TrimSpace(rest)
		if rest == "" {
			return text, calls, true
		}
		body, ok := strings.CutPrefix(rest, hermesOpen)
		if !ok {
			return "", nil, false // text after the calls
		}
		j := strings.Index(body, hermesClose)
		if j < 0 {
			// A reply cut at the stop token may lack the last close tag.
			j = len(body)
		}
		c, ok := parseCall([]byte(strings.TrimSpace(body[:j])))
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
		rest = body[min(j+len(hermesClose), len(body)):]
	}
}

func parseMistral(reply string) (string, []ToolCall, bool) {
	text, rest := "", strings.TrimSpace(reply)
	if i := strings.Index(reply, mistralCalls); i >= 0 {
		text, rest = reply[:i], strings.TrimSpace(reply[i+len(mistralCalls):])
	} else if !strings.HasPrefix(rest, "[") {
		return reply, nil, false
	}
	if strings.HasPrefix(rest, "[") && !strings.HasPrefix(rest, mistralArgs) {
		calls, ok := parseJSONCalls(rest)
		return text, calls, ok
	}
	// name[ARGS]{…}, repeated, each after its own [TOOL_CALLS].
	var calls []ToolCall
	for _, part := range strings.Split(rest, mistralCalls) {
		name, args, ok := strings.Cut(strings.TrimSpace(part), mistralArgs)
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return "", nil, false
		}
		raw := []byte(strings.TrimSpace(args))
		if !json.Valid(raw) || !isObject(raw) {
			return "", nil, false
		}
		calls = append(calls, ToolCall{Type: "function", Function: FunctionCall{Name: name, Arguments: compact(raw)}})
	}
	return text, calls, true
}

func parsePhi4(reply string) (string, []ToolCall, bool) {
	i := strings.Index(reply, phi4Open)
	if i < 0 {
		return reply, nil, false
	}
	calls, ok := parseJSONCalls(reply[i+len(phi4Open)-1:]) // from the '['
	return reply[:i], calls, ok
}

// parseJSONCalls reads a reply that is only calls: JSON objects, or lists
// of them, one after another (separated by space, ';' or ','), after an
// optional <|python_tag|> and inside an optional ```json fence.
func parseJSONCalls(reply string) ([]ToolCall, bool) {
	t := strings.TrimSpace(reply)
	t = strings.TrimSpace(strings.TrimPrefix(t, pythonTag))
	if rest, ok := strings.CutPrefix(t, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		body, ok := strings.CutSuffix(strings.TrimSpace(rest), "```")
		if !ok {
			return nil, false
		}
		t = strings.TrimSpace(body)
	}
	if t == "" {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(t))
	var calls []ToolCall
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) == nil {
			for _, item := range list {
				c, ok := parseCall(item)
				if !ok {
					return nil, false
				}
				calls = append(calls, c)
			}
		} else {
			c, ok := parseCall(raw)
			if !ok {
				return nil, false
			}
			calls = append(calls, c)
		}
		rest := strings.TrimLeft(t[dec.InputOffset():], " \t\r\n;,")
		if rest == "" {
			return calls, true
		}
		dec = json.NewDecoder(strings.NewReader(rest))
		t = rest
	}
}

// parseCall reads one call object: {"name", "arguments"|"parameters"},
// OpenAI's {"type": "function", "function": {…}}, with an optional "id".
// The arguments may be an object or a string holding one.
func parseCall(raw []byte) (ToolCall, bool) {
	var c struct {
		ID         string          `json:"id"`
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
		Function   *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &c) != nil {
		return ToolCall{}, false
	}
	name, args := c.Name, c.Arguments
	if args == nil {
		args = c.Parameters
	}
	if c.Function != nil && name == "" {
		name, args = c.Function.Name, c.Function.Arguments
	}
	if name == "" {
		return ToolCall{}, false
	}
	if args == nil || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(s) // a string holding the object
	}
	if !json.Valid(args) || !isObject(args) {
		return ToolCall{}, false
	}
	return ToolCall{ID: c.ID, Type: "function", Function: FunctionCall{Name: name, Arguments: compact(args)}}, true
}

func isObject(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// Forced is the schema of a reply that is one call, in s's syntax, to the
// function named name, or to any of tools when name is "": what OpenAI's
// tool_choice "required" or a named function holds the reply to
// (engine/structured). A function whose parameters use what structured
// output cannot enforce is an error naming it.
func (s ToolSyntax) Forced(tools []json.RawMessage, name string) (*structured.Schema, error) {
	argsKey, prefix, suffix := "arguments", "", ""
	switch s {
	case ToolsJSON:
		argsKey = "parameters" // as Llama 3's template asks
	case ToolsHermes:
		prefix, suffix = hermesOpen+"\n", "\n"+hermesClose
	case ToolsMistral:
		// v0.3's list, whose [TOOL_CALLS] marker is a control token that
		// writes no text; Parse reads the bare list.
		prefix, suffix = "[", "]"
	case ToolsPhi4:
		prefix, suffix = phi4Open, "]"
	}
	var calls []*structured.Schema
	for i, raw := range tools {
		var t struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.Function.Name == "" {
			return nil, fmt.Errorf("chat: tools[%d] is not a function definition with a name", i)
		}
		if name != "" && t.Function.Name != name {
			continue
		}
		c, err := structured.Call(t.Function.Name, argsKey, t.Function.Parameters)
		if err != nil {
			return nil, fmt.Errorf("chat: tools[%d]: %w", i, err)
		}
		calls = append(calls, c)
	}
	if len(calls) == 0 {
		if name != "" {
			return nil, fmt.Errorf("chat: no tool is named %q", name)
		}
		return nil, fmt.Errorf("chat: a call is required but no tools were given")
	}
	return structured.AnyOf(calls...).Between(prefix, suffix), nil
}
