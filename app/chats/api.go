package chats

import (
	"encoding/json"
	"reflect"
	"slices"
	"time"

	"github.com/hearthstudio/hearth/engine/chat"
)

// Exchange is one chat request the studio's API server answered: a
// client's conversation so far and the model's reply. API clients are
// stateless, each request carrying the whole history, so Record finds
// the conversation a request continues by its messages.
type Exchange struct {
	API      string         // "OpenAI" or "Ollama"
	Messages []chat.Message // as the model read them, a system prompt first if any
	Reply    Message        // the assistant's reply, with its tool calls (ToolCallsOf) and Reply
}

// Record keeps x in convs: the API conversation whose messages x's begin
// with (its system prompt the same) gains x's later messages and reply,
// or, when none does, a new conversation holds them. It returns that
// conversation and whether it is new (the caller adds it to its list);
// skip, when not nil, names a conversation not to continue (one the
// studio is writing a reply in). A tool call is matched by its function
// and arguments, not its ID: an Ollama client's calls have none.
func Record(convs []*Conversation, x Exchange, skip *Conversation, now time.Time) (c *Conversation, isNew bool) {
	system, msgs := "", x.Messages
	if len(msgs) > 0 && msgs[0].Role == "system" {
		system, msgs = msgs[0].Content, msgs[1:]
	}
	rest := make([]Message, 0, len(msgs)+1)
	for _, m := range msgs {
		k := Message{Role: m.Role, Content: m.Content, Images: imagesOf(m.Images), ToolCalls: ToolCallsOf(m.ToolCalls), ToolCallID: m.ToolCallID, Name: m.Name}
		if k.Role == Assistant {
			// A reply the client sends back is a finished one; Stop ""
			// would read as a reply cut short by a crash.
			k.Reply.Stop = "stop"
		}
		rest = append(rest, k)
	}
	var best *Conversation
	for _, c := range convs {
		if c == skip || c.API == "" || c.System != system || len(c.Messages) > len(rest) {
			continue
		}
		if !slices.EqualFunc(c.Messages, rest[:len(c.Messages)], sameTurn) {
			continue
		}
		// The longest history wins; of equal ones, the latest.
		if best == nil || len(c.Messages) > len(best.Messages) || len(c.Messages) == len(best.Messages) && c.Updated.After(best.Updated) {
			best = c
		}
	}
	if best == nil {
		best, isNew = New(system, now), true
		best.API = x.API
	}
	for _, m := range rest[len(best.Messages):] {
		best.Add(m, now)
	}
	best.Add(x.Reply, now)
	return best, isNew
}

// sameTurn says whether a kept message and one a client sent back are the
// same turn: role, text, images, the tool calls' functions and arguments,
// and the call a tool result answers.
func sameTurn(kept, sent Message) bool {
	if kept.Role != sent.Role || kept.Content != sent.Content || kept.ToolCallID != sent.ToolCallID && kept.ToolCallID != "" {
		return false
	}
	if !slices.EqualFunc(kept.Images, sent.Images, func(a, b Image) bool { return a.Ref == b.Ref }) {
		return false
	}
	return slices.EqualFunc(kept.ToolCalls, sent.ToolCalls, func(a, b ToolCall) bool {
		return a.Name == b.Name && sameJSON(a.Arguments, b.Arguments)
	})
}

// sameJSON compares two JSON texts as values: a client may send the
// arguments back reformatted, or with the keys reordered (Ollama's Go
// client holds them in a map and sorts them). Text that is not JSON
// compares as it is.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return a == b
	}
	return reflect.DeepEqual(va, vb)
}
