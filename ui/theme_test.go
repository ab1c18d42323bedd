package ui

import (
	"image/color"
	"math"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app/chats"
)

// minContrast is WCAG 2's level AA contrast for body text (success
// criterion 1.4.3): 4.5:1.
const minContrast = 4.5

// contrast is the WCAG 2 contrast ratio of two opaque colours:
// (L1 + 0.05) / (L2 + 0.05) of their relative luminances, L1 the lighter.
func contrast(a, b color.Color) float64 {
	la, lb := luminance(a), luminance(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// luminance is WCAG 2's relative luminance of c's sRGB channels.
func luminance(c color.Color) float64 {
	r, g, b, _ := color.NRGBAModel.Convert(c).RGBA()
	lin := func(v uint32) float64 {
		s := float64(v) / 0xffff
		if s <= 0.04045 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

// The formula against the values WCAG's own examples give: black on white
// is 21:1, a colour on itself 1:1, and #767676 on white 4.54:1 (the
// lightest grey usually quoted as passing AA).
func TestContrastFormula(t *testing.T) {
	white, black := color.White, color.Black
	for _, c := range []struct {
		a, b color.Color
		want float64
	}{
		{black, white, 21},
		{white, white, 1},
		{color.NRGBA{0x76, 0x76, 0x76, 0xff}, white, 4.54},
	} {
		// Two decimals, as the ratios are quoted.
		if got := contrast(c.a, c.b); math.Abs(got-c.want) > 0.005 {
			t.Errorf("contrast(%v, %v) = %.3f, want %.2f", c.a, c.b, got, c.want)
		}
	}
}

var variants = map[string]fyne.ThemeVariant{"dark": theme.VariantDark, "light": theme.VariantLight}

// The studio theme's text colours keep 4.5:1 on the window's background in
// both variants; the hint colour also on an entry's background, where it
// is a placeholder.
func TestThemeTextContrast(t *testing.T) {
	th := newStudioTheme()
	for vn, v := range variants {
		bg, input := th.Color(theme.ColorNameBackground, v), th.Color(theme.ColorNameInputBackground, v)
		for _, n := range []fyne.ThemeColorName{colorNameHint, theme.ColorNamePlaceHolder, theme.ColorNameForeground,
			theme.ColorNameError, theme.ColorNameWarning, theme.ColorNameSuccess} {
			if c := contrast(th.Color(n, v), bg); c < minContrast {
				t.Errorf("%s: %s on the background is %.2f:1", vn, n, c)
			}
		}
		for _, n := range []fyne.ThemeColorName{colorNameHint, theme.ColorNamePlaceHolder} {
			if c := contrast(th.Color(n, v), input); c < minContrast {
				t.Errorf("%s: %s on an entry is %.2f:1", vn, n, c)
			}
		}
	}
}

// Every text of every tab, and of a chat's messages, but the controls',
// keeps at least 4.5:1 contrast on the background in both variants: each
// text segment of each rich text (a Label draws its text with one, as does
// a hintLabel), in the colour it asks its theme for.
func TestEveryLabelIsReadable(t *testing.T) {
	st, w := newTestStudio(t)
	w.Resize(defaultWindowSize)
	reply := newMessageRow(st.chat, 1, chats.Message{Role: chats.Assistant, Content: "Hello.",
		Reply: chats.Reply{Model: "tiny-llama", Tokens: 3, TokensPerSecond: 12, Stop: "stop"}}, false)
	roots := map[string]fyne.CanvasObject{"a reply": reply.box}
	for _, it := range st.tabs.Items {
		roots[it.Text] = it.Content
	}
	checked := 0
	for where, root := range roots {
		walkObjects(root, func(o fyne.CanvasObject) bool {
			switch o.(type) {
			case *widget.Button, *widget.Select, *widget.Entry, *widget.Check, *widget.ProgressBar:
				// Controls draw their text on a background of their own,
				// and dimmed on purpose while they cannot be used.
				return false
			}
			rt, ok := o.(*widget.RichText)
			if !ok {
				return true
			}
			for _, s := range rt.Segments {
				seg, ok := s.(*widget.TextSegment)
				if !ok || strings.TrimSpace(seg.Text) == "" && len(rt.Segments) > 1 {
					continue
				}
				name := seg.Style.ColorName
				if name == "" {
					name = theme.ColorNameForeground // as TextSegment draws it
				}
				for vn, v := range variants {
					bg := fyne.CurrentApp().Settings().Theme().Color(theme.ColorNameBackground, v)
					if c := contrast(rt.Theme().Color(name, v), bg); c < minContrast {
						t.Errorf("%s, %s: the text %q (%s) is %.2f:1 on the background", where, vn, seg.Text, name, c)
					}
				}
				checked++
			}
			return false
		})
	}
	if checked < 20 {
		t.Fatalf("only %d texts checked: the walk missed the tabs", checked)
	}
}
