package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/training"
)

// TestTrainCommand: hearth train on the sample dataset writes a GGUF
// adapter and its checkpoint and prints a JSON line per report; --resume
// with more steps continues from the checkpoint's step with its settings
// (no --rank given, the checkpoint's rank 4 is kept), and the adapter
// loads with --lora.
func TestTrainCommand(t *testing.T) {
	dir := t.TempDir()
	p, _ := synth.PresetByName("tiny-qwen2")
	base := filepath.Join(dir, "base.gguf")
	if err := synth.WriteFile(base, p, synth.Options{Quant: "Q8_0", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join("..", "..", "assets", "datasets", "answer-format.jsonl")
	out := filepath.Join(dir, "tuned.gguf")
	args := []string{"train", "-m", base, "-d", data, "-o", out, "--rank", "4", "--alpha", "8",
		"--seq-len", "48", "--batch", "2", "--steps", "2", "--lr", "1e-2", "--json"}
	t.Setenv("HEARTH_ADAPTER", "")
	stdout, stderr, err := execute(NewRoot(nil), args...)
	if err != nil {
		t.Fatal(err)
	}
	// On a software adapter (lavapipe, as on CI) it says so first.
	if adapters, err := gpu.Adapters(gpu.Options{}); err == nil && len(adapters) > 0 && adapters[0].Type == "cpu" {
		if want := "training on " + adapters[0].Label() + ": Hearth trains only on a GPU"; !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	var phases []string
	var res trainResult
	moving := map[string][]progressJSON{} // the reports of a phase under way
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var line progressJSON
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		switch {
		case line.Phase == "":
			if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
		case line.Total > 0:
			moving[line.Phase] = append(moving[line.Phase], line)
		case line.Phase != "saving":
			phases = append(phases, line.Phase)
		}
	}
	if res.Step != 2 || res.Adapter != out || res.Loss <= 0 {
		t.Fatalf("result %+v; phases %v", res, phases)
	}
	if !strings.Contains(strings.Join(phases, " "), "train train valid checkpoint done") {
		t.Errorf("phases %v", phases)
	}
	// The upload and the first step (a submit per pass: its length is not
	// known yet) report their done and total as they go.
	for _, ph := range []string{"load", "step"} {
		r := moving[ph]
		if len(r) < 2 || r[len(r)-1].Done != r[len(r)-1].Total || r[0].Done >= r[1].Done {
			t.Errorf("%s: %d reports %+v, want done rising to total", ph, len(r), r)
		}
	}
	st, err := training.ReadState(out + ".checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if st.Step != 2 || st.Settings.LoRA.Rank != 4 {
		t.Errorf("checkpoint state %+v", st)
	}

	// Running again without --resume would overwrite the checkpoint.
	if _, _, err := execute(NewRoot(nil), args...); err == nil || !strings.Contains(err.Error(), "resume it") {
		t.Errorf("a second run onto the checkpoint: %v", err)
	}
	stdout, _, err = execute(NewRoot(nil), "train", "-m", base, "-d", data, "-o", out, "--resume", "--steps", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "trained 3 steps") {
		t.Errorf("resumed run printed %q", stdout)
	}
	if st, err = training.ReadState(out + ".checkpoint"); err != nil || st.Step != 3 || st.Settings.LoRA.Rank != 4 {
		t.Errorf("after the resume: %+v, %v", st, err)
	}
	if _, _, err := execute(NewRoot(nil), "generate", "-m", base, "--lora", out, "-p", "hi", "-n", "2", "--backend", "cpu"); err != nil {
		t.Errorf("generating with the adapter: %v", err)
	}
}

// TestTrainCommandRefuses: missing flags, an unknown preset and a missing
// dataset are errors that say what to do.
func TestTrainCommandRefuses(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		wants string
	}{
		{[]string{"train", "-d", empty, "-o", "x.gguf"}, "needs -m MODEL"},
		{[]string{"train", "-m", "x.gguf", "-d", empty, "-o", "x.gguf", "--preset", "fast"}, "quick"},
		{[]string{"train", "-m", "x.gguf", "-d", empty, "-o", filepath.Join(dir, "y.gguf"), "--resume"}, "y.gguf.checkpoint"},
	} {
		if _, _, err := execute(NewRoot(nil), c.args...); err == nil || !strings.Contains(err.Error(), c.wants) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.wants)
		}
	}
}
