package vocoder

import (
	"os"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// device is the one GPU device the package's tests share: opening one
// costs far more than a small forward pass on lavapipe.
var device struct {
	once sync.Once
	d    *gpu.Device
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if device.d != nil {
		device.d.Release()
	}
	os.Exit(code)
}

// testDevice opens (once) the adapter gpu.OptionsFromEnv picks: lavapipe
// under make test. No adapter is a broken setup, not a reason to skip.
func testDevice(t testing.TB) *gpu.Device {
	t.Helper()
	device.once.Do(func() { device.d, device.err = gpu.Open(gpu.OptionsFromEnv()) })
	if device.err != nil {
		t.Fatalf("the GPU forward's tests need a WebGPU adapter (make test installs lavapipe): %v", device.err)
	}
	return device.d
}
