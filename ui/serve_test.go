package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/chats"
	"github.com/hearthstudio/hearth/app/server"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
)

// switchAPIOn ticks the status bar's API server switch and returns it with
// the server's URL.
func switchAPIOn(t *testing.T, st *studio, w fyne.Window, l *uiLoop) (*widget.Check, string) {
	t.Helper()
	var check *widget.Check
	var url string
	l.wait(func() {
		check = find(w.Content(), func(c *widget.Check) bool { return c.Text == "API server" })
		check.SetChecked(true)
		url = st.api.url
	})
	if url == "" {
		t.Fatalf("the API server did not start; dialogs: %s", dialogs(w))
	}
	return check, url
}

// TestStudioServesTheAPI: the status bar's switch starts the API on the
// studio's engine with the library's models, stops it, and remembers the
// choice; an address off this computer is refused with a message.
func TestStudioServesTheAPI(t *testing.T) {
	st, w, l := modelsStudio(t, func(st *studio) {
		withFolder(modelFolder(t))(st)
		st.settings.ServerAddr = "127.0.0.1:0" // any free port
	})
	eventually(t, l, "the library", func() bool { return len(st.entries) == 2 })
	check, url := switchAPIOn(t, st, w, l)
	resp, err := http.Get(url + "/api/tags")
	if err != nil {
		t.Fatal(err)
	}
	var tags struct {
		Models []struct{ Name string } `json:"models"`
	}
	json.NewDecoder(resp.Body).Decode(&tags)
	resp.Body.Close()
	if len(tags.Models) != 2 {
		t.Errorf("/api/tags lists %+v, want the library's two models", tags.Models)
	}
	body := `{"model": "tiny-llama", "max_tokens": 3, "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}`
	resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(reply), `"completion_tokens":3`) {
		t.Errorf("chat completion: %d %s", resp.StatusCode, reply)
	}
	// The reply ran on the studio's engine: its model is the studio's now.
	if m := st.engine.Status().Model; m == nil || m.Name != "tiny-llama" {
		t.Errorf("the studio's engine holds %+v after the API request", m)
	}
	if !savedSettings(t, st).Serve {
		t.Error("the server's switch is not kept in the settings")
	}

	l.wait(func() { check.SetChecked(false) })
	if _, err := http.Get(url + "/api/tags"); err == nil {
		t.Error("the API still answers after the switch is off")
	}

	l.wait(func() {
		st.settings.ServerAddr = "0.0.0.0:11435"
		check.SetChecked(true)
	})
	eventually(t, l, "the refusal", func() bool { return strings.Contains(dialogs(w), "serves only this computer") })
	l.wait(func() {
		if check.Checked || st.api.srv != nil {
			t.Error("the server started on a network address")
		}
	})
}

// TestTurningTheServerOffDoesNotWaitForAReply: the switch stops taking
// requests at once and leaves a reply in progress to finish in the
// background. Waiting for it on the UI goroutine froze the window for up
// to the 3 s grace period.
func TestTurningTheServerOffDoesNotWaitForAReply(t *testing.T) {
	st, w, l := modelsStudio(t, func(st *studio) { st.settings.ServerAddr = "127.0.0.1:0" })
	check, url := switchAPIOn(t, st, w, l)
	entered, release := make(chan struct{}), make(chan struct{})
	var slow http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})
	st.api.handler.Store(&slow)
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-entered
	// The handler holds until release is closed below, so a switch that
	// waited for the reply never returns, and one that waited out the
	// shutdown grace cut the reply off and fails the "done" check at the
	// end; no clock is read, so load cannot fail the test. The 30 s only
	// turns a hang into a failure.
	off := make(chan struct{})
	go func() {
		l.wait(func() { check.SetChecked(false) })
		close(off)
	}()
	select {
	case <-off:
	case <-time.After(30 * time.Second):
		t.Fatal("turning the server off waits on the UI goroutine for the reply in progress")
	}
	select {
	case s := <-got:
		t.Fatalf("the reply in progress ended (%q) before its handler returned", s)
	default:
	}
	if _, err := http.Get(url + "/api/tags"); err == nil {
		t.Error("the API still takes requests after the switch is off")
	}
	close(release)
	if s := <-got; s != "done" {
		t.Errorf("the reply in progress got %q, want it finished", s)
	}
}

// TestAPIChatsShowInTheChatTab: a chat an API client holds through the
// studio's server is kept in the Chat tab under its API's name and saved;
// the client's later requests (a tool call, the tool's result) continue
// that conversation, the call and the result shown folded.
func TestAPIChatsShowInTheChatTab(t *testing.T) {
	st, w, l := modelsStudio(t, func(st *studio) {
		withFolder(modelFolder(t))(st)
		st.settings.ServerAddr = "127.0.0.1:0"
	})
	eventually(t, l, "the library", func() bool { return len(st.entries) == 2 })
	_, url := switchAPIOn(t, st, w, l)
	body := `{"model": "tiny-llama", "max_tokens": 3, "temperature": 0, "messages": [{"role": "user", "content": "Weather in Oslo?"}]}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var c *chats.Conversation
	eventually(t, l, "the API's chat in the list", func() bool {
		for _, x := range st.chat.convs {
			if x.API == "OpenAI" {
				c = x
			}
		}
		return c != nil
	})
	var first string
	l.wait(func() {
		if len(c.Messages) != 2 || c.Messages[1].Reply.Tokens != 3 || c.Messages[1].Reply.Model != "tiny-llama" {
			t.Fatalf("kept %+v", c.Messages)
		}
		if got := displayTitle(c); got != "Weather in Oslo? (OpenAI API)" {
			t.Errorf("listed as %q", got)
		}
		first = c.Messages[1].Content
	})

	// The client goes on (a random model calls no tool, so the replies
	// are given as the server would record them).
	q := chat.Message{Role: "user", Content: "Weather in Oslo?"}
	a := chat.Message{Role: "assistant", Content: first}
	ask := chat.Message{Role: "user", Content: "Use the tool."}
	call := chat.ToolCall{ID: "call_7", Type: "function", Function: chat.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}
	result := chat.Message{Role: "tool", Content: `{"temp": -3}`, ToolCallID: "call_7"}
	l.wait(func() {
		st.chat.recordAPI(server.Exchange{API: "OpenAI", Messages: []chat.Message{q, a, ask},
			Reply: app.Reply{Model: "tiny-llama", ToolCalls: []chat.ToolCall{call}, Stats: model.Stats{Stop: "stop", Generated: 9}}})
		st.chat.recordAPI(server.Exchange{API: "OpenAI", Messages: []chat.Message{q, a, ask, {Role: "assistant", ToolCalls: []chat.ToolCall{call}}, result},
			Reply: app.Reply{Model: "tiny-llama", Text: "-3 °C.", Stats: model.Stats{Stop: "stop", Generated: 4}}})
		st.chat.open(c)
	})
	l.wait(func() {
		if len(c.Messages) != 6 || len(st.chat.rows) != 6 {
			t.Fatalf("%d messages, %d rows, want 6: %+v", len(c.Messages), len(st.chat.rows), c.Messages)
		}
		calls := find(st.chat.rows[3].box, func(*widget.Accordion) bool { return true })
		if calls == nil || len(calls.Items) != 1 || calls.Items[0].Title != "Called get_weather" || calls.Items[0].Open {
			t.Errorf("the call's row: %+v", calls)
		} else if args := calls.Items[0].Detail.(*widget.Label).Text; args != "{\n  \"city\": \"Oslo\"\n}" {
			t.Errorf("the call's arguments show as %q", args)
		}
		if meta := st.chat.rows[3].meta.Text; !strings.Contains(meta, "1 tool call") {
			t.Errorf("the call's header %q", meta)
		}
		res := find(st.chat.rows[4].box, func(*widget.Accordion) bool { return true })
		if res == nil || len(res.Items) != 1 || res.Items[0].Title != "Result of get_weather" || res.Items[0].Open {
			t.Errorf("the result's row: %+v", res)
		}
		// The last reply answers a tool's result, which the studio cannot
		// run again: Regenerate would only delete it.
		if !st.chat.regenerate.Disabled() {
			t.Error("Regenerate is enabled on a reply to a tool's result")
		}
	})
	var dir string
	l.wait(func() {
		st.chat.saver.Flush()
		dir = st.chat.store.Dir()
	})
	s, err := chats.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	convs, bad, err := s.Load()
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	for _, k := range convs {
		if k.API == "OpenAI" && len(k.Messages) == 6 && k.Messages[3].ToolCalls[0].Name == "get_weather" && k.Messages[4].ToolCallID == "call_7" {
			return
		}
	}
	t.Errorf("the API's chat was not saved with its tool call: %+v", convs)
}
