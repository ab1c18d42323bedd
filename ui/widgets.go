package ui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// setEnabled enables ws when on and disables them otherwise.
func setEnabled(on bool, ws ...fyne.Disableable) {
	for _, w := range ws {
		if on {
			w.Enable()
		} else {
			w.Disable()
		}
	}
}

// headingLabel is a screen's title, bold at the theme's heading size.
func headingLabel(title string) *widget.Label {
	l := widget.NewLabelWithStyle(title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	l.SizeName = theme.SizeNameHeadingText
	return l
}

// introLabel is the line under a tab's title that says what the tab does,
// wrapped and set back from the controls.
func introLabel(text string) *hintLabel {
	l := newHintLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return l
}

// scrollColumn is a column of controls that scrolls when the window is too
// short for it. Fyne draws the scroll bar over the content's right edge,
// where the column's buttons end, so the content is laid out a bar's
// width (theme.SizeNameScrollBar, the bar's width under the pointer)
// narrower.
func scrollColumn(content fyne.CanvasObject) *container.Scroll {
	return container.NewVScroll(container.New(scrollBarGutter{}, content))
}

type scrollBarGutter struct{}

func (scrollBarGutter) MinSize(objs []fyne.CanvasObject) fyne.Size {
	return objs[0].MinSize().AddWidthHeight(theme.Size(theme.SizeNameScrollBar), 0)
}

func (scrollBarGutter) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	objs[0].Move(fyne.NewPos(0, 0))
	objs[0].Resize(size.SubtractWidthHeight(theme.Size(theme.SizeNameScrollBar), 0))
}
