package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/internal/visiontest"
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

// TestChatAndGenerateWithImages: --image shows tiny-gemma3 an image, read
// with the mmproj file beside it: the prompt grows by the image's 16
// tokens and its framing; a file that is not an image, or a model with no
// projector, is refused by name; /image attaches one in the interactive
// chat, and a bad one there is reported without ending the chat.
func TestChatAndGenerateWithImages(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "tiny-gemma3.gguf")
	if err := os.Link(tinyModel(t, "tiny-gemma3"), m); err != nil {
		t.Fatal(err)
	}
	pp, _ := synth.ProjectorPresetByName("tiny-gemma3-vision")
	if err := synth.WriteProjector(filepath.Join(dir, "mmproj-tiny-gemma3-f16.gguf"), pp, 1); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "cat.png")
	if err := os.WriteFile(img, visiontest.PNG(20, 12, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	notImage := filepath.Join(dir, "notes.png")
	if err := os.WriteFile(notImage, []byte("not a picture"), 0o644); err != nil {
		t.Fatal(err)
	}
	prompts := func(log string) (n int) {
		i := strings.LastIndex(log, "[")
		if i < 0 {
			t.Fatalf("no statistics line:\n%s", log)
		}
		fmt.Sscanf(log[i:], "[%d+", &n)
		return n
	}
	base := []string{"chat", "-m", m, "-p", "What is it?", "--temp", "0", "-n", "3", "--backend", "cpu"}
	_, log, err := runModelCmd(t, "", base...)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	_, logImage, err := runModelCmd(t, "", append(base, "--image", img)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, logImage)
	}
	if d := prompts(logImage) - prompts(log); d < 18 {
		t.Errorf("the image added %d prompt tokens, want its 16 and the framing", d)
	}
	if _, _, err := runModelCmd(t, "", append(base, "--image", notImage)...); err == nil || !strings.Contains(err.Error(), "notes.png") {
		t.Errorf("a text file as an image: %v, want an error naming it", err)
	}
	// Gemma 3's projector makes 16 tokens of every image: no budget.
	if _, _, err := runModelCmd(t, "", append(base, "--image", img, "--image-tokens", "70")...); err == nil || !strings.Contains(err.Error(), "only Gemma 4's take a token budget") {
		t.Errorf("--image-tokens on Gemma 3: %v, want a refusal", err)
	}
	out, log, err := runModelCmd(t, "", "generate", "-m", m, "-p", "A picture: "+chat.ImageMarker+" shows", "--image", img, "--temp", "0", "-n", "2", "--backend", "cpu", "--json")
	if err != nil {
		t.Fatalf("generate: %v\n%s", err, log)
	}
	var rep generateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.PromptTokens < 20 {
		t.Errorf("generate --image: %v, report %+v", err, rep)
	}

	// No projector beside the model.
	lone := filepath.Join(t.TempDir(), "tiny-gemma3.gguf")
	if err := os.Link(m, lone); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runModelCmd(t, "", "chat", "-m", lone, "-p", "Hi", "--image", img, "--backend", "cpu"); !errors.Is(err, app.ErrNoProjector) {
		t.Errorf("no projector: %v, want ErrNoProjector", err)
	}

	// Interactive: a bad /image is reported and the chat goes on.
	_, log, err = runModelCmd(t, "/image "+notImage+"\n/image "+img+"\nWhat is it?\n", "chat", "-m", m, "--temp", "0", "-n", "2", "--backend", "cpu")
	if err != nil {
		t.Fatalf("interactive: %v\n%s", err, log)
	}
	if !strings.Contains(log, "notes.png") || !strings.Contains(log, "1 image(s) go with the next message") || prompts(log) < prompts(logImage)-2 {
		t.Errorf("interactive /image:\n%s", log)
	}
}
