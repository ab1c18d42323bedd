package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// modelDir holds the synth models of this test binary; each is written
// once, on first use.
var (
	modelDir  string
	modelsMu  sync.Mutex
	modelByID = map[string]*model.Model{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hearth-data-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	modelDir = dir
	code := m.Run()
	for _, mm := range modelByID {
		mm.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// tinyModel is a synth model of preset, loaded as a user's model is: its
// tokenizer and chat format come from the GGUF metadata.
func tinyModel(t testing.TB, preset string) (*tokenizer.Tokenizer, *chat.Format) {
	t.Helper()
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if m, ok := modelByID[preset]; ok {
		return m.Tokenizer, m.Chat
	}
	p, ok := synth.PresetByName(preset)
	if !ok {
		t.Fatalf("no preset %s", preset)
	}
	path := filepath.Join(modelDir, preset+".gguf")
	if err := synth.WriteFile(path, p, synth.Options{Quant: "Q8_0", Seed: 7}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	modelByID[preset] = m
	return m.Tokenizer, m.Chat
}

// readString reads a dataset held in a string.
func readString(t testing.TB, name, content string, tok *tokenizer.Tokenizer, f *chat.Format, o Options) (*Dataset, Report, error) {
	t.Helper()
	return Read(strings.NewReader(content), name, tok, f, o)
}

// decode is the text of ids, special tokens written out.
func decode(t testing.TB, tok *tokenizer.Tokenizer, ids []int32) string {
	t.Helper()
	s, err := tok.Decode(ids, tokenizer.DecodeOptions{Special: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// trainedText is the text of the tokens a sample trains on, each run of
// consecutive trained tokens one string.
func trainedText(t testing.TB, tok *tokenizer.Tokenizer, s Sample) []string {
	t.Helper()
	var runs []string
	var cur []int32
	for i, tg := range s.Targets {
		if tg >= 0 {
			if tg != s.Tokens[i+1] {
				t.Fatalf("line %d: target %d at %d is not the next token %d", s.Line, tg, i, s.Tokens[i+1])
			}
			cur = append(cur, tg)
			continue
		}
		if len(cur) > 0 {
			runs = append(runs, decode(t, tok, cur))
			cur = nil
		}
	}
	if len(cur) > 0 {
		runs = append(runs, decode(t, tok, cur))
	}
	return runs
}
