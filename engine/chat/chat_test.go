package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// renders is testdata/renders.json, made by testdata/make_renders.py with
// Jinja2 configured as transformers' apply_chat_template configures it.
type renders struct {
	Special       map[string]string `json:"special"`
	Now           string            `json:"now"`
	Conversations map[string]struct {
		Messages            json.RawMessage   `json:"messages"`
		Tools               []json.RawMessage `json:"tools"`
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
	} `json:"conversations"`
	WhitespaceVars map[string]json.RawMessage `json:"whitespace_vars"`
	Whitespace     []snippet                  `json:"whitespace"`
	FuncsVars      map[string]json.RawMessage `json:"funcs_vars"`
	Funcs          []snippet                  `json:"funcs"`
	Cases          []struct {
		Name         string `json:"name"`
		File         string `json:"file"`
		JSONLLine    int    `json:"jsonl_line"`
		Builtin      string `json:"builtin"`
		Conversation string `json:"conversation"`
		Render       string `json:"render"`
		Error        string `json:"error"`
	} `json:"cases"`
}

// snippet is a small template and Jinja2's render of it.
type snippet struct {
	Template, Render string
}

func loadRenders(t *testing.T) *renders {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "renders.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r renders
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// jsonlTemplates are the templates of templates.jsonl in file order.
func jsonlTemplates(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sharedtest.Dir(t, "templates"), "templates.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]string
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		for _, src := range m {
			out = append(out, src)
		}
	}
	return out
}

// TestRenderMatchesJinja2 renders every real template (and the built-in
// fallbacks) for the reference conversations and compares with Jinja2's
// output byte for byte, including the templates that refuse a
// conversation through raise_exception.
func TestRenderMatchesJinja2(t *testing.T) {
	r := loadRenders(t)
	jsonl := jsonlTemplates(t)
	now, err := time.Parse("2006-01-02T15:04:05", r.Now)
	if err != nil {
		t.Fatal(err)
	}
	matched := 0
	for _, c := range r.Cases {
		var src string
		switch {
		case c.File != "":
			b, err := os.ReadFile(filepath.Join(sharedtest.Dir(t, "templates"), c.File))
			if err != nil {
				t.Fatal(err)
			}
			src = string(b)
		case c.Builtin != "":
			src = builtinSource(c.Builtin)
			if src == "" {
				t.Fatalf("%s: no built-in template %q", c.Name, c.Builtin)
			}
		default:
			src = jsonl[c.JSONLLine-1]
		}
		tmpl, err := Parse(c.Name, src)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		conv := r.Conversations[c.Conversation]
		var msgs []Message
		if err := json.Unmarshal(conv.Messages, &msgs); err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(Request{
			Messages: msgs, Tools: conv.Tools, AddGenerationPrompt: conv.AddGenerationPrompt,
			BOS: r.Special["bos_token"], EOS: r.Special["eos_token"],
			Vars: map[string]any{"unk_token": r.Special["unk_token"], "pad_token": r.Special["pad_token"]},
			Now:  func() time.Time { return now },
		})
		switch {
		case c.Error != "":
			var te *TemplateError
			if err == nil || !errors.As(err, &te) || te.Message != c.Error {
				t.Errorf("%s/%s: got %q, %v; want raise_exception(%q)", c.Name, c.Conversation, clip(got), err, c.Error)
				continue
			}
		case err != nil:
			t.Errorf("%s/%s: %v", c.Name, c.Conversation, err)
			continue
		case got != c.Render:
			t.Errorf("%s/%s:\n got %q\nwant %q", c.Name, c.Conversation, got, c.Render)
			continue
		}
		matched++
	}
	t.Logf("%d/%d renders match Jinja2", matched, len(r.Cases))
}

// TestSnippetsMatchJinja2 checks the whitespace pass on templates made to
// exercise each of Jinja2's rules, and tojson and strftime_now against
// transformers' versions (json.dumps, datetime.strftime).
func TestSnippetsMatchJinja2(t *testing.T) {
	r := loadRenders(t)
	now, err := time.Parse("2006-01-02T15:04:05", r.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []struct {
		name     string
		vars     map[string]json.RawMessage
		snippets []snippet
	}{{"whitespace", r.WhitespaceVars, r.Whitespace}, {"funcs", r.FuncsVars, r.Funcs}} {
		vars := map[string]any{}
		for k, v := range set.vars {
			vars[k] = v
		}
		for i, w := range set.snippets {
			tmpl, err := Parse(set.name, w.Template)
			if err != nil {
				t.Errorf("%s %d %q: %v", set.name, i, w.Template, err)
				continue
			}
			got, err := tmpl.Render(Request{Vars: vars, Now: func() time.Time { return now }})
			if err != nil {
				t.Errorf("%s %d %q: %v", set.name, i, w.Template, err)
				continue
			}
			if got != w.Render {
				t.Errorf("%s %d %q:\n got %q\nwant %q", set.name, i, w.Template, got, w.Render)
			}
		}
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
