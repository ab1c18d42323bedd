package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// tokenizerModel writes a GGUF holding only a tokenizer (the small
// SentencePiece model engine/tokenizer's tests train) and returns its path.
func tokenizerModel(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "engine", "tokenizer", "testdata", "spm-unk-ws.model"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.FromSentencePiece(data)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tok.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w := gguf.NewWriter(out)
	if err := w.SetString("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	if err := v.WriteGGUF(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func runHearth(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot(func() error { return nil })
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestTokenizeDetokenize(t *testing.T) {
	model := tokenizerModel(t)
	text := "The little princess <ctrl>"

	out, err := runHearth(t, "tokenize", "-m", model, "--json", text)
	if err != nil {
		t.Fatal(err)
	}
	var rep tokenizeReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(rep.IDs) == 0 || len(rep.Tokens) != len(rep.IDs) || rep.Tokens[0].Piece == "" {
		t.Fatalf("tokenize --json: %s", out)
	}
	for _, tk := range rep.Tokens {
		if tk.Type == "control" {
			t.Errorf("without --special, %q became control token %d", "<ctrl>", tk.ID)
		}
	}

	// --special reads "<ctrl>" as the control token; --add-special adds BOS.
	out, err = runHearth(t, "tokenize", "-m", model, "--special", "--add-special", text)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "1\t") || !strings.Contains(lines[len(lines)-1], `"<ctrl>"`) {
		t.Errorf("tokenize --special --add-special:\n%s", out)
	}

	args := []string{"detokenize", "-m", model, "--json"}
	for _, id := range rep.IDs {
		args = append(args, strconv.Itoa(int(id)))
	}
	out, err = runHearth(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Text string }
	if err := json.Unmarshal([]byte(out), &back); err != nil || back.Text != text {
		t.Errorf("detokenize --json = %s (%v), want %q", out, err, text)
	}

	if _, err := runHearth(t, "detokenize", "-m", model, "1,x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("detokenize of a non-number: %v", err)
	}
	if _, err := runHearth(t, "detokenize", "-m", model, "99999"); err == nil {
		t.Error("detokenize of an id outside the vocabulary: no error")
	}
}
