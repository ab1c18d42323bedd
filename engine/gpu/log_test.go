package gpu

import (
	"os"
	"strings"
	"testing"
)

func TestBadLogLevelIsAnError(t *testing.T) {
	t.Setenv("HEARTH_LOG", "loud")
	if _, err := Adapters(Options{}); err == nil || !strings.Contains(err.Error(), `HEARTH_LOG "loud"`) {
		t.Errorf("Adapters with HEARTH_LOG=loud: err %v, want one naming HEARTH_LOG", err)
	}
}

func TestDeviceSelectOffOnlyWithoutSession(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string // NODEVICE_SELECT afterwards
	}{
		{"no session", map[string]string{}, "1"},
		{"a session", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, ""},
		{"Wayland socket handed over", map[string]string{"WAYLAND_SOCKET": "3"}, ""},
		{"user picks through the layer", map[string]string{"DRI_PRIME": "1"}, ""},
		{"user picks by id", map[string]string{"MESA_VK_DEVICE_SELECT": "1002:73bf"}, ""},
		{"user's own setting", map[string]string{"NODEVICE_SELECT": "0"}, "0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, name := range []string{"XDG_RUNTIME_DIR", "WAYLAND_SOCKET", "DRI_PRIME", "MESA_VK_DEVICE_SELECT", "NODEVICE_SELECT"} {
				t.Setenv(name, c.env[name])
				if _, set := c.env[name]; !set {
					os.Unsetenv(name)
				}
			}
			skipDeviceSelectWithoutSession()
			if got := os.Getenv("NODEVICE_SELECT"); got != c.want {
				t.Errorf("NODEVICE_SELECT = %q, want %q", got, c.want)
			}
		})
	}
}
