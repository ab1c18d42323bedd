package gpu

import (
	"os"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/hearthstudio/hearth/internal/loglevel"
)

// wgpuLevels maps HEARTH_LOG to wgpu-native's levels; Debug stops short of
// Trace, which logs every call.
var wgpuLevels = [...]wgpu.LogLevel{
	loglevel.Error: wgpu.LogLevelError,
	loglevel.Warn:  wgpu.LogLevelWarn,
	loglevel.Info:  wgpu.LogLevelInfo,
	loglevel.Debug: wgpu.LogLevelDebug,
}

// setLogLevel applies HEARTH_LOG before an instance is made. wgpu-native logs
// warnings by default, among them "Unable to find extension:
// VK_EXT_swapchain_colorspace" on every instance of a driver without it,
// which Hearth, drawing no swapchain, never needs.
func setLogLevel() error {
	level, err := loglevel.FromEnv()
	if err != nil {
		return err
	}
	wgpu.SetLogLevel(wgpuLevels[level])
	skipDeviceSelectWithoutSession()
	return nil
}

// skipDeviceSelectWithoutSession turns off Mesa's device-select Vulkan layer
// where it can only fail. The layer (an implicit layer, in every Vulkan
// instance on Debian) asks the Wayland compositor for the default GPU while
// adapters are enumerated; Mesa 22's libwayland connects without checking
// for a session and prints "error: XDG_RUNTIME_DIR is invalid or not set in
// the environment." once per driver when XDG_RUNTIME_DIR is unset, as it is
// over ssh, in containers and in CI. Without that directory there is no
// compositor to ask, and Hearth ranks the adapters itself, so the layer adds
// nothing. A user who chooses a device through the layer (DRI_PRIME,
// MESA_VK_DEVICE_SELECT) or sets NODEVICE_SELECT keeps their setting; the
// Vulkan loader reads it when the instance is created, after this.
func skipDeviceSelectWithoutSession() {
	for _, name := range [...]string{"XDG_RUNTIME_DIR", "WAYLAND_SOCKET", "DRI_PRIME", "MESA_VK_DEVICE_SELECT"} {
		if os.Getenv(name) != "" {
			return
		}
	}
	if _, set := os.LookupEnv("NODEVICE_SELECT"); set {
		return
	}
	_ = os.Setenv("NODEVICE_SELECT", "1") // a failure leaves only the messages
}
