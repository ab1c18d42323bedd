package ui

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// markdownView shows Markdown text that may grow, as a reply does while it
// streams. Parsing the whole reply again on each update costs time that
// grows with the reply (Fyne wraps every row again: 16 kB of Markdown took
// 20 ms on the UI goroutine here, 64 kB 270 ms), so the text is cut into
// blocks where no later text can change how a block renders; a finished
// block is parsed once, and only the last, growing one is parsed again.
type markdownView struct {
	box *fyne.Container // one RichText per block; the last is the tail
	src string

	frozen  int // bytes of src in finished blocks
	scanned int // bytes of src looked at for block ends: whole lines only
	// reopen starts the tail when a long code block was cut in two: the
	// opening fence line, so the rest still renders as code.
	reopen string
	blank  bool // the last line scanned was blank, outside a fence
	// fence is the open code fence's marker (``` or ~~~, maybe longer),
	// "" outside one; fenceLine its opening line; fenceRows the code lines
	// since the fence opened or was last cut.
	fence     string
	fenceLine string
	fenceRows int

	tail *widget.RichText
}

// fenceRowsPerBlock bounds the code lines parsed again per update of a
// long code block; beyond it the block is cut and shows as two adjacent
// code blocks.
const fenceRowsPerBlock = 64

func newMarkdownView() *markdownView {
	m := &markdownView{box: container.NewVBox()}
	m.reset()
	return m
}

func (m *markdownView) reset() {
	*m = markdownView{box: m.box, tail: markdownText("")}
	m.box.Objects = []fyne.CanvasObject{m.tail}
	m.box.Refresh()
}

// Set shows text. Text that extends what is shown (the next part of a
// stream) is parsed from the last unfinished block on; other text is
// parsed afresh.
func (m *markdownView) Set(text string) {
	if !strings.HasPrefix(text, m.src) {
		m.reset()
	}
	m.src = text
	blocks := len(m.box.Objects)
	for m.scanned < len(m.src) {
		i := strings.IndexByte(m.src[m.scanned:], '\n')
		if i < 0 {
			break
		}
		start, end := m.scanned, m.scanned+i+1
		m.line(m.src[start:end-1], start, end)
		m.scanned = end
	}
	m.tail.ParseMarkdown(displayMarkdown(m.reopen + m.src[m.frozen:]))
	if len(m.box.Objects) != blocks {
		// Place the new blocks now: the box is laid out again when its
		// parent resizes it, but only if its height changed.
		m.box.Layout.Layout(m.box.Objects, m.box.Size())
	}
}

// line looks at one whole line of the source, src[start:end] with its
// newline, and freezes the blocks it finishes. A blank line followed by a
// line that starts at the margin and is not a list item ends every open
// block in CommonMark (a list item or an indented line could continue a
// list instead, so those wait).
func (m *markdownView) line(l string, start, end int) {
	trimmed := strings.TrimLeft(l, " ")
	indent := len(l) - len(trimmed)
	if m.fence != "" {
		if indent < 4 && closesFence(trimmed, m.fence) {
			m.fence = ""
			m.blank = false
			return
		}
		m.fenceRows++
		if m.fenceRows >= fenceRowsPerBlock {
			m.freeze(end, m.fence+"\n")
			m.reopen = m.fenceLine + "\n"
			m.fenceRows = 0
		}
		return
	}
	blank := strings.TrimSpace(l) == ""
	if m.blank && !blank && l[0] != ' ' && l[0] != '\t' && !listItem(l) {
		m.freeze(start, "")
		m.reopen = ""
	}
	if f := fenceMarker(trimmed); f != "" && indent < 4 {
		m.fence, m.fenceLine, m.fenceRows = f, l, 0
	}
	m.blank = blank
}

// freeze moves src[frozen:at] into a block of its own, closing it with
// suffix (a fence, when a code block is cut).
func (m *markdownView) freeze(at int, suffix string) {
	if at <= m.frozen {
		return
	}
	block := markdownText(m.reopen + m.src[m.frozen:at] + suffix)
	n := len(m.box.Objects)
	m.box.Objects = append(m.box.Objects[:n-1], block, m.tail)
	m.box.Refresh()
	m.frozen = at
}

func markdownText(src string) *widget.RichText {
	rt := widget.NewRichTextFromMarkdown(displayMarkdown(src))
	rt.Wrapping = fyne.TextWrapWord
	return rt
}

// fenceMarker is the fence a line opens (``` or ~~~, three or more), or "".
func fenceMarker(trimmed string) string {
	if len(trimmed) < 3 || (trimmed[0] != '`' && trimmed[0] != '~') {
		return ""
	}
	n := len(trimmed) - len(strings.TrimLeft(trimmed, trimmed[:1]))
	if n < 3 {
		return ""
	}
	// A backtick fence's info string cannot hold a backtick: that line
	// is inline code, not a fence.
	if trimmed[0] == '`' && strings.Contains(trimmed[n:], "`") {
		return ""
	}
	return trimmed[:n]
}

// closesFence reports whether a line closes fence: the same character at
// least as many times, then only spaces.
func closesFence(trimmed, fence string) bool {
	rest := strings.TrimLeft(trimmed, fence[:1])
	return len(trimmed)-len(rest) >= len(fence) && strings.TrimSpace(rest) == ""
}

// listItem reports whether l starts a list item: -, + or * or a number of
// up to nine digits with . or ), then a space or the line's end.
func listItem(l string) bool {
	i := 0
	switch {
	case l[0] == '-' || l[0] == '+' || l[0] == '*':
		i = 1
	default:
		for i < len(l) && i < 9 && l[i] >= '0' && l[i] <= '9' {
			i++
		}
		if i == 0 || i >= len(l) || (l[i] != '.' && l[i] != ')') {
			return false
		}
		i++
	}
	return i == len(l) || l[i] == ' ' || l[i] == '\t'
}

// maxLineRunes bounds the length of a line handed to RichText. Fyne's word
// wrap measures the rest of a line once for every row it makes, so a
// line's cost grows with the square of its length: one unbroken
// 4,000-character line took 170 ms to lay out here, 16,000 characters 3.8
// s. Longer lines are broken for display only; copying takes the text as
// it is.
const maxLineRunes = 200

// displayMarkdown breaks src's lines longer than maxLineRunes so that the
// Markdown still means the same: prose at a space (a soft line break
// renders as the space it replaces), code where it reaches the limit.
func displayMarkdown(src string) string {
	if !hasLongLine(src) {
		return src
	}
	var b strings.Builder
	fence := ""
	for l := range strings.Lines(src) {
		body := strings.TrimSuffix(l, "\n")
		trimmed := strings.TrimLeft(body, " ")
		indent := len(body) - len(trimmed)
		switch {
		case fence != "":
			if indent < 4 && closesFence(trimmed, fence) {
				fence = ""
			}
			b.WriteString(breakLine(l, true))
		case fenceMarker(trimmed) != "" && indent < 4:
			fence = fenceMarker(trimmed)
			b.WriteString(l)
		case strings.HasPrefix(trimmed, "#"):
			// A heading is one line; its rest would become a paragraph.
			b.WriteString(l)
		default:
			b.WriteString(breakLine(l, false))
		}
	}
	return b.String()
}

func hasLongLine(s string) bool {
	for l := range strings.Lines(s) {
		if len(l) > maxLineRunes && utf8.RuneCountInString(l) > maxLineRunes {
			return true
		}
	}
	return false
}

// breakLine breaks l (with its newline, if any) into lines of at most
// maxLineRunes runes. Code is cut at the limit. Prose is broken at the last
// space that leaves the next line starting with a letter or another
// character no Markdown block starts with, so that a break never makes a
// list item, heading or quote; an unbroken run is cut at the limit, its
// continuation escaped where it starts with punctuation. Continuations keep
// the line's indentation, so an indented code line stays code.
func breakLine(l string, code bool) string {
	nl := strings.HasSuffix(l, "\n")
	r := []rune(strings.TrimSuffix(l, "\n"))
	if len(r) <= maxLineRunes {
		return l
	}
	indent := r[:len(r)-len([]rune(strings.TrimLeft(string(r), " \t")))]
	var b strings.Builder
	for len(r) > maxLineRunes {
		cut, skip := maxLineRunes, 0
		if !code {
			for i := maxLineRunes - 1; i > maxLineRunes/2; i-- {
				if r[i] == ' ' && i+1 < len(r) && safeLineStart(r[i+1]) {
					cut, skip = i, 1
					break
				}
			}
		}
		b.WriteString(string(r[:cut]))
		b.WriteByte('\n')
		r = r[cut+skip:]
		b.WriteString(string(indent))
		if !code && skip == 0 && len(r) > 0 && asciiPunct(r[0]) {
			b.WriteByte('\\')
		}
	}
	b.WriteString(string(r))
	if nl {
		b.WriteByte('\n')
	}
	return b.String()
}

// asciiPunct reports whether r is one of the characters CommonMark lets a
// backslash escape.
func asciiPunct(r rune) bool {
	return r < utf8.RuneSelf && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r)
}

// safeLineStart reports whether a line may start with r without starting
// a Markdown block: not punctuation (list markers, #, >, fences, setext
// underlines, HTML), a digit (ordered lists) or a space.
func safeLineStart(r rune) bool {
	if r < utf8.RuneSelf {
		return unicode.IsLetter(r)
	}
	return !unicode.IsSpace(r)
}
