package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestBenchTableUnits checks a small model's size and parameters read in
// units that suit them: the table printed "0.00 GiB" and "0.00 B" for
// every test model.
func TestBenchTableUnits(t *testing.T) {
	m := tinyModel(t, "tiny-llama")
	out, log, err := runModelCmd(t, "", "bench", "-m", m, "--backend", "cpu", "-p", "4", "-n", "2", "-r", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and rows pp4 and tg2, got:\n%s", out)
	}
	// tiny-llama has 1,443,104 parameters (hearth inspect); at Q8_0's 8.5
	// bits each its weights are about 1.5 MB, so KiB or MiB.
	row := regexp.MustCompile(`\s\d+(\.\d+)? (KiB|MiB)\s+1\.44M\s`)
	for _, l := range lines[1:] {
		if !row.MatchString(l) {
			t.Errorf("row %q: want the size in KiB or MiB and 1.44M parameters", l)
		}
	}
}

// TestBenchDepth checks that -d starts the decode test from that much
// history: the test is named for it, and a depth that leaves no room for
// the tokens in the context is refused, naming the flags.
func TestBenchDepth(t *testing.T) {
	m := tinyModel(t, "tiny-llama")
	out, log, err := runModelCmd(t, "", "bench", "-m", m, "--backend", "cpu", "-p", "0", "-n", "2", "-d", "16", "-r", "1", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(out, `"tg2@d16"`) {
		t.Errorf("want a tg2@d16 result, got:\n%s", out)
	}
	_, _, err = runModelCmd(t, "", "bench", "-m", m, "--backend", "cpu", "-p", "0", "-n", "2", "-d", "40", "--ctx", "32", "-r", "1")
	if err == nil || !strings.Contains(err.Error(), "-d 40") {
		t.Errorf("-d 40 in a 32-token context: %v, want an error naming -d", err)
	}
}

// TestBenchProfile: --profile prints where a decoded token's GPU time
// goes, by kernel (and puts it in --json); on the CPU it is refused, naming
// the flag.
func TestBenchProfile(t *testing.T) {
	m := tinyModel(t, "tiny-llama")
	out, log, err := runModelCmd(t, "", "bench", "-m", m, "--backend", "gpu", "-p", "0", "-n", "2", "-r", "1", "--profile")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(out, "decode profile:") || !strings.Contains(out, "rope_qkv.rope_qkv") {
		t.Errorf("no profile by kernel in:\n%s", out)
	}
	out, log, err = runModelCmd(t, "", "bench", "-m", m, "--backend", "gpu", "-p", "0", "-n", "2", "-r", "1", "--profile", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(out, `"decode_profile"`) {
		t.Errorf("no decode_profile in --json:\n%s", out)
	}
	if _, _, err := runModelCmd(t, "", "bench", "-m", m, "--backend", "cpu", "-p", "0", "-n", "2", "-r", "1", "--profile"); err == nil || !strings.Contains(err.Error(), "--profile") {
		t.Errorf("--profile on the CPU: %v, want an error naming --profile", err)
	}
}
