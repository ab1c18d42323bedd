package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/app/chats"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/internal/kokorotest"
)

// realRunTimeout bounds one run of the binary: start, scan, load a tiny
// model on lavapipe, four screenshots, quit. It takes about 5 s.
const realRunTimeout = 90 * time.Second

// TestStudioRealRunScreenshots builds the hearth binary and runs the
// studio for real (GLFW, OpenGL, the engine on the machine's adapter)
// twice, with a home folder of its own: once with a tiny model in a folder
// the settings list and name as the last model, once with nothing, which
// shows the first-run screen. Each run captures every tab and quits; the
// test checks the exit status and that every picture shows something.
//
// With HEARTH_UPDATE_SCREENSHOTS=1 it also sends a chat message in the
// first run and copies the pictures to docs/screenshots, which is how the
// README's screenshots are made.
//
// It needs a display: make test runs the suite under xvfb-run, which
// provides one, so there it always runs.
func TestStudioRealRunScreenshots(t *testing.T) {
	if !hasDisplay() {
		t.Skip("no display (DISPLAY is unset): this test runs the real studio; make test runs it under xvfb-run -a, as does `xvfb-run -a go test ./ui`")
	}
	root := repoRoot(t)
	bin := buildHearth(t)
	update := os.Getenv("HEARTH_UPDATE_SCREENSHOTS") == "1"

	// A library of one tiny model, loaded at start.
	home, s := tinyModelHome(t)
	s.Sampling.MaxTokens = 40
	saveStudioSettings(t, home, s)
	prompt := ""
	if update {
		prompt = "Write a haiku about a warm hearth."
		richLibrary(t, home)
		// A Kokoro directory (the small fixture model): the Voice tab's
		// picture lists its voices and blends two.
		kokorotest.WriteDir(t, filepath.Join(home, ".config", "hearth", "kokoro"))
		s.Tune = tunedRun(t, bin, home)
		saveStudioSettings(t, home, s)
	}
	library := runStudio(t, bin, home, prompt)
	if got, err := settings.Load(filepath.Join(home, ".config", "hearth", "settings.json")); err != nil || got.LastModel != "tiny-llama" {
		t.Errorf("after the run the last model is %q (%v), want tiny-llama", got.LastModel, err)
	}

	// Nothing at all: the first-run screen.
	first := runStudio(t, bin, t.TempDir(), "")
	a, _ := os.ReadFile(filepath.Join(library, "models.png"))
	b, _ := os.ReadFile(filepath.Join(first, "models.png"))
	if bytes.Equal(a, b) {
		t.Error("the Models tab looks the same with a model and with none")
	}

	if update {
		out := filepath.Join(root, "docs", "screenshots")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tab := range []string{"chat", "voice", "tune", "models"} {
			copyFile(t, filepath.Join(library, tab+".png"), filepath.Join(out, tab+".png"))
		}
		copyFile(t, filepath.Join(first, "models.png"), filepath.Join(out, "first-run.png"))
	}
}

// TestStudioQuitMidReply runs the real studio, as the screenshot test does,
// sends a message to a tiny model and, while the reply streams, quits as
// the window's close button does. Every widget must be touched on Fyne's UI
// goroutine, also while the studio shuts down: Fyne's check for this (in
// builds that do not opt out of it with the migrated_fynedo tag or a fyneDo
// migration in FyneApp.toml, and go build does not) prints "Error in Fyne
// call thread" when a shown widget is refreshed from another goroutine.
// The process must end on its own, with status 0, and the chat, cut
// mid-reply, must be on disk with what the reply had written.
func TestStudioQuitMidReply(t *testing.T) {
	if !hasDisplay() {
		t.Skip("no display (DISPLAY is unset): this test runs the real studio; make test runs it under xvfb-run -a, as does `xvfb-run -a go test ./ui`")
	}
	bin := buildHearth(t)
	home, s := tinyModelHome(t)
	s.Sampling.MaxTokens = 0 // until the end of the turn: the reply must outlast the studio
	// On the GPU adapter (lavapipe here, about 10 tokens/s for this
	// model) the reply streams for minutes. Under auto it would run on the
	// CPU at ~2,000 tokens/s and could end (a sampled end of turn, or the
	// context's) before three updates were shown, as it did in a
	// fresh-clone run.
	s.Backend = "gpu"
	saveStudioSettings(t, home, s)
	runStudioEnv(t, bin, home, QuitMidReplyEnv+"=1")

	store, err := chats.Open(filepath.Join(home, ".config", "hearth", "chats"))
	if err != nil {
		t.Fatal(err)
	}
	convs, bad, err := store.Load()
	if err != nil || len(bad) > 0 {
		t.Fatalf("the chats after the quit: %v %v", err, bad)
	}
	kept := false
	for _, c := range convs {
		for i, m := range c.Messages {
			// Stop is written by the chat's closer alone; a reply saved
			// while it streamed says "" (cut short by a crash).
			if m.Content == quitMidReplyPrompt && i+1 < len(c.Messages) &&
				c.Messages[i+1].Content != "" && c.Messages[i+1].Reply.Stop == "canceled" {
				kept = true
			}
		}
	}
	if !kept {
		t.Errorf("no chat on disk holds the prompt and the reply the quit stopped, marked canceled (%d chats)", len(convs))
	}
}

// tinyModelHome is a home folder with a folder of one tiny model, and the
// settings that list the folder and name the model as the last one used:
// the studio loads it at start once they are saved (saveStudioSettings).
func tinyModelHome(t *testing.T) (string, settings.Settings) {
	t.Helper()
	home := t.TempDir()
	models := filepath.Join(home, "models")
	writeModel(t, filepath.Join(models, "tiny-llama.gguf"), "tiny-llama")
	s := settings.Defaults()
	s.Folders = []string{models}
	s.LastModel = "tiny-llama"
	return home, s
}

// saveStudioSettings writes s where the studio in home reads its settings.
func saveStudioSettings(t *testing.T, home string, s settings.Settings) {
	t.Helper()
	if err := settings.Save(filepath.Join(home, ".config", "hearth", "settings.json"), s); err != nil {
		t.Fatal(err)
	}
}

// buildHearth builds the hearth binary into a temporary folder.
func buildHearth(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hearth")
	ctx, cancel := context.WithTimeout(t.Context(), 3*realRunTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, goTool(), "build", "-o", bin, ".")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// studioEnv is the environment of a studio whose home folder, and every
// store and cache, is home, with no other tool's store.
func studioEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"OLLAMA_MODELS=",
		"HF_HUB_CACHE=", "HUGGINGFACE_HUB_CACHE=", "HF_HOME=",
	)
}

// richLibrary adds to home what the README's screenshot of the Models tab
// shows: more models, one with a real model's shapes, and an Ollama model
// whose blob is missing.
func richLibrary(t *testing.T, home string) {
	t.Helper()
	models := filepath.Join(home, "models")
	for _, p := range []string{"tiny-gemma3", "tiny-qwen3", "tiny-phi3"} {
		writeModel(t, filepath.Join(models, p+".gguf"), p)
	}
	qwen, _ := synth.PresetByName("qwen2.5-0.5b")
	if err := synth.WriteFile(filepath.Join(models, "Qwen2.5-0.5B-Q4_K_M.gguf"), qwen, synth.Options{Quant: "Q4_K_M"}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(home, ".ollama", "models", "manifests", "registry.ollama.ai", "library", "gemma3", "1b")
	os.MkdirAll(filepath.Dir(manifest), 0o755)
	layer := `{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + strings.Repeat("7c", 32) + `","size":815310432}`
	if err := os.WriteFile(manifest, []byte(`{"schemaVersion":2,"layers":[`+layer+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tunedRun fine-tunes tiny-qwen2 on the sample dataset with hearth train,
// into the adapters folder of the studio in home, and returns the Tune
// tab's choices that name that run: the README's screenshot of the Tune
// tab shows its loss curve, read back from its checkpoint. About 20 s on
// lavapipe.
func tunedRun(t *testing.T, bin, home string) settings.Tune {
	t.Helper()
	model := filepath.Join(home, "models", "tiny-qwen2.gguf")
	writeModel(t, model, "tiny-qwen2")
	dataset := filepath.Join(repoRoot(t), "assets", "datasets", "answer-format.jsonl")
	out := filepath.Join(home, ".config", "hearth", "adapters", "answer-format-tiny-qwen2.gguf")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	tune := settings.Tune{Model: "tiny-qwen2", Data: dataset, Preset: "quick",
		Rank: 4, Alpha: 8, LR: 3e-3, Epochs: 3, SeqLen: 32, Batch: 1, Accum: 1, Valid: 0.2}
	ctx, cancel := context.WithTimeout(t.Context(), 2*realRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "train", "-m", model, "-d", dataset, "-o", out,
		"--rank", "4", "--alpha", "8", "--lr", "3e-3", "--epochs", "3", "--seq-len", "32", "--batch", "1", "--accum", "1",
		"--valid", "0.2", "--save-every", "10", "--valid-every", "4")
	cmd.Env = append(os.Environ(), "HOME="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hearth train: %v\n%s", err, out)
	}
	return tune
}

// runStudioEnv runs the studio with home as its home folder and env added
// to its environment, and fails t unless it ends on its own within
// realRunTimeout, with status 0, and prints no panic and no widget touched
// off Fyne's UI goroutine.
func runStudioEnv(t *testing.T, bin, home string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), realRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(studioEnv(home), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the studio did not quit within %s:\n%s", realRunTimeout, out.String())
	}
	if err != nil {
		t.Fatalf("the studio exited with %v:\n%s", err, out.String())
	}
	for _, bad := range []string{"panic:", "Error in Fyne call thread"} {
		if n := strings.Count(out.String(), bad); n > 0 {
			t.Errorf("the studio's output has %q %d times:\n%s", bad, n, out.String())
		}
	}
}

// runStudio runs the studio with home as its home folder (and every store
// and cache inside it), captures the tabs into a folder and returns it.
func runStudio(t *testing.T, bin, home, prompt string) string {
	t.Helper()
	shots := t.TempDir()
	runStudioEnv(t, bin, home, ScreenshotsEnv+"="+shots, ScreenshotPromptEnv+"="+prompt)
	for _, tab := range []string{"chat", "voice", "tune", "models"} {
		img := readPNG(t, filepath.Join(shots, tab+".png"))
		if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
			t.Errorf("%s.png is %dx%d, smaller than the window", tab, b.Dx(), b.Dy())
		}
		if flat(img) {
			t.Errorf("%s.png is one flat colour", tab)
		}
	}
	return shots
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// repoRoot is the folder of the module's go.mod, found from the test's
// working folder (ui/) upwards.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		t.Fatal("go env GOMOD names no go.mod: the test must run inside the repository")
	}
	var m struct{ Module struct{ Path string } }
	if out, err := exec.Command(goTool(), "mod", "edit", "-json", mod).Output(); err != nil || json.Unmarshal(out, &m) != nil || m.Module.Path != "github.com/hearthstudio/hearth" {
		t.Fatalf("%s is not Hearth's go.mod (%v)", mod, err)
	}
	return filepath.Dir(mod)
}

// goTool is the go command: the one on PATH, else the one of the toolchain
// that built this test (make test may call go by its full path).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
