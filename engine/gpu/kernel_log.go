package gpu

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// KernelLogEnv names the environment variable that makes test binaries
// record the kernels they dispatch: with HEARTH_KERNEL_LOG=dir, each test
// binary writes the family.entry names its tests dispatched to one file in
// dir (which must exist), one name a line. `make test` sets it for the whole
// suite and then checks, with TestEveryEntryPointIsDispatched, that every
// entry point in shaders/ was dispatched by some test.
//
// The file of a package is named after its directory (go test runs a test
// binary there) and rewritten by each run of that binary, so it holds what
// the package's tests dispatched last. When go test replays a cached result
// instead, the file of the run it replays is still there: the variable and
// the file, read and opened from inside a test, are part of go test's cache
// key when dir lies inside the module, as make test's does, so a deleted or
// rewritten log makes its package run again. (go test also declines to cache
// a run whose log was written in its last two seconds.)
//
// Only the test binary go test started records: a test that runs its own
// binary again (as hearth's main, or one test in a child process) would
// otherwise truncate its parent's log in the same directory.
const KernelLogEnv = "HEARTH_KERNEL_LOG"

// kernelLogHeader starts a log's first line, followed by the package
// directory the log is for.
const kernelLogHeader = "# package "

// kernelLog records a process's dispatched kernel names; every Device of the
// process shares processKernelLog, so that two devices of one test binary
// add to one file rather than truncate each other's.
type kernelLog struct {
	mu   sync.Mutex
	seen map[string]bool
	f    *os.File
}

var processKernelLog = &kernelLog{}

// record notes that the kernel name was dispatched. Outside go test's own
// test binaries it returns at once. The environment is read at each
// dispatch not yet logged, from inside the dispatching test, so that go
// test's cache keys on it.
func (l *kernelLog) record(name string) error {
	if !startedByGoTest() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[name] {
		return nil
	}
	dir := os.Getenv(KernelLogEnv)
	if dir == "" {
		return nil
	}
	if l.f == nil {
		pkg, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("gpu: %s: %w", KernelLogEnv, err)
		}
		path := filepath.Join(dir, kernelLogName(pkg))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("gpu: %s: %w", KernelLogEnv, err)
		}
		if _, err := fmt.Fprintf(f, "%s%s\n", kernelLogHeader, pkg); err != nil {
			f.Close()
			return fmt.Errorf("gpu: %s: %s: %w", KernelLogEnv, path, err)
		}
		l.f, l.seen = f, map[string]bool{}
	}
	if _, err := l.f.WriteString(name + "\n"); err != nil {
		return fmt.Errorf("gpu: %s: %s: %w", KernelLogEnv, l.f.Name(), err)
	}
	l.seen[name] = true
	return nil
}

// startedByGoTest reports whether this process is a test binary that go test
// started and whose tests are running: go test passes -test.paniconexit0
// (since Go 1.16), which tests that start their own binary again do not.
func startedByGoTest() bool {
	if !testing.Testing() {
		return false
	}
	f := flag.Lookup("test.paniconexit0")
	return f != nil && f.Value.String() == "true"
}

// kernelLogName is the log file of the package in directory pkg.
func kernelLogName(pkg string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, strings.TrimPrefix(filepath.ToSlash(pkg), "/")) + ".log"
}

// readKernelLogs returns every kernel name the logs in dir list, skipping
// logs of package directories that no longer exist (a package deleted since
// its last run).
func readKernelLogs(dir string) (map[string]bool, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, path := range paths {
		if err := readKernelLog(path, names); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func readKernelLog(path string, names map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return fmt.Errorf("gpu: kernel log %s: empty, want a %q line first", path, kernelLogHeader)
	}
	pkg, ok := strings.CutPrefix(sc.Text(), kernelLogHeader)
	if !ok {
		return fmt.Errorf("gpu: kernel log %s: first line %q, want %q and the package directory", path, sc.Text(), kernelLogHeader)
	}
	if _, err := os.Stat(pkg); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			names[line] = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("gpu: kernel log %s: %w", path, err)
	}
	return nil
}
