package kokoro

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/internal/gputest"
)

// device is the one GPU device the package's tests share: opening one
// costs far more than a small forward pass on lavapipe.
var device gputest.Shared

func TestMain(m *testing.M) { device.Main(m) }

// testDevice is the shared device, lavapipe under make test.
func testDevice(t testing.TB) *gpu.Device {
	t.Helper()
	return device.Device(t, "the GPU forward's tests")
}
