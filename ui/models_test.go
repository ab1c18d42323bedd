package ui

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/engine/synth"
)

// modelsStudio is a test studio whose background work (scans, loads,
// downloads) reports to a serial UI loop, as the GLFW driver's fyne.Do
// does; the test touches widgets only through the loop. setup runs before
// the engine starts.
func modelsStudio(t *testing.T, setup func(*studio)) (*studio, fyne.Window, *uiLoop) {
	t.Helper()
	l := newUILoop(t)
	st, w := newTestStudioWith(t, func(st *studio) {
		st.post = l.do
		if setup != nil {
			setup(st)
		}
	}, l.wait)
	l.wait(func() {
		w.Resize(fyne.NewSize(1100, 720))
		st.tabs.SelectIndex(3)
	})
	return st, w, l
}

// gpuWait bounds the waits for real GPU work on lavapipe (training steps,
// a reply of a tuned model): two tiny LoRA steps take ~3.5 s on an idle
// machine and 5-10x longer while go test runs other packages beside, so the
// 30 s of eventually made them fail for load alone. Five minutes still ends
// a hung run well inside go test's 20 minute timeout.
const gpuWait = 5 * time.Minute

// eventually waits until cond, run on the UI loop, holds: 30 s, ample for
// fakes and scans that take milliseconds.
func eventually(t *testing.T, l *uiLoop, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, l, 30*time.Second, what, cond)
}

// eventuallyWithin is eventually with its deadline given.
func eventuallyWithin(t *testing.T, l *uiLoop, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok := false
		l.wait(func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shown is the text of every visible label, rich text and canvas text under
// o, joined by newlines: what a user could read.
func shown(o fyne.CanvasObject) string {
	var b strings.Builder
	walkShown(o, func(o fyne.CanvasObject) bool {
		switch v := o.(type) {
		case *widget.Label:
			b.WriteString(v.Text + "\n")
		case *widget.RichText:
			b.WriteString(v.String() + "\n")
		case *canvas.Text:
			b.WriteString(v.Text + "\n")
		default:
			return true
		}
		return false
	})
	return b.String()
}

// walkShown is walkObjects over what is visible: hidden objects, and what
// they hold, are skipped.
func walkShown(o fyne.CanvasObject, f func(fyne.CanvasObject) bool) {
	walkObjects(o, func(o fyne.CanvasObject) bool {
		return o != nil && o.Visible() && f(o)
	})
}

// dialogs is the text of the dialogs over w.
func dialogs(w fyne.Window) string {
	var b strings.Builder
	for _, o := range w.Canvas().Overlays().List() {
		b.WriteString(shown(o))
	}
	return b.String()
}

func modelsTab(st *studio) fyne.CanvasObject { return st.tabs.Items[3].Content }

// find is the first visible object under o of type T that ok accepts.
func find[T fyne.CanvasObject](o fyne.CanvasObject, ok func(T) bool) T {
	var found T
	done := false
	walkShown(o, func(o fyne.CanvasObject) bool {
		if done {
			return false
		}
		if v, is := o.(T); is && (ok == nil || ok(v)) {
			found, done = v, true
		}
		return !done
	})
	return found
}

func button(o fyne.CanvasObject, text string) *widget.Button {
	return find(o, func(b *widget.Button) bool { return b.Text == text })
}

// writeModel writes a tiny random-weight model of preset to path.
func writeModel(t *testing.T, path, preset string) {
	t.Helper()
	p, ok := synth.PresetByName(preset)
	if !ok {
		t.Fatalf("no preset %s", preset)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteFile(path, p, synth.Options{Quant: "Q8_0", Seed: 1}); err != nil {
		t.Fatal(err)
	}
}

// modelFolder is a folder with tiny-llama.gguf and tiny-qwen3.gguf.
func modelFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeModel(t, filepath.Join(dir, "tiny-llama.gguf"), "tiny-llama")
	writeModel(t, filepath.Join(dir, "tiny-qwen3.gguf"), "tiny-qwen3")
	return dir
}

func withFolder(dir string) func(*studio) {
	return func(st *studio) { st.settings.Folders = []string{dir} }
}

func savedSettings(t *testing.T, st *studio) settings.Settings {
	t.Helper()
	st.settingsOut.flush()
	s, err := settings.Load(st.settingsPath())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestModelsTabListsTheLibrary(t *testing.T) {
	st, _, l := modelsStudio(t, withFolder(modelFolder(t)))
	eventually(t, l, "the two models listed", func() bool { return len(st.entries) == 2 })
	l.wait(func() {
		text := shown(modelsTab(st))
		for _, want := range []string{"tiny-llama", "tiny-qwen3", "Folder", "llama", "qwen3", "1.44M", "Q8_0", "2K", "2 models on this machine"} {
			if !strings.Contains(text, want) {
				t.Errorf("the Models tab does not show %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "Welcome to Hearth") {
			t.Error("the first-run screen shows beside a library of two models")
		}
		search := find(modelsTab(st), func(e *widget.Entry) bool { return strings.HasPrefix(e.PlaceHolder, "Search") })
		search.SetText("QWEN")
		text = shown(modelsTab(st))
		if !strings.Contains(text, "1 of 2 models match") || strings.Contains(text, "tiny-llama\n") {
			t.Errorf("searching qwen shows:\n%s", text)
		}
	})
}

func TestLoadAndUnloadFromTheModelsTab(t *testing.T) {
	st, _, l := modelsStudio(t, withFolder(modelFolder(t)))
	eventually(t, l, "the models listed", func() bool { return len(st.entries) == 2 })
	l.wait(func() {
		list := find[*widget.List](modelsTab(st), nil)
		list.Select(0) // tiny-llama, by name
		test.Tap(button(modelsTab(st), "Load"))
	})
	eventually(t, l, "tiny-llama loaded", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-llama" && st.loading == ""
	})
	l.wait(func() {
		if text := shown(modelsTab(st)); !strings.Contains(text, "tiny-llama  · loaded") {
			t.Errorf("the list does not mark the loaded model:\n%s", text)
		}
		if !strings.Contains(st.status.Text, "tiny-llama") {
			t.Errorf("status bar %q does not name the model", st.status.Text)
		}
	})
	if got := savedSettings(t, st).LastModel; got != "tiny-llama" {
		t.Errorf("last model saved as %q, want tiny-llama", got)
	}
	l.wait(func() { test.Tap(button(modelsTab(st), "Unload")) })
	eventually(t, l, "the model unloaded", func() bool { return st.engine.Status().Model == nil })
	l.wait(func() {
		if !strings.Contains(st.status.Text, "no model loaded") {
			t.Errorf("status bar %q after unloading", st.status.Text)
		}
	})
	if got := savedSettings(t, st).LastModel; got != "" {
		t.Errorf("last model %q after an unload, want none", got)
	}
}

// The model of the last session loads at start, by its library name: a
// folder in the working directory named like it does not shadow it (the
// command line's resolver lets a path win, and the studio's load failed
// with "is a folder").
func TestTheLastModelLoadsAtStart(t *testing.T) {
	dir := modelFolder(t)
	cwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "tiny-qwen3"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	st, _, l := modelsStudio(t, func(st *studio) {
		st.settings.Folders = []string{dir}
		st.settings.LastModel = "tiny-qwen3"
	})
	eventually(t, l, "tiny-qwen3 loaded at start", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-qwen3"
	})
}

// A model that is gone since the last session is not an error at start.
func TestAMissingLastModelIsLeftAlone(t *testing.T) {
	st, w, l := modelsStudio(t, func(st *studio) { st.settings.LastModel = "gone:latest" })
	select {
	case <-st.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the studio did not finish starting")
	}
	l.wait(func() {
		if st.engine.Status().Model != nil || dialogs(w) != "" {
			t.Errorf("a missing last model gave model %v, dialogs %q", st.engine.Status().Model, dialogs(w))
		}
	})
}

// truncate cuts a file to half its size, as an interrupted copy leaves it.
func truncate(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func TestACorruptModelIsListedWithItsProblem(t *testing.T) {
	dir := modelFolder(t)
	truncate(t, filepath.Join(dir, "tiny-qwen3.gguf"))
	st, _, l := modelsStudio(t, withFolder(dir))
	eventually(t, l, "the models listed", func() bool { return len(st.entries) == 2 })
	l.wait(func() {
		text := shown(modelsTab(st))
		if !strings.Contains(text, "1 cannot be used") {
			t.Errorf("the summary does not count the broken model:\n%s", text)
		}
		e, _ := st.entryByName("tiny-qwen3")
		if e.Err == "" || !strings.Contains(text, shortProblem(e.Err)) {
			t.Errorf("the list does not show the problem %q:\n%s", e.Err, text)
		}
		find[*widget.List](modelsTab(st), nil).Select(1)
		if load := button(modelsTab(st), "Load"); load == nil || !load.Disabled() {
			t.Error("Load is enabled for a model that cannot be used")
		}
	})
}

// A file that breaks between the scan and the load fails in the engine:
// the user reads why in a dialog and beside the model, and can go on to
// load another.
func TestAFailedLoadSaysWhyAndTheStudioGoesOn(t *testing.T) {
	dir := modelFolder(t)
	st, w, l := modelsStudio(t, withFolder(dir))
	eventually(t, l, "the models listed", func() bool { return len(st.entries) == 2 })
	truncate(t, filepath.Join(dir, "tiny-llama.gguf"))
	l.wait(func() {
		find[*widget.List](modelsTab(st), nil).Select(0)
		test.Tap(button(modelsTab(st), "Load"))
	})
	eventually(t, l, "the load to fail", func() bool { return st.loading == "" && st.loadErrs[filepath.Join(dir, "tiny-llama.gguf")] != "" })
	l.wait(func() {
		if d := dialogs(w); !strings.Contains(d, "The model tiny-llama could not be loaded: ") || !strings.Contains(d, "truncated file") {
			t.Errorf("dialog %q, want one saying tiny-llama could not be loaded as it is truncated", d)
		}
		if text := shown(modelsTab(st)); !strings.Contains(text, "the model tiny-llama could not be loaded") {
			t.Errorf("the details do not show the failure:\n%s", text)
		}
		e, _ := st.entryByName("tiny-qwen3")
		st.loadModel(e)
	})
	eventually(t, l, "tiny-qwen3 loaded after the failure", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-qwen3"
	})
}

func TestAModelOverTheMemoryLimitIsFlaggedAndRefused(t *testing.T) {
	st, w, l := modelsStudio(t, func(st *studio) {
		st.settings.Folders = []string{modelFolder(t)}
		st.settings.Backend = "gpu"
		st.settings.GPUMemory = "64KiB"
	})
	eventually(t, l, "the models listed", func() bool { return len(st.entries) == 2 })
	l.wait(func() {
		if text := shown(modelsTab(st)); strings.Count(text, "over limit") != 2 {
			t.Errorf("want both models flagged over the limit:\n%s", text)
		}
		e, _ := st.entryByName("tiny-llama")
		st.loadModel(e)
		if st.loading != "" {
			t.Error("a model over the limit is being loaded")
		}
	})
	eventually(t, l, "a dialog naming the limit", func() bool {
		d := dialogs(w)
		return strings.Contains(d, "The model tiny-llama needs about ") && strings.Contains(d, "MiB of GPU memory, more than the 64 KiB limit")
	})
	if m := st.engine.Status().Model; m != nil {
		t.Errorf("%s loaded over the limit", m.Name)
	}
}

// isolateStores points every store the library and the downloader read at
// an empty temporary home, so a test never sees the developer's models.
func isolateStores(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("OLLAMA_MODELS", filepath.Join(home, "ollama"))
	t.Setenv("HF_HUB_CACHE", filepath.Join(home, "hf"))
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_HOME", "")
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_TOKEN", "")
	return home
}

func TestAHalfWrittenOllamaStoreShowsWhatIsMissing(t *testing.T) {
	home := isolateStores(t)
	manifest := filepath.Join(home, "ollama", "manifests", "registry.ollama.ai", "library", "gemma3", "1b")
	os.MkdirAll(filepath.Dir(manifest), 0o755)
	digest := strings.Repeat("ab", 32)
	if err := os.WriteFile(manifest, []byte(`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:`+digest+`","size":1000}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _, l := modelsStudio(t, func(st *studio) { st.baseRoots = library.DefaultRoots() })
	eventually(t, l, "the manifest listed", func() bool { return len(st.entries) == 1 })
	l.wait(func() {
		text := shown(modelsTab(st))
		if !strings.Contains(text, "gemma3:1b") || !strings.Contains(text, "sha256-abababababab… is missing") {
			t.Errorf("the list does not show the missing blob:\n%s", text)
		}
		find[*widget.List](modelsTab(st), nil).Select(0)
		if text := shown(modelsTab(st)); !strings.Contains(text, "ollama pull gemma3:1b") {
			t.Errorf("the details do not say how to fix it:\n%s", text)
		}
	})
}

func TestDroppedFiles(t *testing.T) {
	dir := t.TempDir()
	// A .txt file is a dataset, which goes to the Tune tab (TestTuneDrops).
	notes := filepath.Join(dir, "notes.md")
	os.WriteFile(notes, []byte("not a model"), 0o644)
	fake := filepath.Join(dir, "fake.gguf")
	os.WriteFile(fake, []byte("GGUF but nothing else"), 0o644)
	good := filepath.Join(dir, "dropped", "tiny-gemma.gguf")
	writeModel(t, good, "tiny-gemma")

	st, w, l := modelsStudio(t, nil)
	eventually(t, l, "the first scan", func() bool { return st.scanned })
	for _, c := range []struct{ path, want string }{
		{notes, "The file notes.md is not a GGUF model"},
		{fake, "The file fake.gguf is not a readable GGUF model"},
		{dir, "is a folder"},
	} {
		l.wait(func() { st.dropped([]fyne.URI{storage.NewFileURI(c.path)}) })
		eventually(t, l, "a message about "+c.path, func() bool { return strings.Contains(dialogs(w), c.want) })
		l.wait(func() {
			for _, o := range w.Canvas().Overlays().List() {
				w.Canvas().Overlays().Remove(o)
			}
			if len(st.settings.Files) != 0 || len(st.entries) != 0 || st.loading != "" {
				t.Errorf("dropping %s changed the library: files %v, entries %d", c.path, st.settings.Files, len(st.entries))
			}
		})
	}

	l.wait(func() { st.dropped([]fyne.URI{storage.NewFileURI(good)}) })
	eventually(t, l, "the dropped model loaded", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Path == good
	})
	if got := savedSettings(t, st).Files; !slices.Equal(got, []string{good}) {
		t.Errorf("saved files %v, want %v", got, []string{good})
	}
	l.wait(func() {
		if text := shown(modelsTab(st)); !strings.Contains(text, "tiny-gemma  · loaded\nFile\n") {
			t.Errorf("the dropped model is not listed as a loaded file:\n%s", text)
		}
		if !strings.Contains(st.status.Text, "tiny-gemma") {
			t.Errorf("status bar %q does not name the dropped model", st.status.Text)
		}
	})
}

func TestFirstRunScreenMakesAModel(t *testing.T) {
	isolateStores(t)
	st, _, l := modelsStudio(t, func(st *studio) { st.baseRoots = library.DefaultRoots() })
	eventually(t, l, "the presets sized", func() bool {
		return strings.Contains(shown(modelsTab(st)), "tiny-llama · 1.44M parameters")
	})
	l.wait(func() {
		text := shown(modelsTab(st))
		r := st.roots()
		for _, want := range []string{"Welcome to Hearth", "~/ollama", "~/hf", tildePath(r.LMStudio[0]), "~/.lmstudio/models", "Drop a .gguf file", "none yet"} {
			if !strings.Contains(text, want) {
				t.Errorf("the first-run screen does not show %q:\n%s", want, text)
			}
		}
		test.Tap(button(modelsTab(st), "Make and load"))
	})
	eventually(t, l, "the made model loaded", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-llama-"+sampleQuant
	})
	// The model is in Hearth's own models folder, which every command's
	// library scans, rather than in a user folder only the studio knows.
	if got := savedSettings(t, st).Folders; len(got) != 0 {
		t.Errorf("saved folders %v, want none", got)
	}
	e, err := library.Resolve(library.Roots{Hearth: library.HearthFolders(st.dir)}, "tiny-llama-"+sampleQuant)
	if err != nil || filepath.Dir(e.Path) != filepath.Join(st.dir, "models") {
		t.Errorf("the made model is not in Hearth's models folder: %+v, %v", e, err)
	}
	l.wait(func() {
		if text := shown(modelsTab(st)); strings.Contains(text, "Welcome to Hearth") || !strings.Contains(text, "1 model on this machine") {
			t.Errorf("the library does not replace the first-run screen:\n%s", text)
		}
	})
}

// Choosing an adapter (or the CPU) saves it and restarts the engine, which
// loads the resident model again on the new one.
func TestChoosingWhereModelsRunRestartsTheEngine(t *testing.T) {
	st, _, l := modelsStudio(t, withFolder(modelFolder(t)))
	eventually(t, l, "the models listed", func() bool { return len(st.entries) == 2 })
	var old *app.Engine
	l.wait(func() {
		e, _ := st.entryByName("tiny-llama")
		st.loadModel(e)
	})
	eventually(t, l, "tiny-llama loaded", func() bool { return st.engine.Status().Model != nil })
	l.wait(func() {
		old = st.engine
		choose := find(modelsTab(st), func(s *widget.Select) bool { return slices.Contains(s.Options, "CPU only") })
		if choose == nil || choose.Selected != "CPU only" {
			t.Fatalf("no adapter choice showing CPU only")
		}
		choose.SetSelected("Automatic")
	})
	if s := savedSettings(t, st); s.Backend != "auto" || s.Adapter != "" {
		t.Errorf("saved backend %q adapter %q, want auto and none", s.Backend, s.Adapter)
	}
	eventually(t, l, "tiny-llama loaded again on the new engine", func() bool {
		m := st.engine.Status().Model
		return st.engine != old && m != nil && m.Name == "tiny-llama"
	})
	if err := old.Unload(t.Context()); err == nil {
		t.Error("the old engine still takes jobs")
	}
	// The compute line, made off the UI goroutine, follows the choice:
	// the GPU, or here over lavapipe the CPU saying why
	// (TestComputeLineSaysWhy).
	want := computeLine(settings.Settings{Backend: "auto"}, app.GPUOptions{})
	if want == "CPU (no GPU used)" {
		t.Fatalf("auto's compute line %q is the CPU setting's", want)
	}
	eventually(t, l, "the status bar saying "+want, func() bool { return strings.HasPrefix(st.status.Text, want) })
}

// TestRepliesAtOnceRestartsTheEngine: the Models tab's "Replies at once"
// is kept in the settings, gives the new engine that many slots (the
// resident model loads again with them), and the memory estimates count a
// KV cache for each.
func TestRepliesAtOnceRestartsTheEngine(t *testing.T) {
	st, _, l := modelsStudio(t, withFolder(modelFolder(t)))
	eventually(t, l, "the models listed", func() bool { return len(st.entries) == 2 })
	l.wait(func() {
		e, _ := st.entryByName("tiny-llama")
		st.loadModel(e)
	})
	eventually(t, l, "tiny-llama loaded", func() bool { return st.engine.Status().Model != nil })
	var before string
	l.wait(func() {
		e, _ := st.entryByName("tiny-llama")
		before = memoryLine(st, e)
		parallel := find(modelsTab(st), func(s *widget.Select) bool { return slices.Equal(s.Options, parallelChoices) })
		if parallel == nil || parallel.Selected != "1" {
			t.Fatalf("no replies-at-once choice showing 1")
		}
		parallel.SetSelected("4")
	})
	if s := savedSettings(t, st); s.Parallel != 4 {
		t.Errorf("saved parallel %d, want 4", s.Parallel)
	}
	eventually(t, l, "tiny-llama loaded again with 4 slots", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-llama" && m.Slots == 4
	})
	l.wait(func() {
		e, _ := st.entryByName("tiny-llama")
		after := memoryLine(st, e)
		m := e.Info.Memory
		want := "KV cache " + settings.FormatSize(4*m.KV)
		if !strings.Contains(after, want) || !strings.Contains(after, "4 replies at once") || strings.Contains(before, "at once") {
			t.Errorf("the estimate with 4 replies at once is %q (before %q), want it to say %q", after, before, want)
		}
	})
}

// fakeHub serves one file as the Hugging Face hub does: a HEAD answer with
// the commit and the SHA-256 ETag, and the bytes with ranges.
func fakeHub(t *testing.T, repo, file string, data []byte) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256(data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+repo+"/resolve/main/"+file {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Repo-Commit", strings.Repeat("c0ffee", 6)+"c0ff")
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		http.ServeContent(w, r, file, time.Time{}, strings.NewReader(string(data)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDownloadDialog(t *testing.T) {
	isolateStores(t)
	model := filepath.Join(t.TempDir(), "tiny-phi3.gguf")
	writeModel(t, model, "tiny-phi3")
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_ENDPOINT", fakeHub(t, "test/tiny", "tiny-phi3.gguf", data).URL)
	st, w, l := modelsStudio(t, func(st *studio) { st.baseRoots = library.DefaultRoots() })
	eventually(t, l, "the first scan", func() bool { return st.scanned })

	var spec *widget.Entry
	l.wait(func() {
		test.Tap(button(modelsTab(st), "Download…"))
		top := w.Canvas().Overlays().Top()
		spec = find(top, func(e *widget.Entry) bool { return strings.HasPrefix(e.PlaceHolder, "owner/repo") })
		spec.SetText("not a spec")
		test.Tap(button(top, "Download"))
		if d := dialogs(w); !strings.Contains(d, "want owner/name:file.gguf") {
			t.Errorf("a bad name shows %q", d)
		}
		spec.SetText("test/tiny:tiny-phi3.gguf")
		test.Tap(button(top, "Download"))
	})
	eventually(t, l, "the downloaded model loaded", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "test/tiny:tiny-phi3.gguf"
	})
	l.wait(func() {
		if w.Canvas().Overlays().Top() != nil {
			t.Errorf("the dialog is still open: %q", dialogs(w))
		}
	})
}

func TestStatusText(t *testing.T) {
	m := &app.ModelInfo{Name: "gemma3:1b", Backend: "gpu: H200"}
	m.Memory.Weights = 3 << 29
	for _, c := range []struct {
		s    app.Status
		want string
	}{
		{app.Status{}, "GPU: X · no model loaded"},
		{app.Status{Model: m}, "GPU: X · gemma3:1b (1.5 GiB)"},
		{app.Status{Model: m, Busy: true, Waiting: 2}, "GPU: X · gemma3:1b (1.5 GiB) · working, 2 waiting"},
		{app.Status{Model: &app.ModelInfo{Name: "tiny", Backend: "cpu"}, Busy: true}, "GPU: X · tiny on the CPU · working"},
		{app.Status{Note: "tiny was unloaded after 5m0s idle"}, "GPU: X · no model loaded · tiny was unloaded after 5m0s idle"},
	} {
		if got := statusText("GPU: X", c.s); got != c.want {
			t.Errorf("statusText(%+v) = %q, want %q", c.s, got, c.want)
		}
	}
}

// TestComputeLineSaysWhy: the status bar's compute line says where models
// run as the engine decides it (app.ChooseBackend): under auto, the CPU
// with the reason when the best adapter is a software renderer (lavapipe,
// as on CI), else that GPU.
func TestComputeLineSaysWhy(t *testing.T) {
	t.Setenv("HEARTH_ADAPTER", "")
	var best app.AdapterInfo
	if adapters, err := app.Adapters(app.GPUOptions{}); err == nil && len(adapters) > 0 {
		best = adapters[0]
	}
	line := computeLine(settings.Settings{Backend: "auto"}, app.GPUOptions{})
	switch best.Type {
	case "cpu":
		if want := "CPU (faster than the software GPU)"; line != want {
			t.Errorf("auto over the software adapter: %q, want %q", line, want)
		}
	case "":
		if line != "CPU (no GPU found)" {
			t.Errorf("auto with no adapter: %q", line)
		}
	default:
		if !strings.HasPrefix(line, "GPU: "+best.Label()) {
			t.Errorf("auto over %s: %q", best.Name, line)
		}
	}
	if best.Name != "" {
		if line := computeLine(settings.Settings{Backend: "gpu"}, app.GPUOptions{}); !strings.HasPrefix(line, "GPU: "+best.Label()) {
			t.Errorf("gpu: %q", line)
		}
	}
	if line := computeLine(settings.Settings{Backend: "cpu"}, app.GPUOptions{}); line != "CPU (no GPU used)" {
		t.Errorf("cpu: %q", line)
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "–"}, {512, "512 B"}, {906 << 10, "906 KiB"}, {378 << 20, "378 MiB"}, {3 << 29, "1.5 GiB"}} {
		if got := settings.FormatSize(c.n); got != c.want {
			t.Errorf("settings.FormatSize(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		n    int
		want string
	}{{0, "–"}, {2048, "2K"}, {131072, "128K"}, {4000, "4000"}} {
		if got := formatContext(c.n); got != c.want {
			t.Errorf("formatContext(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestParseMemory(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{{"", 0}, {"64KiB", 64 << 10}, {"6 GiB", 6 << 30}, {"8000 MB", 8e9}, {"1.5gib", 3 << 29}, {"4096", 4096}} {
		if got, err := parseMemory(c.in); err != nil || got != c.want {
			t.Errorf("parseMemory(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"lots", "-1 GiB", "0", "GiB"} {
		if _, err := parseMemory(bad); err == nil {
			t.Errorf("parseMemory(%q) accepted", bad)
		}
	}
}

func TestShortProblem(t *testing.T) {
	long := "/home/u/.ollama/models/manifests/registry.ollama.ai/library/gemma3/1b: model layer: blob /home/u/.ollama/models/blobs/sha256-" +
		strings.Repeat("0123456789abcdef", 4) + " is missing (`ollama pull gemma3:1b` fetches it again)"
	want := "model layer: blob sha256-0123456789ab… is missing (`ollama pull gemma3:1b` fetches it again)"
	if got := shortProblem(long); got != want {
		t.Errorf("shortProblem:\n got %q\nwant %q", got, want)
	}
}

func TestTildePath(t *testing.T) {
	t.Setenv("HOME", "/home/ada")
	for in, want := range map[string]string{
		"/home/ada":                "~",
		"/home/ada/.ollama/models": "~/.ollama/models",
		"/home/adam/models":        "/home/adam/models",
		"/srv/models":              "/srv/models",
		"":                         "",
	} {
		if got := tildePath(in); got != want {
			t.Errorf("tildePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// With no model selected in the list, the details show the loaded model,
// beside the Unload button that frees it, not "No model selected".
func TestModelDetailsShowTheLoadedModel(t *testing.T) {
	st, _, l := modelsStudio(t, func(st *studio) {
		st.settings.Folders = []string{modelFolder(t)}
		st.settings.LastModel = "tiny-qwen3"
	})
	eventually(t, l, "tiny-qwen3 loaded at start", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-qwen3" && st.loading == ""
	})
	l.wait(func() {
		card := find[*widget.Card](modelsTab(st), nil)
		if card == nil || card.Title != "tiny-qwen3" {
			t.Errorf("the details card: %+v, want tiny-qwen3's", card)
		}
		if button(modelsTab(st), "Unload") == nil || button(modelsTab(st), "Loaded") == nil {
			t.Errorf("the details do not offer Unload beside Loaded:\n%s", shown(modelsTab(st)))
		}
	})
}
