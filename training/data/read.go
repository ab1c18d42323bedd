package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hearthstudio/hearth/engine/chat"
)

// LineError is an error in one line of a dataset.
type LineError struct {
	Path string
	Line int // from 1; 0 when the error is not in one line
	Err  error
}

// Error names the file and the line, as compilers do: "data.jsonl:3: …".
func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// kind is a sample's format.
type kind int

const (
	kindChat             kind = iota // messages or conversations; prompt/completion as messages
	kindPromptCompletion             // prompt and completion strings
	kindText                         // text
)

// record is one parsed line of a JSONL file.
type record struct {
	line int
	kind kind
	// chat
	msgs  []chat.Message
	train []bool // the loss is on msgs[i]
	tools []json.RawMessage
	// prompt/completion and text
	prompt, completion, text string
}

// jsonLine is the keys of the formats; a key that is absent stays nil.
type jsonLine struct {
	Messages      json.RawMessage `json:"messages"`
	Conversations json.RawMessage `json:"conversations"`
	Prompt        json.RawMessage `json:"prompt"`
	Completion    json.RawMessage `json:"completion"`
	Text          json.RawMessage `json:"text"`
	Tools         json.RawMessage `json:"tools"`
}

// jsonMessage is an OpenAI message, or a ShareGPT one (from, value).
type jsonMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []jsonToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Name             string          `json:"name"`

	From  string          `json:"from"`
	Value json.RawMessage `json:"value"`
}

type jsonToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

var bom = []byte("\xef\xbb\xbf")

// readJSONL calls fn with each non-blank line of r and its number. A line
// longer than max bytes is an error naming it; bufio.Scanner stops at max,
// so such a line never sits whole in memory.
func readJSONL(r io.Reader, path string, max int, fn func(line int, b []byte) error) error {
	sc := bufio.NewScanner(r)
	// The limit is the larger of max and the buffer's capacity.
	sc.Buffer(make([]byte, 0, min(64<<10, max)), max)
	n := 0
	for sc.Scan() {
		n++
		b := sc.Bytes()
		if n == 1 {
			b = bytes.TrimPrefix(b, bom)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if err := fn(n, b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &LineError{path, n + 1, fmt.Errorf("line longer than %s (Options.MaxLineBytes)", sizeText(max))}
		}
		return &LineError{path, 0, err}
	}
	return nil
}

func sizeText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// parseLine reads one JSONL line into a record. The error says what is
// wrong with the line; the caller adds the file and line number.
func parseLine(b []byte) (record, error) {
	b = bytes.TrimSpace(b)
	switch {
	case b[0] == '[':
		return record{}, errors.New("a JSON array, not an object: JSONL holds one object per line")
	case b[0] != '{':
		if !json.Valid(b) {
			return record{}, malformed(b)
		}
		return record{}, errors.New("not a JSON object")
	}
	var l jsonLine
	if err := json.Unmarshal(b, &l); err != nil {
		return record{}, malformed(b)
	}
	var rec record
	switch {
	case present(l.Messages):
		msgs, err := parseMessages(l.Messages, "messages")
		if err != nil {
			return record{}, err
		}
		rec = chatRecord(msgs, 0)
	case present(l.Conversations):
		msgs, err := parseMessages(l.Conversations, "conversations")
		if err != nil {
			return record{}, err
		}
		rec = chatRecord(msgs, 0)
	case present(l.Prompt) || present(l.Completion):
		if !present(l.Prompt) {
			return record{}, errors.New(`"completion" without "prompt"`)
		}
		if !present(l.Completion) {
			return record{}, errors.New(`"prompt" without "completion"`)
		}
		if isArray(l.Prompt) || isArray(l.Completion) {
			// TRL's conversational prompt/completion: the loss on the
			// completion's assistant messages.
			p, err := parseMessages(l.Prompt, "prompt")
			if err != nil {
				return record{}, err
			}
			c, err := parseMessages(l.Completion, "completion")
			if err != nil {
				return record{}, err
			}
			rec = chatRecord(append(p, c...), len(p))
			break
		}
		rec.kind = kindPromptCompletion
		if err := json.Unmarshal(l.Prompt, &rec.prompt); err != nil {
			return record{}, errors.New(`"prompt" is not a string or a list of messages`)
		}
		if err := json.Unmarshal(l.Completion, &rec.completion); err != nil {
			return record{}, errors.New(`"completion" is not a string or a list of messages`)
		}
	case present(l.Text):
		rec.kind = kindText
		if err := json.Unmarshal(l.Text, &rec.text); err != nil {
			return record{}, errors.New(`"text" is not a string`)
		}
	default:
		return record{}, errors.New(`none of the formats: want "messages", "conversations", "prompt" and "completion", or "text"`)
	}
	if rec.kind == kindChat && present(l.Tools) {
		if err := json.Unmarshal(l.Tools, &rec.tools); err != nil {
			return record{}, errors.New(`"tools" is not a list of objects`)
		}
	}
	return rec, nil
}

// malformed describes why b is not JSON, with the column (from 1) of the
// byte where it fails.
func malformed(b []byte) error {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("malformed JSON at column %d: %v", se.Offset+1, se)
	}
	if err != nil {
		return fmt.Errorf("malformed JSON: %v", err)
	}
	return errors.New("malformed JSON")
}

func present(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }

func isArray(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) > 0 && r[0] == '['
}

// chatRecord is a conversation with the loss on the assistant messages
// from index from on.
func chatRecord(msgs []chat.Message, from int) record {
	rec := record{kind: kindChat, msgs: msgs, train: make([]bool, len(msgs))}
	for i := from; i < len(msgs); i++ {
		rec.train[i] = msgs[i].Role == "assistant"
	}
	return rec
}

// shareGPTRoles maps ShareGPT's "from" to roles.
var shareGPTRoles = map[string]string{
	"system": "system",
	"human":  "user", "user": "user",
	"gpt": "assistant", "assistant": "assistant", "model": "assistant", "chatgpt": "assistant",
	"tool": "tool", "function": "tool", "observation": "tool",
}

// parseMessages reads a list of OpenAI or ShareGPT messages under key.
func parseMessages(raw json.RawMessage, key string) ([]chat.Message, error) {
	var list []jsonMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%q is not a list of messages", key)
	}
	msgs := make([]chat.Message, 0, len(list))
	for i, jm := range list {
		m, err := message(jm)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func message(jm jsonMessage) (chat.Message, error) {
	m := chat.Message{
		Role:             jm.Role,
		ReasoningContent: jm.ReasoningContent,
		ToolCallID:       jm.ToolCallID,
		Name:             jm.Name,
	}
	content := jm.Content
	if jm.Role == "" && jm.From != "" {
		role, ok := shareGPTRoles[strings.ToLower(jm.From)]
		if !ok {
			return chat.Message{}, fmt.Errorf(`unknown "from" %q (want human, gpt, system or tool)`, jm.From)
		}
		m.Role, content = role, jm.Value
	}
	switch m.Role {
	case "system", "user", "assistant", "tool":
	case "":
		return chat.Message{}, errors.New(`no "role"`)
	default:
		return chat.Message{}, fmt.Errorf("unknown role %q (want system, user, assistant or tool)", m.Role)
	}
	var err error
	if m.Content, err = contentText(content); err != nil {
		return chat.Message{}, err
	}
	for _, tc := range jm.ToolCalls {
		args, err := arguments(tc.Function.Arguments)
		if err != nil {
			return chat.Message{}, fmt.Errorf("tool call %q: %w", tc.Function.Name, err)
		}
		m.ToolCalls = append(m.ToolCalls, chat.ToolCall{
			ID: tc.ID, Type: tc.Type,
			Function: chat.FunctionCall{Name: tc.Function.Name, Arguments: args},
		})
	}
	return m, nil
}

// contentText is a message's content: a string, null (an assistant that
// only calls tools), or OpenAI's list of parts, of which only text parts
// can be trained on.
func contentText(raw json.RawMessage) (string, error) {
	if !present(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New(`"content" is not a string or a list of parts`)
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("a %q part: only text can be trained on", p.Type)
		}
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

// arguments is a tool call's arguments as a JSON object; OpenAI sends them
// as a string holding the JSON, which is decoded here as chat.FunctionCall
// asks.
func arguments(raw json.RawMessage) (json.RawMessage, error) {
	if !present(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if !json.Valid([]byte(s)) {
			return nil, errors.New("arguments are a string that is not JSON")
		}
		return json.RawMessage(s), nil
	}
	return raw, nil
}
