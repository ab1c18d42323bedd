package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/model"
)

// TestChatReplyDefaultLimit: a reply that never reaches an end of turn
// stops at defaultReplyTokens and says so; without a default it ran on to
// the context's end. tiny-gemma's greedy reply to "Hi" has no end of turn
// before its 2048-token context is full.
func TestChatReplyDefaultLimit(t *testing.T) {
	m := tinyModel(t, "tiny-gemma")
	_, log, err := runModelCmd(t, "", "chat", "-m", m, "-p", "Hi", "--temp", "0", "--backend", "cpu")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var prompt, generated int
	i := strings.LastIndex(log, "[")
	if i < 0 {
		t.Fatalf("no statistics line:\n%s", log)
	}
	if _, err := fmt.Sscanf(log[i:], "[%d+%d tokens", &prompt, &generated); err != nil {
		t.Fatalf("statistics %q: %v", log[i:], err)
	}
	if generated != defaultReplyTokens || !strings.Contains(log, fmt.Sprintf("cut at %d tokens", defaultReplyTokens)) {
		t.Errorf("a reply of %d tokens, want %d and a note that it was cut:\n%s", generated, defaultReplyTokens, log)
	}
}

// TestChatReplyEndsAtTheTurn: the reply's request stops at the end-of-turn
// token the model names (session_test shows a stop ID ends generation).
func TestChatReplyEndsAtTheTurn(t *testing.T) {
	m, err := model.Load(tinyModel(t, "tiny-llama"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	eot, err := m.File.Uint32("tokenizer.ggml.eot_token_id")
	if err != nil {
		t.Fatal(err)
	}
	req := (&chatLoop{l: &app.LoadedModel{Model: m}, n: defaultReplyTokens}).request("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")
	if !slices.Contains(req.StopIDs, int32(eot)) || req.MaxTokens != defaultReplyTokens {
		t.Errorf("stop IDs %v, max %d; want the end of turn %d and %d", req.StopIDs, req.MaxTokens, eot, defaultReplyTokens)
	}
}

// TestChatStructuredReply: --schema and --json hold the reply to JSON; a
// random model's reply parses and has the schema's shape.
func TestChatStructuredReply(t *testing.T) {
	m := tinyModel(t, "tiny-qwen3")
	schema := filepath.Join(t.TempDir(), "weather.json")
	if err := os.WriteFile(schema, []byte(`{"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
		"unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, log, err := runModelCmd(t, "", "chat", "-m", m, "-p", "Weather?", "--schema", schema, "--seed", "3", "-n", "300", "--backend", "cpu")
	if err != nil || strings.Contains(log, "cut at") {
		t.Fatalf("%v\n%s", err, log)
	}
	var w struct {
		City string `json:"city"`
		Unit string `json:"unit"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || len([]rune(w.City)) > 8 || (w.Unit != "c" && w.Unit != "f") {
		t.Errorf("--schema: %q: %v", out, err)
	}
	out, log, err = runModelCmd(t, "", "chat", "-m", m, "-p", "Weather?", "--json", "--seed", "4", "-n", "300", "--backend", "cpu")
	var obj map[string]any
	if err != nil || strings.Contains(log, "cut at") {
		t.Fatalf("--json: %v\n%s", err, log)
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		t.Errorf("--json: %q: %v", out, err)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"type": "string", "pattern": "^a"}`), 0o644)
	if _, _, err := runModelCmd(t, "", "chat", "-m", m, "-p", "x", "--schema", bad, "--backend", "cpu"); err == nil || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), "pattern") {
		t.Errorf("a schema with a pattern: %v", err)
	}
	if _, _, err := runModelCmd(t, "", "chat", "-m", m, "-p", "x", "--schema", schema, "--json", "--backend", "cpu"); err == nil {
		t.Error("--json with --schema was accepted")
	}
}
