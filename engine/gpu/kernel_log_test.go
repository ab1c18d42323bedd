package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/shaders"
)

// kernelCheckEnv names the directory of logs that
// TestEveryEntryPointIsDispatched checks; `make test` sets it, after the
// suite has run with KernelLogEnv set to the same directory.
const kernelCheckEnv = "HEARTH_KERNEL_CHECK"

// TestEveryEntryPointIsDispatched is the kernel registry check, in the manner
// of ggml's test-backend-ops: every compute entry point in shaders/ must be
// dispatched by at least one test of the suite, where each is compared with
// its CPU reference. It reads the logs the suite's test binaries wrote, so it
// runs only as `make test`'s last step (it would see a partial suite
// otherwise).
func TestEveryEntryPointIsDispatched(t *testing.T) {
	dir := os.Getenv(kernelCheckEnv)
	if dir == "" {
		t.Skipf("%s is unset: make test runs this check after the whole suite has logged its dispatches", kernelCheckEnv)
	}
	dispatched, err := readKernelLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(dispatched) == 0 {
		t.Fatalf("no dispatches logged in %s: was the suite run with %s=%s?", dir, KernelLogEnv, dir)
	}
	entries, err := shaders.EntryPoints()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, e := range entries {
		if !dispatched[e] {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d entry points in shaders/ are dispatched by no test; give each a test against its CPU reference (engine/ops), or delete it if nothing calls it:\n\t%s",
			len(missing), len(entries), strings.Join(missing, "\n\t"))
	}
}

// TestKernelLogRecordsEachRun dispatches through a device with a log of its
// own and reads the log back: each name once; a second run of the binary (a
// fresh log over the same directory) replaces the first's list, unless it
// dispatched nothing.
func TestKernelLogRecordsEachRun(t *testing.T) {
	if !startedByGoTest() {
		t.Skip("only a test binary that go test started records its dispatches")
	}
	dir := t.TempDir()
	t.Setenv(KernelLogEnv, dir)
	saved := dev.kernelLog
	t.Cleanup(func() { dev.kernelLog = saved })
	bx, by := newF32(t, "x", []float32{1, 2, 3}), newF32(t, "y", make([]float32, 3))
	k := shiftKernel(t, 64)
	run := func(adds ...float32) {
		t.Helper()
		dev.kernelLog = &kernelLog{}
		c, err := dev.NewChain("log")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range adds {
			if err := c.Dispatch(k, shiftParams{N: 3, Add: a}, Grid(3, 64), bx, by); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
	}

	run(1, 2)
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("logs %v, %v; want one file", logs, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := kernelLogHeader + wd + "\ntest.shift\n"
	if text, _ := os.ReadFile(logs[0]); string(text) != want {
		t.Errorf("log after two dispatches:\n%s\nwant:\n%s", text, want)
	}
	got, err := readKernelLogs(dir)
	if err != nil || len(got) != 1 || !got["test.shift"] {
		t.Errorf("read back %v, %v; want test.shift", got, err)
	}

	stale := want + "norm.rmsnorm\n" // as if the last run had dispatched it too
	if err := os.WriteFile(logs[0], []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	run()
	if text, _ := os.ReadFile(logs[0]); string(text) != stale {
		t.Errorf("a run with no dispatch changed the log:\n%s", text)
	}
	run(3)
	if text, _ := os.ReadFile(logs[0]); string(text) != want {
		t.Errorf("log after a rerun:\n%s\nwant:\n%s", text, want)
	}

	// A log of a package directory that is gone is skipped; a malformed
	// one is an error that names it.
	gone := kernelLogHeader + filepath.Join(dir, "no-such-package") + "\nnorm.rmsnorm\n"
	if err := os.WriteFile(filepath.Join(dir, "gone.log"), []byte(gone), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readKernelLogs(dir); err != nil || got["norm.rmsnorm"] {
		t.Errorf("with a log of a deleted package: %v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.log"), []byte("norm.rmsnorm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readKernelLogs(dir); err == nil || !strings.Contains(err.Error(), "bad.log") {
		t.Errorf("malformed log: err = %v, want one naming bad.log", err)
	}
}

func TestKernelLogName(t *testing.T) {
	a, b := kernelLogName("/src/hearth/engine/ops"), kernelLogName("/src/hearth/engine/model")
	if a == b || !strings.HasSuffix(a, ".log") || strings.ContainsAny(a, `/\`) {
		t.Errorf("names %q, %q: want distinct flat .log names", a, b)
	}
}
