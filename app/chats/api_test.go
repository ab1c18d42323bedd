package chats

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/chat"
)

// weatherCall is a tool call as a client sends it.
func weatherCall(id, args string) chat.ToolCall {
	return chat.ToolCall{ID: id, Type: "function", Function: chat.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(args)}}
}

// keptCall is the same call in the file's form.
func keptCall(id, args string) []ToolCall {
	return []ToolCall{{ID: id, Name: "get_weather", Arguments: args}}
}

// TestRecordFollowsAToolConversation: an agent's three requests (a
// question, the tool's result, a follow-up) make one conversation, the
// tool call and its result kept; the client sends the arguments back
// reformatted, keys reordered, and its own copy of the reply without stats.
func TestRecordFollowsAToolConversation(t *testing.T) {
	sys := chat.Message{Role: "system", Content: "You are terse."}
	q := chat.Message{Role: "user", Content: "Weather in Oslo?"}
	call := Message{Role: Assistant, ToolCalls: keptCall("call_1", `{"city": "Oslo", "unit": "c"}`), Reply: Reply{Model: "tiny", Stop: "stop"}}
	c, isNew := Record(nil, Exchange{API: "OpenAI", Messages: []chat.Message{sys, q}, Reply: call}, nil, t0)
	if !isNew || c.API != "OpenAI" || c.System != sys.Content || c.Title != "Weather in Oslo?" || len(c.Messages) != 2 {
		t.Fatalf("first request: new %v, conversation %+v", isNew, c)
	}
	convs := []*Conversation{c, sample("", t0, "an unrelated chat of the studio's own")}

	// Compacted and its keys sorted, as Ollama's Go client sends a map back.
	sentCall := chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{weatherCall("call_1", `{"unit":"c","city":"Oslo"}`)}}
	result := chat.Message{Role: "tool", Content: `{"temp": -3}`, ToolCallID: "call_1"}
	answer := Message{Role: Assistant, Content: "-3 °C.", Reply: Reply{Model: "tiny", Stop: "stop"}}
	got, isNew := Record(convs, Exchange{API: "OpenAI", Messages: []chat.Message{sys, q, sentCall, result}, Reply: answer}, nil, t0.Add(time.Minute))
	if isNew || got != c {
		t.Fatalf("the tool's result started another conversation")
	}
	want := []Message{
		{Role: User, Content: q.Content},
		call,
		{Role: Tool, Content: result.Content, ToolCallID: "call_1"},
		answer,
	}
	if !reflect.DeepEqual(c.Messages, want) {
		t.Fatalf("messages\n got %+v\nwant %+v", c.Messages, want)
	}
	if !c.Updated.Equal(t0.Add(time.Minute)) {
		t.Errorf("updated %v", c.Updated)
	}

	// A follow-up continues it again; the same history under another
	// system prompt, or with a different call, is another conversation.
	more := chat.Message{Role: "user", Content: "And tomorrow?"}
	if got, isNew := Record(convs, Exchange{API: "OpenAI", Messages: []chat.Message{sys, q, sentCall, result, {Role: "assistant", Content: answer.Content}, more}, Reply: answer}, nil, t0); isNew || got != c || len(c.Messages) != 6 {
		t.Fatalf("the follow-up: new %v, %d messages", isNew, len(c.Messages))
	}
	other := chat.Message{Role: "system", Content: "You are verbose."}
	if _, isNew := Record(convs, Exchange{API: "OpenAI", Messages: []chat.Message{other, q}, Reply: answer}, nil, t0); !isNew {
		t.Error("another system prompt continued the conversation")
	}
	wrong := chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{weatherCall("call_1", `{"city":"Bergen"}`)}}
	if _, isNew := Record(convs, Exchange{API: "OpenAI", Messages: []chat.Message{sys, q, wrong, result}, Reply: answer}, nil, t0); !isNew {
		t.Error("a different call continued the conversation")
	}
}

// TestRecordLeavesTheStudiosChatsAlone: a request whose history matches a
// chat the studio holds itself, or the one it is writing a reply in,
// starts a conversation of its own.
func TestRecordLeavesTheStudiosChatsAlone(t *testing.T) {
	own := sample("", t0, "hello")
	reply := Message{Role: Assistant, Content: "hi", Reply: Reply{Stop: "stop"}}
	if c, isNew := Record([]*Conversation{own}, Exchange{API: "Ollama", Messages: []chat.Message{{Role: "user", Content: "hello"}}, Reply: reply}, nil, t0); !isNew || c == own || len(own.Messages) != 1 {
		t.Fatal("the studio's own chat was continued")
	}
	api, _ := Record(nil, Exchange{API: "Ollama", Messages: []chat.Message{{Role: "user", Content: "hello"}}, Reply: reply}, nil, t0)
	x := Exchange{API: "Ollama", Messages: []chat.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}, {Role: "user", Content: "again"}}, Reply: reply}
	c, isNew := Record([]*Conversation{api}, x, api, t0)
	if !isNew || c == api {
		t.Fatal("the conversation the studio is writing in was continued")
	}
	// The client's copy of a reply is kept as a finished one, not as one
	// a crash cut short (Stop "").
	if m := c.Messages[1]; m.Role != Assistant || m.Reply.Stop != "stop" {
		t.Errorf("the client's reply is kept as %+v", m)
	}
}

// TestRecordPrefersTheLongestHistory: two API conversations that share a
// start (a client that asked the same first question twice): the request
// continues the one it repeats the most of.
func TestRecordPrefersTheLongestHistory(t *testing.T) {
	reply := Message{Role: Assistant, Content: "hi", Reply: Reply{Stop: "stop"}}
	hello := []chat.Message{{Role: "user", Content: "hello"}}
	short, _ := Record(nil, Exchange{API: "Ollama", Messages: hello, Reply: reply}, nil, t0)
	long, _ := Record(nil, Exchange{API: "Ollama", Messages: hello, Reply: reply}, nil, t0)
	long.Add(Message{Role: User, Content: "again"}, t0)
	long.Add(reply, t0)
	x := Exchange{API: "Ollama", Messages: append(hello, chat.Message{Role: "assistant", Content: "hi"}, chat.Message{Role: "user", Content: "again"}, chat.Message{Role: "assistant", Content: "hi"}, chat.Message{Role: "user", Content: "third"}), Reply: reply}
	if c, _ := Record([]*Conversation{short, long}, x, nil, t0); c != long {
		t.Fatal("the shorter shared history was continued")
	}
}

// TestToolMessagesRoundTrip: tool calls and results are kept in the file
// and given back to the engine as they came.
func TestToolMessagesRoundTrip(t *testing.T) {
	s := openStore(t)
	c := New("", t0)
	c.API = "OpenAI"
	c.Add(Message{Role: User, Content: "Weather?"}, t0)
	c.Add(Message{Role: Assistant, ToolCalls: keptCall("call_9", `{"city":"Oslo"}`), Reply: Reply{Stop: "stop"}}, t0)
	c.Add(Message{Role: Tool, Content: "-3", ToolCallID: "call_9", Name: "get_weather"}, t0)
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	convs, bad, err := s.Load()
	if err != nil || len(bad) > 0 || len(convs) != 1 {
		t.Fatalf("load: %v %v %d", err, bad, len(convs))
	}
	if !reflect.DeepEqual(convs[0], c) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", convs[0], c)
	}
	msgs := convs[0].Chat()
	if got := msgs[1].ToolCalls; len(got) != 1 || got[0].ID != "call_9" || string(got[0].Function.Arguments) != `{"city":"Oslo"}` {
		t.Errorf("the engine gets tool calls %+v", got)
	}
	if msgs[2].Role != "tool" || msgs[2].ToolCallID != "call_9" || msgs[2].Name != "get_weather" {
		t.Errorf("the engine gets the result %+v", msgs[2])
	}
}
