// Package chats keeps the studio's conversations: one JSON file per
// conversation in a folder, each replaced atomically after every change, so
// a crash or a full disk leaves every file either as it was or as it is
// now, never half written. A file that cannot be parsed is set aside and
// reported; the others still load. A message's images are files of their
// own beside them, each named by the SHA-256 of its bytes, written once
// and before any chat file that names them.
package chats

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/engine/chat"
)

// Roles of a conversation's messages. The system prompt is a field of the
// conversation, not a message, so that editing it never shifts indexes.
const (
	User      = "user"
	Assistant = "assistant"
	// Tool is a tool's result, which an API client sends back after the
	// assistant called it (the studio itself calls no tools).
	Tool = "tool"
	// Instruction is a system message inside an API client's
	// conversation (the first one is the conversation's System).
	Instruction = "system"
)

// roles are the roles a kept message may have.
var roles = []string{User, Assistant, Tool, Instruction}

// Conversation is one chat: its settings and its messages, oldest first.
type Conversation struct {
	// ID names the conversation's file; New makes one that sorts by
	// creation time.
	ID string `json:"id"`
	// Title is what the conversation list shows: the user's own, or the
	// start of the first user message.
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// System is the system prompt sent before the messages; "" sends none.
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	// Titled records that the user chose Title, so that editing the first
	// message does not replace it.
	Titled bool `json:"titled,omitempty"`
	// Adapter is the LoRA adapter the conversation's replies are written
	// with; nil runs the base model. Files written before adapters have
	// none.
	Adapter *Adapter `json:"adapter,omitempty"`
	// API is the API a client held the conversation through while the
	// studio's API server was on ("OpenAI" or "Ollama"); "" for the
	// studio's own chats.
	API string `json:"api,omitempty"`
}

// Adapter is a LoRA adapter applied to a conversation's model: a GGUF LoRA
// file or a PEFT folder, and the scale of its correction (1 is as
// trained).
type Adapter struct {
	Path  string  `json:"path"`
	Scale float32 `json:"scale"`
	// Model is the base model it was trained for, by library name, when
	// known ("Chat with this adapter" in the Tune tab sets it).
	Model string `json:"model,omitempty"`
}

// Message is one turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Images are the images of a user's message, shown to the model before
	// its text, each by its name in the store (Image); files written
	// before images have none.
	Images []Image `json:"images,omitempty"`
	// ToolCalls are the functions an assistant's reply called (an API
	// client's tools); Content is then what it wrote before them.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name say which call a Tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	// Reply describes how an assistant message was written; zero for a
	// user message.
	Reply Reply `json:"reply,omitzero"`
}

// ToolCall is a function an assistant called. Arguments is the JSON text
// of the call's arguments, kept as a string so the file holds it as the
// model wrote it.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
}

// ToolCallsOf are calls in the file's form.
func ToolCallsOf(calls []chat.ToolCall) []ToolCall {
	var out []ToolCall
	for _, c := range calls {
		out = append(out, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: string(c.Function.Arguments)})
	}
	return out
}

// Reply is what the studio knows about a generated message.
type Reply struct {
	Model string `json:"model,omitempty"`
	// PromptTokens is the whole rendered conversation the reply answered;
	// with Tokens, it is the context the turn used.
	PromptTokens    int     `json:"prompt_tokens,omitempty"`
	Tokens          int     `json:"tokens"`
	TokensPerSecond float64 `json:"tokens_per_second,omitempty"`
	// Stop is why the reply ended: "stop" (the model ended its turn),
	// "length" (the token limit or the context's end), "canceled" (the
	// user stopped it) or "error". It is "" while the reply is being
	// written, so a file that still says so after a restart holds a reply
	// cut short by a crash.
	Stop  string `json:"stop,omitempty"`
	Error string `json:"error,omitempty"`
}

// New starts a conversation with the given system prompt.
func New(system string, now time.Time) *Conversation {
	return &Conversation{ID: newID(now), Created: now, Updated: now, System: system}
}

// newID is the creation time and a random suffix, so that IDs sort by age,
// two chats made in the same second still differ, and the ID is safe as a
// file name on every platform.
func newID(now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// validID reports whether id can name a file in the folder: it must not
// reach outside it nor hide itself.
func validID(id string) bool {
	if id == "" || id[0] == '.' || len(id) > 128 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Add appends m. The first user message gives an untitled conversation
// its title.
func (c *Conversation) Add(m Message, now time.Time) {
	c.Messages = append(c.Messages, m)
	if !c.Titled && c.Title == "" {
		c.Title = c.firstTitle()
	}
	c.Updated = now
}

// Cut drops message i and every one after it: the start of editing a
// message and sending it again, or of writing a reply again.
func (c *Conversation) Cut(i int, now time.Time) {
	if i < 0 || i > len(c.Messages) {
		return
	}
	c.Messages = c.Messages[:i]
	if !c.Titled {
		c.Title = c.firstTitle()
	}
	c.Updated = now
}

// Rename sets the title; "" goes back to the first user message's start.
func (c *Conversation) Rename(title string, now time.Time) {
	title = strings.TrimSpace(title)
	c.Titled = title != ""
	c.Title = title
	if !c.Titled {
		c.Title = c.firstTitle()
	}
	c.Updated = now
}

// firstTitle is the title the first user message gives, "" if none. A
// message of images alone is titled by them.
func (c *Conversation) firstTitle() string {
	for _, m := range c.Messages {
		if m.Role != User {
			continue
		}
		title := TitleFrom(m.Content)
		switch n := len(m.Images); {
		case title != "" || n == 0:
		case n == 1:
			title = "An image"
		default:
			title = fmt.Sprintf("%d images", n)
		}
		return title
	}
	return ""
}

// Clone is a copy that shares nothing mutable with c, for writing on
// another goroutine while c changes.
func (c *Conversation) Clone() *Conversation {
	d := *c
	d.Messages = slices.Clone(c.Messages)
	for i := range d.Messages {
		d.Messages[i].Images = slices.Clone(d.Messages[i].Images)
	}
	if c.Adapter != nil {
		a := *c.Adapter
		d.Adapter = &a
	}
	return &d
}

// Chat is the conversation as the engine takes it: the system prompt, if
// any, then the messages. An image gives the bytes it holds, none when it
// was loaded with its chat (Store.ReadImages reads those), and is left
// out when it is missing.
func (c *Conversation) Chat() []chat.Message {
	out := make([]chat.Message, 0, len(c.Messages)+1)
	if c.System != "" {
		out = append(out, chat.Message{Role: "system", Content: c.System})
	}
	for _, m := range c.Messages {
		cm := chat.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			call := chat.ToolCall{ID: tc.ID, Type: "function", Function: chat.FunctionCall{Name: tc.Name}}
			if tc.Arguments != "" {
				call.Function.Arguments = json.RawMessage(tc.Arguments)
			}
			cm.ToolCalls = append(cm.ToolCalls, call)
		}
		for _, im := range m.Images {
			if !im.Missing {
				cm.Images = append(cm.Images, chat.Image{Data: im.Data, Ref: im.Ref})
			}
		}
		out = append(out, cm)
	}
	return out
}

// titleRunes bounds a title taken from a message: about what a
// conversation list shows in one line.
const titleRunes = 48

// TitleFrom is a title made from the start of text: its first non-blank
// line, cut at a word boundary near titleRunes.
func TitleFrom(text string) string {
	line := ""
	for l := range strings.Lines(text) {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	line = strings.Join(strings.Fields(line), " ")
	if utf8.RuneCountInString(line) <= titleRunes {
		return line
	}
	r := []rune(line)[:titleRunes]
	cut := string(r)
	if i := strings.LastIndexByte(cut, ' '); i > titleRunes/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " .,;:") + "…"
}
