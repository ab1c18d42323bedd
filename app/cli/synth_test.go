package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/gguf"
)

func runSynth(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newSynthCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestSynthList(t *testing.T) {
	out, err := runSynth(t, "--list")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range synth.Presets() {
		if !strings.Contains(out, p.Name) {
			t.Errorf("--list does not name %s:\n%s", p.Name, out)
		}
	}
	if !strings.Contains(out, "8.03B") || !strings.Contains(out, "Q4_K_M") {
		t.Errorf("--list lacks the 8B's parameter count or the quant columns:\n%s", out)
	}

	out, err = runSynth(t, "--list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []synthListEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(entries) != len(synth.Presets()) {
		t.Fatalf("%d entries, want %d", len(entries), len(synth.Presets()))
	}
	for i, p := range synth.Presets() {
		e := entries[i]
		if e.Name != p.Name || e.Params != p.ParamCount() || e.Hidden != p.Hidden {
			t.Errorf("entry %d: %+v, want %s with %d parameters", i, e, p.Name, p.ParamCount())
		}
		// More bits a weight, a bigger file.
		if !(e.FileSizes["Q4_0"] < e.FileSizes["Q8_0"] && e.FileSizes["Q8_0"] < e.FileSizes["F16"]) {
			t.Errorf("%s: sizes %v are not in order", p.Name, e.FileSizes)
		}
	}
}

func TestSynthWrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	out, err := runSynth(t, "--preset", "tiny-gemma3", "--quant", "q8_0", "--seed", "3", "-o", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep synthReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := synth.PresetByName("tiny-gemma3")
	if rep.Output != path || rep.Preset != "tiny-gemma3" || rep.Arch != "gemma3" || rep.Quant != "Q8_0" ||
		rep.Seed != 3 || rep.FileSize != st.Size() || rep.Params != p.ParamCount() {
		t.Errorf("report %+v for a %d-byte file", rep, st.Size())
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if ft, _ := f.FileType(); ft.String() != rep.FileType || len(f.Tensors()) != rep.TensorCount {
		t.Errorf("file type %v and %d tensors, report says %s and %d", ft, len(f.Tensors()), rep.FileType, rep.TensorCount)
	}
	f.Close()
	first, _ := os.ReadFile(path)

	// The same seed writes the same file; the text report names it.
	out, err = runSynth(t, "--preset", "tiny-gemma3", "--quant", "Q8_0", "--seed", "3", "-o", path)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(first, again) {
		t.Error("the same seed wrote a different file")
	}
	if !strings.HasPrefix(out, "wrote "+path+": tiny-gemma3") || !strings.Contains(out, "Q8_0") {
		t.Errorf("text report:\n%s", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %v, want the model alone", entries)
	}
}

func TestSynthErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", out}, "--preset is required"},
		{[]string{"--preset", "tiny-llama"}, "-o FILE.gguf is required"},
		{[]string{"--preset", "llama-9000", "-o", out}, `unknown preset "llama-9000"`},
		{[]string{"--preset", "tiny-llama", "--quant", "Q9", "-o", out}, `unknown quantize type "Q9"`},
		{[]string{"--preset", "tiny-qwen2", "--quant", "Q4_K", "--strict", "-o", out}, `tensor "blk.0.attn_q.weight": rows of 96 values`},
		{[]string{"--preset", "tiny-llama", "-o", out, "extra"}, "unknown command"},
	} {
		_, err := runSynth(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("synth %v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed synth left %s", out)
	}
}

// TestSynthSizeReadsAsInTheStudio checks the command line and the studio
// write a file's size the same way: synth said "906.02 KB" of the file the
// studio listed as "885 KiB".
func TestSynthSizeReadsAsInTheStudio(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	out, log, err := runModelCmd(t, "", "synth", "--preset", "tiny-llama", "--quant", "Q4_K_M", "-o", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if studio := settings.FormatSize(fi.Size()); !strings.Contains(out, "  "+studio+" in ") {
		t.Errorf("synth reports the %d-byte file without the studio's %q:\n%s", fi.Size(), studio, out)
	}
}
