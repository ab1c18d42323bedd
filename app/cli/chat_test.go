package cli

import (
	"fmt"
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
