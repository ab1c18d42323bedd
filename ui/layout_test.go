package ui

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// The Voice and Tune tabs fit the window at its default size, and their
// left columns, which scroll when the window is short, keep every control
// clear of the scroll bar: Fyne draws the bar over the right edge of a
// scroll's content, and it covered the Voice tab's Export… and preview
// buttons; the first-run screen's Make and load too.
func TestColumnsFitAndClearTheScrollBar(t *testing.T) {
	st, w := newTestStudio(t)
	w.Resize(defaultWindowSize)
	// Open the Tune tab's advanced settings, so its column is as full as
	// it gets.
	walkObjects(st.tune.content, func(o fyne.CanvasObject) bool {
		if a, ok := o.(*widget.Accordion); ok {
			a.OpenAll()
		}
		return true
	})
	d := fyne.CurrentApp().Driver()
	bar := theme.Size(theme.SizeNameScrollBar)
	clearOfBar := func(name string, column *container.Scroll) {
		t.Helper()
		edge := d.AbsolutePositionForObject(column).X + column.Size().Width - bar
		controls := 0
		walkShown(column.Content, func(o fyne.CanvasObject) bool {
			switch o.(type) {
			case *widget.Button, *widget.Entry, *widget.Select, *widget.Slider:
			default:
				return true
			}
			controls++
			// Half a pixel: positions are float32 sums of paddings.
			if right := d.AbsolutePositionForObject(o).X + o.Size().Width; right > edge+0.5 {
				t.Errorf("%s: a %T ends at %.1f, under the scroll bar from %.1f", name, o, right, edge)
			}
			return false
		})
		if controls < 4 {
			t.Errorf("%s: only %d controls found in the column", name, controls)
		}
	}
	for _, c := range []struct {
		tab    int
		column *container.Scroll
	}{{1, st.voice.left}, {2, st.tune.left}} {
		st.tabs.SelectIndex(c.tab)
		name := st.tabs.Items[c.tab].Text
		if min := st.tabs.Items[c.tab].Content.MinSize(); min.Width > defaultWindowSize.Width {
			t.Errorf("the %s tab needs %.0f px, wider than the window's %.0f", name, min.Width, defaultWindowSize.Width)
		}
		clearOfBar(name+" tab", c.column)
	}

	// The first-run screen scrolls as a whole; its Make and load button
	// sat under the bar.
	first := firstRunView(st)
	w.SetContent(first)
	w.Resize(defaultWindowSize)
	var column *container.Scroll
	walkObjects(first, func(o fyne.CanvasObject) bool {
		if s, ok := o.(*container.Scroll); ok && column == nil {
			column = s
		}
		return column == nil
	})
	if column == nil {
		t.Fatal("the first-run screen does not scroll")
	}
	clearOfBar("first-run screen", column)
}
