// Package ui is Hearth's Fyne front end. It talks only to package app (the
// engine goroutine, the model library, settings, histories) and never
// touches a GPU object itself; the engine's reports reach the widgets
// through fyne.Do, so the UI goroutine never waits on the GPU.
package ui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/server"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/assets"
)

// ErrNoDisplay is returned by Run on a machine with no graphical session, so
// `make run` or a bare `hearth` over SSH says what is wrong instead of
// crashing inside the windowing library.
var ErrNoDisplay = errors.New("no display: the studio needs a graphical session (DISPLAY or WAYLAND_DISPLAY is unset); the command line still works, see hearth --help, or run under xvfb-run")

// hasDisplay reports whether a window can be opened. Only Linux and the BSDs
// depend on an X11/Wayland session; macOS and Windows always have a desktop.
func hasDisplay() bool {
	switch runtime.GOOS {
	case "darwin", "windows", "android", "ios":
		return true
	}
	return os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
}

// ScreenshotsEnv names the environment variable that makes Run capture
// every tab into a folder and quit: how the README's screenshots are made,
// and how a test drives the real binary.
const ScreenshotsEnv = "HEARTH_SCREENSHOTS"

// QuitMidReplyEnv, set to 1, makes Run send a message from the Chat tab
// once the studio has started and, when the reply has begun to show, quit
// as the window's close button does: how a test checks that quitting
// mid-reply leaves the widgets to the UI goroutine and ends the process.
const QuitMidReplyEnv = "HEARTH_QUIT_MID_REPLY"

// defaultWindowSize is the studio window's size when it opens: every tab
// fits it without cutting a control.
var defaultWindowSize = fyne.NewSize(1100, 720)

// Run opens the studio window and returns when it is closed.
func Run() error {
	if !hasDisplay() {
		return ErrNoDisplay
	}
	dir, err := settings.Dir()
	if err != nil {
		return err
	}
	a := fyneapp.NewWithID("studio.hearth")
	a.SetIcon(fyne.NewStaticResource("icon.png", assets.Icon))
	w := a.NewWindow("Hearth")
	st := newStudio(a, w, dir)
	defer st.close()
	var shotErr error
	// The studio ends the process itself once it has closed (quit), so
	// that Fyne's loop never runs its own shutdown: in Fyne v2.7.1 that
	// races its lifecycle goroutine, which then hangs the exit (the loop
	// has stopped reading the queue the stop hook was just sent to) or
	// panics with "send on closed channel" (it was closed in between). A
	// program that only opens a window and quits hung twice in 340 runs on
	// a loaded two-core machine, and the studio's screenshot test failed
	// once in .ci/run on the panic.
	st.exit = func() {
		if shotErr != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	w.SetCloseIntercept(st.quit)
	st.baseRoots = library.DefaultRoots()
	w.SetContent(st.content())
	w.SetOnDropped(func(_ fyne.Position, uris []fyne.URI) { st.dropped(uris) })
	w.Resize(defaultWindowSize)

	if out := os.Getenv(ScreenshotsEnv); out != "" {
		go func() {
			shotErr = st.screenshots(out)
			if shotErr != nil {
				fmt.Fprintln(os.Stderr, "hearth:", shotErr)
			}
			fyne.Do(st.quit)
		}()
	} else if os.Getenv(QuitMidReplyEnv) == "1" {
		go func() {
			shotErr = st.quitMidReply()
			if shotErr != nil {
				fmt.Fprintln(os.Stderr, "hearth:", shotErr)
				fyne.Do(st.quit)
			}
		}()
	}
	w.ShowAndRun()
	return shotErr
}

// studio is what the panels share: the window, the engine, the settings,
// the model library and the status bar. Panels are small functions of it
// that return a fyne.CanvasObject. Every field below is read and written
// on the UI goroutine only, except where a comment says otherwise.
type studio struct {
	app fyne.App
	win fyne.Window
	// post runs f on the UI goroutine without waiting: postToUI, through
	// which every report of another goroutine reaches the widgets. Fyne's
	// test driver runs fyne.Do inline on the caller's goroutine, so tests
	// give the studio a serial loop of their own instead.
	post func(f func())
	// dir holds settings.json, the chat histories and the models the
	// studio makes itself (dir/models).
	dir      string
	settings settings.Settings
	// settingsOut writes settings off the UI goroutine; close flushes it.
	settingsOut *settingsWriter
	engine      *app.Engine
	adapter     string // the status bar's compute line
	// restarts counts restartEngine's calls, so that only the newest
	// one's compute line is shown.
	restarts int

	status *widget.Label
	tabs   *container.AppTabs
	// chat and tune are the Chat and Tune tabs' views: a run in the Tune
	// tab opens a chat with its adapter, and a dataset dropped on the
	// window goes to the Tune tab.
	chat    *chatView
	tune    *tuneView
	voice   *voiceView // the Voice tab, whose voice the chat reads replies with
	tuneTab *container.TabItem
	// statusListeners are told of every engine status change, on the UI
	// goroutine.
	statusListeners []func(app.Status)

	// baseRoots are the other tools' stores; the user's folders and files
	// from the settings are added to them (roots). Tests point them at
	// temporary folders.
	baseRoots library.Roots
	// lib is read by the engine's Resolve on the engine goroutine, so it
	// is guarded by libMu.
	libMu sync.Mutex
	lib   *library.Library

	entries    []library.Entry // the last scan's models, sorted by name
	adapters   []library.Entry // the last scan's LoRA adapters, sorted by name
	entriesGen int             // counts the scans whose entries were shown
	scanned    bool            // the first scan has finished
	scanning   int             // scans under way
	scanGen    int             // the newest scan; older ones' results are dropped
	// libraryListeners are told when entries or the load state change.
	libraryListeners []func()

	// loading is the model being loaded ("" when none), with the bytes
	// uploaded so far; loadErrs the last failure of each model, by path.
	loading             string
	loadDone, loadTotal int64
	loadErrs            map[string]string

	// started is closed once the first scan, and the loading of the last
	// model it may start, are over: what the screenshots wait for.
	started   chan struct{}
	startOnce sync.Once
	// closed is set once the window has closed or the studio quits, on
	// the UI goroutine before Fyne's loop ends; other goroutines read it.
	closed atomic.Bool
	// closeOnce runs close once: from quit, and again from Run's defer.
	closeOnce sync.Once
	// quitting is set by quit, which runs once (the close button may be
	// pressed again while the studio closes).
	quitting bool
	// exit ends the process once quit has closed the studio (Run's); nil
	// leaves the ending to Fyne (tests).
	exit func()
	// api is the studio's API server (serve.go).
	api *apiServer
	// closers run when the studio closes, before the engine: a panel stops
	// its work there (the chat cancels a reply and flushes its history).
	closers []func()
}

// newStudio loads the settings from dir and starts the engine. A settings
// file that cannot be read is reported in the status bar, and the defaults
// are used.
func newStudio(a fyne.App, w fyne.Window, dir string) *studio {
	st := &studio{app: a, win: w, dir: dir, status: widget.NewLabel(""),
		loadErrs: map[string]string{}, started: make(chan struct{})}
	st.post = st.postToUI
	w.SetOnClosed(func() { st.closed.Store(true) })
	a.Settings().SetTheme(newStudioTheme())
	st.status.Truncation = fyne.TextTruncateEllipsis
	s, err := settings.Load(st.settingsPath())
	st.settings = s
	st.settingsOut = newSettingsWriter(st.showError)
	st.adapter = computeLine(st.settings, st.gpuOptions())
	st.status.SetText(statusText(st.adapter, app.Status{}))
	if err != nil {
		st.status.SetText(err.Error())
	}
	st.engine = app.NewEngine(st.engineOptions())
	return st
}

// postToUI runs f on the UI goroutine, through fyne.Do, unless the studio
// has closed. Once Fyne's loop has ended, fyne.Do runs f at once on the
// caller's goroutine (a reply's, a timer's, a download's), where no widget
// may be touched; and a report that comes while the studio shuts down has
// no one left to tell.
func (st *studio) postToUI(f func()) {
	if st.closed.Load() {
		return
	}
	fyne.Do(func() {
		if !st.closed.Load() {
			f()
		}
	})
}

// quit ends the studio: from code, or from the window's close button. It
// runs on the UI goroutine, which it keeps while the studio closes (the
// window hidden): closed is set first, so postToUI drops what other
// goroutines report from then on, and the panels' closers touch their
// widgets on the goroutine that owns them. Then it ends the process
// through exit, where Run set one (see there why), else through Fyne.
func (st *studio) quit() {
	if st.quitting {
		return
	}
	st.quitting = true
	st.win.Hide()
	st.close()
	if st.exit != nil {
		st.exit()
	}
	st.app.Quit()
}

func (st *studio) settingsPath() string { return filepath.Join(st.dir, "settings.json") }

// saveSettings writes the settings in the background; a failure (a full
// disk) is shown, and the settings stay as they are in memory.
func (st *studio) saveSettings() {
	s := st.settings
	// The writer's goroutine reads the copy while the UI goroutine goes on
	// appending to these.
	s.Folders, s.Files = slices.Clone(s.Folders), slices.Clone(s.Files)
	st.settingsOut.save(st.settingsPath(), s)
}

// settingsWriter writes the settings on a goroutine of its own: the write
// is synced (internal/atomicfile), which can take tens of milliseconds on
// a busy disk, too long for the UI goroutine. Only the newest settings
// matter, so settings still waiting are replaced by newer ones.
type settingsWriter struct {
	onError func(error)

	mu      sync.Mutex
	idle    *sync.Cond // signalled when the goroutine ends
	pending *pendingSettings
	running bool // a goroutine is writing; it writes pending before it ends
}

type pendingSettings struct {
	path string
	s    settings.Settings
}

func newSettingsWriter(onError func(error)) *settingsWriter {
	w := &settingsWriter{onError: onError}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// save queues s for path and returns at once.
func (w *settingsWriter) save(path string, s settings.Settings) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = &pendingSettings{path, s}
	if !w.running {
		w.running = true
		go w.run()
	}
}

func (w *settingsWriter) run() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.pending != nil {
		p := w.pending
		w.pending = nil
		w.mu.Unlock()
		if err := settings.Save(p.path, p.s); err != nil {
			w.onError(err)
		}
		w.mu.Lock()
	}
	w.running = false
	w.idle.Broadcast()
}

// flush waits until the settings saved so far are on disk.
func (w *settingsWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running {
		w.idle.Wait()
	}
}

func (st *studio) gpuOptions() app.GPUOptions {
	o := app.GPUOptionsFromEnv()
	if st.settings.Adapter != "" {
		o.Adapter = st.settings.Adapter
	}
	return o
}

func (st *studio) engineOptions() app.EngineOptions {
	// A limit that does not parse is reported where it is typed (the
	// Models tab) and ignored here, so a typo never stops the studio.
	budget, _ := parseMemory(st.settings.GPUMemory)
	return app.EngineOptions{
		Backend:   st.settings.Backend,
		GPU:       st.gpuOptions(),
		Context:   st.settings.Context,
		Parallel:  st.settings.Parallel,
		GPUMemory: budget,
		Resolve:   st.resolve,
		Projector: st.projector,
		OnStatus: func(s app.Status) {
			if st.closed.Load() {
				// The window is gone and with it the UI goroutine's
				// loop: nothing is left to tell.
				return
			}
			st.post(func() {
				for _, f := range st.statusListeners {
					f(s)
				}
			})
		},
	}
}

// resolve turns a library name into the file the engine loads. It runs
// on the engine goroutine. Names only, never paths: the studio loads only
// entries of its library, by name, and the API server shares this engine,
// whose requests must not reach a file the library does not list. (The
// command line's library.Resolve lets a path win, so a folder named like a
// model in the working directory would have shadowed the model.)
func (st *studio) resolve(name string) (string, error) {
	return st.models().Resolve(name)
}

// projector is the vision projector of the model the engine loaded by a
// library name (resolve gave it path): the mmproj file the library pairs
// with it (library.Entry.Projector), "" for a model that sees no images.
// It runs on the engine goroutine, when a chat has images. A name the
// library no longer lists (a rescan since the load) falls back to the
// projector beside the file.
func (st *studio) projector(name, path string) (string, error) {
	if p, err := st.currentLibrary().Projector(name); err == nil {
		return p, nil
	}
	return library.ProjectorFor(path)
}

// models is the catalogue of the library's last scan, or of a first scan
// of the other tools' stores before it is done. It is read on the engine
// goroutine and the API server's.
func (st *studio) models() server.Models { return server.Library(st.currentLibrary()) }

// currentLibrary is the library of the last scan, or of the other tools'
// stores before the first scan is done. Any goroutine may call it.
func (st *studio) currentLibrary() *library.Library {
	st.libMu.Lock()
	lib := st.lib
	st.libMu.Unlock()
	if lib == nil {
		lib = library.New(st.baseRoots)
	}
	return lib
}

// restartEngine replaces the engine after a change of adapter or backend.
// The new engine takes requests at once; the old one finishes what it is
// running and what waits behind it, then closes and frees its model, and
// only then is the resident model loaded again on the new one, so the two
// never hold it in GPU memory together.
func (st *studio) restartEngine() {
	old := st.engine
	resident := old.Status().Model
	st.engine = app.NewEngine(st.engineOptions())
	if st.api != nil && st.api.srv != nil {
		st.api.rebind()
	}
	st.restarts++
	restart, s, gpuOptions := st.restarts, st.settings, st.gpuOptions()
	go func() {
		// The compute line lists the adapters, which opens the Vulkan
		// (Metal, DX12) instance: up to a second on some drivers, too long
		// for the UI goroutine.
		line := computeLine(s, gpuOptions)
		st.post(func() {
			if restart == st.restarts { // a later choice's line wins
				st.adapter = line
				st.status.SetText(statusText(st.adapter, st.engine.Status()))
			}
		})
		for s := old.Status(); s.Busy || s.Waiting > 0; s = old.Status() {
			time.Sleep(50 * time.Millisecond)
		}
		old.Close()
		st.post(func() {
			st.status.SetText(statusText(st.adapter, st.engine.Status()))
			if resident == nil {
				return
			}
			if e, ok := st.entryByPath(resident.Path); ok {
				st.loadModel(e)
			}
		})
	}()
}

// onStatus registers f for engine status changes; f runs on the UI
// goroutine.
func (st *studio) onStatus(f func(app.Status)) { st.statusListeners = append(st.statusListeners, f) }

// showError shows err in a dialog over the window.
func (st *studio) showError(err error) {
	if err == nil {
		return
	}
	st.post(func() { errorDialog(err, st.win) })
}

// openFile shows a file dialog over the window for files ending in one of
// exts, opening at the folder dir ("" or one that cannot be listed: the
// dialog's own), and calls chosen with the path picked.
func (st *studio) openFile(exts []string, dir string, chosen func(path string)) {
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil {
			st.showError(err)
			return
		}
		if r == nil {
			return
		}
		r.Close()
		chosen(r.URI().Path())
	}, st.win)
	d.SetFilter(storage.NewExtensionFileFilter(exts))
	if dir != "" {
		if l, err := storage.ListerForURI(storage.NewFileURI(dir)); err == nil {
			d.SetLocation(l)
		}
	}
	d.Resize(fyne.NewSize(800, 560))
	d.Show()
}

func (st *studio) close() {
	st.closeOnce.Do(func() {
		st.closed.Store(true)
		for _, f := range st.closers {
			f()
		}
		st.engine.Close()
		st.settingsOut.flush()
	})
}

// onClose registers f to run when the studio closes.
func (st *studio) onClose(f func()) { st.closers = append(st.closers, f) }

// content is the main window's content: the four tabs and a status bar. It
// starts the first scan of the library, which loads the last model used.
func (st *studio) content() fyne.CanvasObject {
	st.tuneTab = container.NewTabItem("Tune", tunePanel(st))
	st.tabs = container.NewAppTabs(
		container.NewTabItem("Chat", chatPanel(st)),
		container.NewTabItem("Voice", voicePanel(st)),
		st.tuneTab,
		container.NewTabItem("Models", modelsPanel(st)),
	)
	bar := statusBar(st)
	st.rescan(st.loadLastModel)
	return container.NewBorder(nil, bar, nil, nil, st.tabs)
}

// computeLine is the status bar's first part: where models run and, on
// the CPU, briefly why (app.ChooseBackend, as the engine decides; hearth
// info gives the whole reason).
func computeLine(s settings.Settings, o app.GPUOptions) string {
	if s.Backend == "cpu" {
		return "CPU (no GPU used)"
	}
	b, err := app.ChooseBackend(s.Backend, app.JobInference, o)
	if err != nil {
		return "GPU: " + err.Error()
	}
	if !b.GPU {
		return "CPU (" + b.Brief + ")"
	}
	return fmt.Sprintf("GPU: %s (%s, %s)", b.Adapter.Label(), b.Adapter.Type, b.Adapter.Backend)
}

// statusBar shows the GPU, the resident model with its memory estimate,
// and what the engine is doing.
func statusBar(st *studio) fyne.CanvasObject {
	var last app.Status
	update := func() {
		text := statusText(st.adapter, last)
		if st.loading != "" {
			text += " · loading " + st.loading
			if st.loadTotal > 0 {
				text += fmt.Sprintf(" (%d%%)", 100*st.loadDone/st.loadTotal)
			}
		}
		st.status.SetText(text)
	}
	st.onStatus(func(s app.Status) { last = s; update() })
	st.onLibrary(update)
	return container.NewBorder(nil, nil, nil, serverControl(st), st.status)
}

// statusText is the status bar's line for s.
func statusText(adapter string, s app.Status) string {
	text := adapter
	if m := s.Model; m != nil {
		text += " · " + m.Name
		if m.Memory.Total() > 0 {
			text += " (" + settings.FormatSize(m.Memory.Total()) + ")"
		}
		if m.Backend == "cpu" {
			text += " on the CPU"
		}
	} else {
		text += " · no model loaded"
	}
	switch {
	case s.Training != "":
		text += " · fine-tuning " + s.Training
	case s.Busy && s.Waiting > 0:
		text += fmt.Sprintf(" · working, %d waiting", s.Waiting)
	case s.Busy:
		text += " · working"
	}
	if s.Note != "" {
		text += " · " + s.Note
	}
	return text
}

// errorDialog shows err; a separate function so tests can see what the
// user would.
func errorDialog(err error, w fyne.Window) {
	dialog.ShowError(err, w)
}
