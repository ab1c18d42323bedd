package ui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/model"
)

// writeAdapter writes a rank-2 LoRA adapter on every target of the model at
// base to path, as the Tune tab writes one.
func writeAdapter(t *testing.T, base, path string) {
	t.Helper()
	m, err := model.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a := &adapter.Adapter{Arch: m.Config.Arch, Alpha: 4, Pairs: map[string]*adapter.Pair{}}
	for n, s := range m.LoRATargets() {
		a.Pairs[n] = &adapter.Pair{Rank: 2, Rows: s[0], Cols: s[1], A: make([]float32, 2*s[1]), B: make([]float32, 2*s[0])}
	}
	if err := adapter.WriteGGUF(path, a); err != nil {
		t.Fatal(err)
	}
}

// TestAdaptersAreListedAndOffered: an adapter where training writes it is
// listed in the Models tab as an adapter of the model it fits (it was a
// broken model, "key llama.embedding_length: missing"), chats on that model
// from there, and the chat's adapter menu offers it by name.
func TestAdaptersAreListedAndOffered(t *testing.T) {
	dir := modelFolder(t)
	var tuned string
	st, _, l := modelsStudio(t, func(st *studio) {
		st.settings.Folders = []string{dir}
		tuned = filepath.Join(st.dir, "adapters", "tuned.gguf")
		if err := os.MkdirAll(filepath.Dir(tuned), 0o755); err != nil {
			t.Fatal(err)
		}
		writeAdapter(t, filepath.Join(dir, "tiny-llama.gguf"), tuned)
	})
	eventually(t, l, "the models and the adapter listed", func() bool { return len(st.entries) == 2 && len(st.adapters) == 1 })
	l.wait(func() {
		text := shown(modelsTab(st))
		for _, want := range []string{"2 models and 1 adapter on this machine", "tuned  · adapter", "LoRA r2"} {
			if !strings.Contains(text, want) {
				t.Errorf("the Models tab does not show %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "cannot be used") || strings.Contains(text, "embedding_length") {
			t.Errorf("the adapter is listed as a broken model:\n%s", text)
		}
		find[*widget.List](modelsTab(st), nil).Select(2)
		text = shown(modelsTab(st))
		if !strings.Contains(text, "LoRA adapter") || !strings.Contains(text, "Fits tiny-llama.") {
			t.Errorf("the adapter's details do not say what it fits:\n%s", text)
		}

		cv := st.chat
		items := cv.adapterMenuItems()
		if len(items) < 3 || items[0].Label != "tuned · for tiny-llama" {
			var labels []string
			for _, it := range items {
				labels = append(labels, it.Label)
			}
			t.Fatalf("the chat's adapter menu offers %q, want tuned first", labels)
		}
		items[0].Action()
		if cv.cur.Adapter == nil || cv.cur.Adapter.Path != tuned || cv.adapterName.Text != "tuned.gguf" {
			t.Errorf("choosing tuned in the menu set %+v", cv.cur.Adapter)
		}

		test.Tap(button(modelsTab(st), "Chat with it"))
	})
	eventually(t, l, "tiny-llama loaded for the adapter", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-llama" && st.chat.cur.Adapter != nil && st.chat.cur.Adapter.Path == tuned
	})
}
