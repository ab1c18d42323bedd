package ui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"fyne.io/fyne/v2"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
)

// This file holds what the Models tab, the first-run screen and a drop on
// the window share: the library's last scan and the loading of a model.
// Everything here runs on the UI goroutine and hands the slow parts
// (scans, reading headers, loading) to goroutines that report back through
// fyne.Do.

// roots are the places the library scans: the other tools' stores, the
// studio's own models and adapters folders, the user's folders, and the
// files dropped on the window (a file given as a folder is listed as
// itself). The command line scans the same (cli's libraryRoots), so what
// the studio makes or trains, hearth chat -m and --lora find by name.
func (st *studio) roots() library.Roots {
	r := st.baseRoots
	r.Hearth = slices.Clone(r.Hearth)
	for _, dir := range library.HearthFolders(st.dir) {
		if !slices.Contains(r.Hearth, dir) {
			r.Hearth = append(r.Hearth, dir)
		}
	}
	r.Folders = append(slices.Clone(r.Folders), st.settings.Folders...)
	r.Folders = append(r.Folders, st.settings.Files...)
	return r
}

// onLibrary registers f for changes of the library's entries or of the
// load state; f runs on the UI goroutine.
func (st *studio) onLibrary(f func()) { st.libraryListeners = append(st.libraryListeners, f) }

func (st *studio) libraryChanged() {
	for _, f := range st.libraryListeners {
		f()
	}
}

// rescan scans the roots off the UI goroutine, then shows the entries and
// calls then (if not nil). A scan that a newer one overtook is dropped, so
// a slow first scan never overwrites what a rescan after "Add folder"
// found.
func (st *studio) rescan(then func()) {
	roots := st.roots()
	st.scanGen++
	gen := st.scanGen
	st.scanning++
	st.libraryChanged()
	go func() {
		lib := library.New(roots)
		entries, adapters := lib.ScanAll()
		st.post(func() {
			st.scanning--
			if gen != st.scanGen {
				st.libraryChanged()
				return
			}
			st.libMu.Lock()
			st.lib = lib
			st.libMu.Unlock()
			st.entries, st.adapters, st.scanned = entries, adapters, true
			st.entriesGen++
			st.libraryChanged()
			if then != nil {
				then()
			}
		})
	}()
}

func (st *studio) entryByPath(path string) (library.Entry, bool) {
	for _, e := range st.entries {
		if e.Path == path {
			return e, true
		}
	}
	return library.Entry{}, false
}

func (st *studio) entryByName(name string) (library.Entry, bool) {
	for _, e := range st.entries {
		if e.Name == name {
			return e, true
		}
	}
	return library.Entry{}, false
}

// loadLastModel loads the model of the last session if the scan still
// finds it; a model that is gone or broken is left alone, without a
// message the user did not ask for.
func (st *studio) loadLastModel() {
	e, ok := st.entryByName(st.settings.LastModel)
	if !ok || e.Err != "" || st.overBudget(e) != nil {
		st.startOnce.Do(func() { close(st.started) })
		return
	}
	st.loadModel(e)
}

// budget is the GPU memory limit from the settings, 0 when there is none,
// the backend is the CPU, or the limit does not parse.
func (st *studio) budget() uint64 {
	if st.settings.Backend == "cpu" {
		return 0
	}
	b, err := parseMemory(st.settings.GPUMemory)
	if err != nil {
		return 0
	}
	return b
}

// overBudget says why e does not fit the GPU memory limit, or nil. The
// engine refuses such a model too, but only after opening it; saying so
// before spares the wait and names the setting to change.
func (st *studio) overBudget(e library.Entry) error {
	b := st.budget()
	if b == 0 || e.Info == nil || e.Info.Memory.Slots(st.slots()).Total() <= int64(b) {
		return nil
	}
	return fmt.Errorf("the model %s needs about %s of GPU memory, more than the %s limit set in the Models tab. Choose a smaller model or quantization, or raise the limit",
		e.Name, settings.FormatSize(e.Info.Memory.Slots(st.slots()).Total()), settings.FormatSize(int64(b)))
}

// slots is how many replies the engine generates at once (the Models
// tab's choice), each with a KV cache the memory estimates count.
func (st *studio) slots() int { return max(st.settings.Parallel, 1) }

// loadModel makes e the resident model in the background, showing the
// upload's progress in the Models tab, and remembers it for the next start.
// A failure is shown in a dialog and beside the model; the previous model
// stays unloaded and the studio usable.
func (st *studio) loadModel(e library.Entry) {
	if st.loading != "" {
		return
	}
	fail := func(err error) {
		st.loadErrs[e.Path] = err.Error()
		st.libraryChanged()
		st.showError(err)
		st.startOnce.Do(func() { close(st.started) })
	}
	if e.Err != "" {
		fail(fmt.Errorf("the model %s cannot be loaded: %s", e.Name, e.Err))
		return
	}
	if err := st.overBudget(e); err != nil {
		fail(err)
		return
	}
	delete(st.loadErrs, e.Path)
	st.loading, st.loadDone, st.loadTotal = e.Name, 0, 0
	st.libraryChanged()
	eng := st.engine
	go func() {
		_, err := eng.Load(context.Background(), e.Name, func(p app.Progress) {
			if p.Stage != "load" {
				return
			}
			st.post(func() {
				st.loadDone, st.loadTotal = p.Done, p.Total
				st.libraryChanged()
			})
		})
		st.post(func() {
			st.loading = ""
			if err != nil {
				fail(loadError(e, err))
				return
			}
			st.settings.LastModel = e.Name
			st.saveSettings()
			st.libraryChanged()
			st.startOnce.Do(func() { close(st.started) })
		})
	}()
}

// loadError is what the user reads when e fails to load: which model, and
// the engine's reason, which names the file and the cause.
func loadError(e library.Entry, err error) error {
	if errors.Is(err, app.ErrClosed) {
		return fmt.Errorf("the model %s was not loaded: the engine restarted (a new adapter was chosen); load it again", e.Name)
	}
	return fmt.Errorf("the model %s could not be loaded: %w", e.Name, err)
}

// unloadModel frees the resident model; the next start then loads none.
func (st *studio) unloadModel() {
	st.settings.LastModel = ""
	st.saveSettings()
	eng := st.engine
	go func() {
		if err := eng.Unload(context.Background()); err != nil {
			st.showError(err)
		}
	}()
}

// resident is the path of the loaded model, "" when none is.
func (st *studio) resident() string {
	if m := st.engine.Status().Model; m != nil {
		return m.Path
	}
	return ""
}

// dropped handles files dropped on the window: each GGUF model is added to
// the library and the last one loaded, a dataset goes to the Tune tab, and
// an image to the message being written in the Chat tab; anything else is
// refused with a message that says why, and nothing changes. On the Chat
// tab a file that is neither a model nor a dataset is taken for an image,
// so one that is not is refused as an image.
func (st *studio) dropped(uris []fyne.URI) {
	var paths []string
	for _, u := range uris {
		if u.Scheme() != "file" {
			st.showError(fmt.Errorf("%s is not a file on this machine: drop a .gguf model file", u))
			continue
		}
		paths = append(paths, u.Path())
	}
	// Datasets go to the Tune tab; a model dropped while the Tune tab
	// shows becomes its base model instead of being loaded.
	tuning := st.tune != nil && st.tabs != nil && st.tabs.Selected() == st.tuneTab
	chatting := st.chat != nil && st.tabs != nil && st.tabs.SelectedIndex() == 0
	models := paths[:0]
	var images []string
	for _, p := range paths {
		switch {
		case st.tune != nil && isDataset(p):
			st.tune.setData(p)
			st.tabs.Select(st.tuneTab)
		case st.chat != nil && (isImageName(p) || chatting && !strings.EqualFold(filepath.Ext(p), ".gguf")):
			images = append(images, p)
		default:
			models = append(models, p)
		}
	}
	paths = models
	if len(images) > 0 {
		st.chat.attachFiles(images)
		if st.tabs != nil {
			st.tabs.SelectIndex(0)
		}
	}
	if len(paths) == 0 {
		return
	}
	go func() {
		var good []string
		var bad []error
		for _, p := range paths {
			if err := checkModelFile(p); err != nil {
				bad = append(bad, err)
				continue
			}
			good = append(good, p)
		}
		st.post(func() {
			if len(bad) > 0 {
				st.showError(errors.Join(bad...))
			}
			if len(good) == 0 {
				return
			}
			for _, p := range good {
				if !slices.Contains(st.settings.Files, p) {
					st.settings.Files = append(st.settings.Files, p)
				}
			}
			st.saveSettings()
			last := good[len(good)-1]
			st.rescan(func() {
				e, ok := st.entryByPath(last)
				switch {
				case !ok:
				case tuning:
					st.tune.pickModel(e.Name)
				default:
					st.loadModel(e)
				}
			})
		})
	}()
}

// checkModelFile says why path is not a model Hearth can run, or nil. It
// reads the file's header, so it runs off the UI goroutine.
func checkModelFile(path string) error {
	name := filepath.Base(path)
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("the file %s cannot be opened: %w", name, err)
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a folder: use \"Add folder…\" in the Models tab to add the models in it", path)
	}
	if !strings.EqualFold(filepath.Ext(name), ".gguf") {
		return fmt.Errorf("the file %s is not a GGUF model: Hearth runs language models in .gguf files, trains them on .jsonl or .txt datasets in the Tune tab, and reads PNG, JPEG, GIF and WebP images in the Chat tab", name)
	}
	info, err := library.Describe(path)
	switch {
	case err != nil && info == nil:
		return fmt.Errorf("the file %s is not a readable GGUF model (damaged or incomplete?): %w", name, err)
	case err != nil:
		return fmt.Errorf("the file %s is a GGUF model Hearth cannot run: %w", name, err)
	}
	return nil
}
