// Package gputest shares one WebGPU device among a package's tests:
// opening a device costs far more than most tests' work on lavapipe.
package gputest

import (
	"os"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// Shared is a device opened by the first test that asks for it and
// released by Main once every test has run. Its zero value is ready.
type Shared struct {
	once sync.Once
	d    *gpu.Device
	err  error
}

// Device opens (once) the adapter gpu.OptionsFromEnv picks: lavapipe under
// make test. No adapter is a broken setup, not a reason to skip: the test
// fails, saying that what (as "the GPU step's tests") needs one.
func (s *Shared) Device(tb testing.TB, what string) *gpu.Device {
	tb.Helper()
	s.once.Do(func() { s.d, s.err = gpu.Open(gpu.OptionsFromEnv()) })
	if s.err != nil {
		tb.Fatalf("%s need a WebGPU adapter (make test installs lavapipe): %v", what, s.err)
	}
	return s.d
}

// Main is a TestMain: it runs the package's tests, releases the device if
// one was opened and exits with the tests' code.
func (s *Shared) Main(m *testing.M) {
	code := m.Run()
	if s.d != nil {
		s.d.Release()
	}
	os.Exit(code)
}
