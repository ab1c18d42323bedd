package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// colorNameHint is the studio theme's colour of quiet text: a tab's
// description, a hint under a control, a caption, a reply's header.
const colorNameHint fyne.ThemeColorName = "hearthHint"

// studioTheme is Fyne's default theme with text colours that every
// variant keeps readable: at least 4.5:1 against the background (WCAG
// 2's level AA for body text), checked by TestThemeTextContrast.
//
// Fyne draws low-importance labels in its disabled colour (0x39 on 0x17
// in the dark variant, 1.6:1), which is right for a control that cannot
// be used but not for text meant to be read; hint text is a hintLabel, in
// colorNameHint. Its light variant's placeholder grey (0x88 on white,
// 3.5:1, the colour of a form's hints) and its warning, success and error
// colours (2.2, 1.5 and 3.7:1 on white) are darkened the same way.
type studioTheme struct{ fyne.Theme }

func newStudioTheme() fyne.Theme { return studioTheme{theme.DefaultTheme()} }

var (
	// The dark hint sits between the disabled grey and the foreground
	// (0xf3): 6.4:1 on the background, quieter than the text it explains.
	hintDark = color.NRGBA{R: 0x9a, G: 0x9a, B: 0x9a, A: 0xff}
	// The light variant's foreground is already a grey (0x56, 7.3:1): the
	// hint is a lighter one that keeps 5.3:1 on the background and 4.8:1
	// on the input background (0xf3), where placeholders show.
	hintLight    = color.NRGBA{R: 0x6b, G: 0x6b, B: 0x6b, A: 0xff}
	errorLight   = color.NRGBA{R: 0xc6, G: 0x28, B: 0x28, A: 0xff}
	warningLight = color.NRGBA{R: 0xa8, G: 0x4a, B: 0x00, A: 0xff}
	successLight = color.NRGBA{R: 0x2e, G: 0x7d, B: 0x32, A: 0xff}
)

// Color is the default theme's colour but for the text colours above.
func (t studioTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	light := v == theme.VariantLight
	switch n {
	case colorNameHint, theme.ColorNamePlaceHolder:
		if light {
			return hintLight
		}
		return hintDark
	case theme.ColorNameError:
		if light {
			return errorLight
		}
	case theme.ColorNameWarning:
		if light {
			return warningLight
		}
	case theme.ColorNameSuccess:
		if light {
			return successLight
		}
	}
	return t.Theme.Color(n, v)
}

// hintLabel is quiet text that explains (a tab's description, a hint
// under a control, a caption, a reply's header): a label in the theme's
// hint colour. Its text is set as a Label's is, through Text or SetText.
type hintLabel struct {
	widget.BaseWidget
	Text       string
	Wrapping   fyne.TextWrap
	Truncation fyne.TextTruncation

	text *widget.RichText
}

func newHintLabel(text string) *hintLabel {
	h := &hintLabel{Text: text}
	h.ExtendBaseWidget(h)
	return h
}

// SetText shows text.
func (h *hintLabel) SetText(text string) {
	h.Text = text
	h.Refresh()
}

// CreateRenderer draws the text as a Label does, with a Label's rich text
// and so its padding, in the hint colour.
func (h *hintLabel) CreateRenderer() fyne.WidgetRenderer {
	h.text = widget.NewRichText(&widget.TextSegment{})
	h.sync()
	return widget.NewSimpleRenderer(h.text)
}

func (h *hintLabel) Refresh() {
	if h.text != nil {
		h.sync()
		h.text.Refresh()
	}
	h.BaseWidget.Refresh()
}

func (h *hintLabel) sync() {
	h.text.Wrapping, h.text.Truncation = h.Wrapping, h.Truncation
	seg := h.text.Segments[0].(*widget.TextSegment)
	seg.Text = h.Text
	seg.Style = widget.RichTextStyle{ColorName: colorNameHint, Inline: true}
}
