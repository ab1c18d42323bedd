package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
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
// be used but not for text meant to be read; hint text takes colorNameHint
// instead (see hint). Its light variant's placeholder grey (0x88 on white,
// 3.5:1, the colour of a form's hints) and its warning, success and error
// colours (2.1, 1.5 and 3.7:1 on white) are darkened the same way.
type studioTheme struct{ fyne.Theme }

func newStudioTheme() fyne.Theme { return studioTheme{theme.DefaultTheme()} }

var (
	// The dark hint sits between the disabled grey and the foreground
	// (0xf3): 6.5:1 on the background, quieter than the text it explains.
	hintDark = color.NRGBA{R: 0x9a, G: 0x9a, B: 0x9a, A: 0xff}
	// The light variant's foreground is already a grey (0x56, 7.4:1): the
	// hint is the lightest grey that keeps 4.5:1 on the input background
	// (0xf3), where placeholders show.
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

// hintTheme is the theme inside hint: the app's theme, with the colour of
// low-importance text (Fyne's disabled colour) replaced by the hint
// colour. Nothing inside a hint can be disabled: it holds a label only.
type hintTheme struct{}

func (hintTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	if n == theme.ColorNameDisabled {
		n = colorNameHint
	}
	return studioTheme{appTheme()}.Color(n, v)
}

func (hintTheme) Font(s fyne.TextStyle) fyne.Resource     { return appTheme().Font(s) }
func (hintTheme) Icon(n fyne.ThemeIconName) fyne.Resource { return appTheme().Icon(n) }
func (hintTheme) Size(n fyne.ThemeSizeName) float32       { return appTheme().Size(n) }

func appTheme() fyne.Theme { return fyne.CurrentApp().Settings().Theme() }

// hint shows l as quiet text in the hint colour and returns what to place
// in a layout; l stays the label to set the text of.
func hint(l *widget.Label) fyne.CanvasObject {
	l.Importance = widget.LowImportance
	return container.NewThemeOverride(l, hintTheme{})
}
