package ui

import (
	"fyne.io/fyne/v2"
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
func introLabel(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.LowImportance
	return l
}
