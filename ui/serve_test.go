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
