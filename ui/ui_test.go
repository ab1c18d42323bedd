package ui

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
)

func TestRunWithoutDisplaySaysSo(t *testing.T) {
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	if !hasDisplay() {
		if err := Run(); !errors.Is(err, ErrNoDisplay) {
			t.Fatalf("Run without a display: %v, want ErrNoDisplay", err)
		}
	}
}

// newTestStudio is a studio on a test app with its settings in a temp
// folder, the engine on the CPU and no model store to scan, so tests never
// read the developer's own settings or models or need an adapter.
func newTestStudio(t *testing.T) (*studio, fyne.Window) {
	t.Helper()
	return newTestStudioWith(t, nil, func(f func()) { f() })
}

// newTestStudioWith is newTestStudio with setup run on the studio before
// its engine starts (to point it at stores, change settings or give it a
// UI loop), and the window's content built through onUI.
func newTestStudioWith(t *testing.T, setup func(*studio), onUI func(func())) (*studio, fyne.Window) {
	t.Helper()
	a := test.NewTempApp(t)
	w := test.NewWindow(nil)
	dir := t.TempDir()
	st := newStudio(a, w, dir)
	st.engine.Close()
	st.settings.Backend = "cpu"
	st.baseRoots = library.Roots{}
	if setup != nil {
		setup(st)
	}
	st.engine = app.NewEngine(st.engineOptions())
	st.adapter = "GPU: test adapter"
	t.Cleanup(func() { st.close(); w.Close() })
	onUI(func() { w.SetContent(st.content()) })
	return st, w
}

func TestStudioHasTheFourTabsAndStatus(t *testing.T) {
	st, w := newTestStudio(t)
	content := w.Content()

	border, ok := content.(*fyne.Container)
	if !ok {
		t.Fatalf("studio content is %T", content)
	}
	var tabs *container.AppTabs
	for _, o := range border.Objects {
		if v, ok := o.(*container.AppTabs); ok {
			tabs = v
		}
	}
	status := find(content, func(l *widget.Label) bool { return l == st.status })
	if tabs == nil {
		t.Fatal("no tabs in the studio")
	}
	var names []string
	for _, it := range tabs.Items {
		names = append(names, it.Text)
	}
	if len(names) != 4 || names[0] != "Chat" || names[1] != "Voice" || names[2] != "Tune" || names[3] != "Models" {
		t.Errorf("tabs %v, want Chat, Voice, Tune, Models", names)
	}
	if status == nil {
		t.Error("the status label is not in the window")
	}
}

// The settings writer leaves the newest settings on disk, reports a failed
// write, and its flush waits for the write under way.
func TestSettingsWriter(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	w := newSettingsWriter(func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	})
	path := filepath.Join(t.TempDir(), "settings.json")
	for i := range 20 {
		s := settings.Defaults()
		s.Context = i + 1
		w.save(path, s)
	}
	w.flush()
	if s, err := settings.Load(path); err != nil || s.Context != 20 {
		t.Errorf("on disk after flush: context %d, %v; want the last, 20", s.Context, err)
	}
	// A file where the folder should be: the write fails and says so.
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o644)
	w.save(filepath.Join(blocked, "settings.json"), settings.Defaults())
	w.flush()
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 1 {
		t.Errorf("errors reported: %v, want the failed write's", errs)
	}
}
