package data

import (
	"errors"
	"strings"
	"testing"
)

func TestBadInputNamesTheLine(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	good := `{"text": "fine"}`
	for _, tc := range []struct {
		name, data string
		o          Options
		want       string
	}{
		{"malformed JSON", good + "\n" + good + "\n" + `{"text": "a"`, Options{}, "x.jsonl:3: malformed JSON at column 13: unexpected end of JSON input"},
		{"trailing garbage", good + "\n" + `{"text": "a"} x`, Options{}, "x.jsonl:2: malformed JSON at column 16: invalid character 'x'"},
		{"none of the formats", good + "\n" + `{"input": "a", "output": "b"}`, Options{}, `x.jsonl:2: none of the formats`},
		{"not an object", `"just a string"`, Options{}, "x.jsonl:1: not a JSON object"},
		{"a JSON array", "[\n" + good + "\n]", Options{}, "x.jsonl:1: a JSON array"},
		{"unknown role", good + "\n" + `{"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]}`, Options{}, `x.jsonl:2: messages[1]: unknown role "bot"`},
		{"no role", `{"messages": [{"content": "a"}]}`, Options{}, `x.jsonl:1: messages[0]: no "role"`},
		{"unknown ShareGPT speaker", `{"conversations": [{"from": "narrator", "value": "a"}]}`, Options{}, `x.jsonl:1: conversations[0]: unknown "from" "narrator"`},
		{"messages not a list", `{"messages": "hi"}`, Options{}, `x.jsonl:1: "messages" is not a list of messages`},
		{"an image part", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, Options{}, `x.jsonl:1: messages[0]: a "image_url" part`},
		{"tool arguments not JSON", `{"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]}`, Options{}, `x.jsonl:1: messages[0]: tool call "f": arguments are a string that is not JSON`},
		{"prompt without completion", `{"prompt": "a"}`, Options{}, `x.jsonl:1: "prompt" without "completion"`},
		{"completion without prompt", `{"completion": "a"}`, Options{}, `x.jsonl:1: "completion" without "prompt"`},
		{"text not a string", good + "\n\n" + `{"text": 5}`, Options{}, `x.jsonl:3: "text" is not a string`},
		{"empty file", "", Options{}, "x.jsonl: empty dataset: no samples"},
		{"blank lines only", "\n \n\t\n", Options{}, "x.jsonl: empty dataset: no samples"},
		{"nothing to train on", `{"messages": [{"role": "user", "content": "a"}]}` + "\n" + `{"text": ""}`, Options{}, "x.jsonl: empty dataset: all 2 samples were skipped (line 1: no assistant message)"},
		{"a line too long", good + "\n" + `{"text": "` + strings.Repeat("a", 2000) + `"}` + "\n" + good, Options{MaxLineBytes: 1000}, "x.jsonl:2: line longer than 1000 bytes"},
		{"sequence length", good, Options{SeqLen: 1}, "sequence length 1: want at least 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.SeqLen == 0 {
				tc.o.SeqLen = 32
			}
			_, _, err := readString(t, "x.jsonl", tc.data, tok, f, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLineLongerThanTheDefaultLimit(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	// 17 MiB of one line: refused at 16 MiB, naming the line, with the
	// scanner's buffer capped there rather than growing to the line.
	data := `{"text": "ok"}` + "\n" + `{"text": "` + strings.Repeat("x", 17<<20) + `"}`
	_, _, err := readString(t, "big.jsonl", data, tok, f, Options{SeqLen: 32})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(err.Error(), "big.jsonl:2: line longer than 16 MiB") {
		t.Fatalf("error %v", err)
	}
}

func TestChatNeedsAFormat(t *testing.T) {
	tok, _ := tinyModel(t, "tiny-llama")
	_, _, err := readString(t, "c.jsonl", `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}`, tok, nil, Options{SeqLen: 32})
	if err == nil || !strings.Contains(err.Error(), "c.jsonl:1: a conversation, and no chat format was given") {
		t.Fatalf("error %v", err)
	}
}

func TestEmptyTextFile(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	_, _, err := readString(t, "e.txt", "\xef\xbb\xbf \n\n", tok, f, Options{SeqLen: 32})
	if err == nil || !strings.Contains(err.Error(), "e.txt: empty dataset") {
		t.Fatalf("error %v", err)
	}
}

func TestSkippedAndTruncatedAreCountedWithLines(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	long := strings.Repeat("the hearth and the house ", 20)
	data := strings.Join([]string{
		`{"text": "short"}`,
		`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "no answer"}]}`,
		`{"text": "` + long + `"}`,
		`{"prompt": "` + long + `", "completion": " lost"}`,
		`{"text": ""}`,
		`{"text": "also short"}`,
	}, "\n")
	const seqLen = 32

	d, rep, err := readString(t, "m.jsonl", data, tok, f, Options{SeqLen: seqLen, Valid: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Line 3 is cut to the sequence length and kept; line 4 is cut
	// before its completion, so nothing of it is trained and it is
	// skipped.
	if rep.Truncated != 2 || rep.TruncatedLines[0].Line != 3 || rep.TruncatedLines[1].Line != 4 {
		t.Errorf("truncated %d: %v", rep.Truncated, rep.TruncatedLines)
	}
	wantSkipped := []Note{{2, "no assistant message"}, {4, "no trained token in the first 32"}, {5, "empty text"}}
	if rep.Skipped != 3 || len(rep.SkippedLines) != 3 {
		t.Fatalf("skipped %d: %v", rep.Skipped, rep.SkippedLines)
	}
	for i, n := range wantSkipped {
		if rep.SkippedLines[i] != n {
			t.Errorf("skipped %v, want %v", rep.SkippedLines[i], n)
		}
	}
	if rep.Samples != 3 || len(d.Train.Samples) != 3 {
		t.Errorf("%d samples kept, want 3", rep.Samples)
	}
	for _, s := range d.Train.Samples {
		if len(s.Tokens) > seqLen {
			t.Errorf("line %d has %d tokens", s.Line, len(s.Tokens))
		}
		if s.Line == 3 && s.Targets[seqLen-1] < 0 {
			t.Error("the truncated sample's last position lost its target")
		}
	}
	if s := rep.String(); !strings.Contains(s, "line 3: ") || !strings.Contains(s, "line 2: no assistant message") {
		t.Errorf("report text:\n%s", s)
	}

	// With DropLong the long sample is skipped instead.
	_, rep, err = readString(t, "m.jsonl", data, tok, f, Options{SeqLen: seqLen, Valid: -1, DropLong: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Truncated != 0 || rep.Skipped != 4 || rep.Samples != 2 || rep.SkippedLines[1].Line != 3 {
		t.Errorf("DropLong: %s", rep)
	}
}
