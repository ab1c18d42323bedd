package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runMainEnv makes the test binary run hearth's main with its arguments, so
// a test sees what a real process prints from package inits on.
const runMainEnv = "HEARTH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"hearth"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hearth runs the command in a fresh process under Debian's default locale
// and without a session's runtime directory, as over ssh or in a container,
// and returns its stderr.
func hearth(t *testing.T, extraEnv []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE", "HEARTH_LOG",
			"XDG_RUNTIME_DIR", "WAYLAND_SOCKET", "NODEVICE_SELECT", "DRI_PRIME", "MESA_VK_DEVICE_SELECT":
			continue // the test sets the scene these decide
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "LANG=C.UTF-8", runMainEnv+"=1")
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hearth %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stderr.String()
}

// noise is what the libraries under Hearth printed on every command, none
// of it about anything the user did or can fix.
var noise = []string{
	"Fyne error",                  // Fyne's locale lookup, from its package init
	"Error parsing user locale",   // the same, second line
	"VK_EXT_swapchain_colorspace", // wgpu-native's warning, for a swapchain Hearth never makes
	"[wgpu]",                      // any other wgpu-native log line below error
	"XDG_RUNTIME_DIR",             // libwayland, called by Mesa's device-select layer
}

func TestCommandsKeepStderrQuiet(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	steps := [][]string{
		{"synth", "--preset", "tiny-llama", "--quant", "Q4_K_M", "-o", model},
		{"info"},
		{"inspect", model},
		{"tokenize", "-m", model, "hello world"},
		{"generate", "-m", model, "--backend", "gpu", "-p", "hi", "-n", "2", "--temp", "0"},
	}
	for _, args := range steps {
		stderr := hearth(t, nil, args...)
		for _, n := range noise {
			if strings.Contains(stderr, n) {
				t.Errorf("hearth %s: stderr has %q:\n%s", strings.Join(args, " "), n, stderr)
			}
		}
	}

	// --verbose brings wgpu-native's log back, for whoever debugs a driver.
	stderr := hearth(t, nil, "info", "--verbose")
	if !strings.Contains(stderr, "[wgpu] [") {
		t.Errorf("hearth info --verbose: no wgpu log on stderr:\n%s", stderr)
	}
}

func TestBadLogLevelIsAnError(t *testing.T) {
	cmd := exec.Command(os.Args[0], "info")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "HEARTH_LOG=loud")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `HEARTH_LOG "loud"`) {
		t.Errorf("hearth info with HEARTH_LOG=loud: err %v, output:\n%s\nwant a failure naming HEARTH_LOG", err, out)
	}
}
