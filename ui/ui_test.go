package ui

import (
	"errors"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
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

func TestStudioHasTheFourTabsAndStatus(t *testing.T) {
	test.NewTempApp(t)
	content := Studio("GPU: test adapter")
	w := test.NewWindow(content)
	defer w.Close()

	border, ok := content.(*fyne.Container)
	if !ok {
		t.Fatalf("studio content is %T", content)
	}
	var tabs *container.AppTabs
	var status string
	for _, o := range border.Objects {
		switch v := o.(type) {
		case *container.AppTabs:
			tabs = v
		case *widget.Label:
			status = v.Text
		}
	}
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
	if status != "GPU: test adapter" {
		t.Errorf("status bar %q", status)
	}
}
