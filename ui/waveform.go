package ui

import (
	"image"
	"image/color"
	"math"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// waveform draws speech as it is synthesised: each pixel column shows the
// lowest and the highest sample that falls in it (a min/max envelope), so
// a click or a peak is never lost however long the speech, and a play
// cursor marks what has been heard. The envelope is rasterized into one
// image at the view's pixel size, as lossPlot's curves are, and the cursor
// is a line over it, so moving the cursor twenty times a second redraws
// nothing.
//
// Minutes of speech are millions of samples (24 000 a second): a redraw
// that read them all would cost tens of milliseconds on the UI goroutine.
// The widget keeps the min/max of every block of waveBlock samples as they
// arrive, and a column of many blocks is made of those, so a redraw costs
// the width plus samples/waveBlock, not the samples.
type waveform struct {
	widget.BaseWidget
	rate    int // samples a second
	samples []float32
	// blocks are the min/max of samples[i*waveBlock:(i+1)*waveBlock]; the
	// last block may be partial and grows with the next Append.
	blocks []span
	// cursor is the play position; it shows when showCursor is set.
	cursor     time.Duration
	showCursor bool
	// r is the renderer, once made: the cursor moves on it without a
	// Refresh, which would draw the envelope again.
	r *waveformRenderer
}

// span is the range of some samples.
type span struct{ lo, hi float32 }

func (s span) merge(o span) span { return span{min(s.lo, o.lo), max(s.hi, o.hi)} }

// waveBlock is the samples per kept min/max: 256 is about 10 ms at 24 kHz,
// below a pixel column's worth in any view of more than a few seconds.
const waveBlock = 256

// waveMinSpan is the shortest time the x axis shows: a short sentence
// grows from the left instead of being stretched over the whole width, and
// the first chunks of a long text do not jump in scale at every chunk.
const waveMinSpan = 5 * time.Second

func newWaveform(rate int) *waveform {
	w := &waveform{rate: max(rate, 1)}
	w.ExtendBaseWidget(w)
	return w
}

// Clear empties the view.
func (w *waveform) Clear() {
	w.samples, w.blocks = nil, nil
	w.showCursor = false
	w.Refresh()
}

// Append adds samples at the end. Samples that are not numbers are drawn
// as silence.
func (w *waveform) Append(samples []float32) {
	if len(samples) == 0 {
		return
	}
	for _, v := range samples {
		if v != v || math.IsInf(float64(v), 0) {
			v = 0
		}
		v = min(max(v, -1), 1) // what a sound card plays of it
		i := len(w.samples)
		w.samples = append(w.samples, v)
		if i%waveBlock == 0 {
			w.blocks = append(w.blocks, span{v, v})
		} else {
			b := &w.blocks[len(w.blocks)-1]
			b.lo, b.hi = min(b.lo, v), max(b.hi, v)
		}
	}
	w.Refresh()
}

// Samples are the samples shown; the caller must not change them.
func (w *waveform) Samples() []float32 { return w.samples }

// Duration is the length of the samples shown.
func (w *waveform) Duration() time.Duration { return samplesDuration(len(w.samples), w.rate) }

func samplesDuration(n, rate int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / int64(max(rate, 1)))
}

// SetCursor shows the play position at d; HideCursor removes it.
func (w *waveform) SetCursor(d time.Duration) {
	if w.showCursor && w.cursor == d {
		return
	}
	w.cursor, w.showCursor = d, true
	if w.r != nil {
		w.r.placeCursor()
	}
}

func (w *waveform) HideCursor() {
	if !w.showCursor {
		return
	}
	w.showCursor = false
	if w.r != nil {
		w.r.placeCursor()
	}
}

// span is the samples the x axis spans: the speech, or waveMinSpan.
func (w *waveform) span() int {
	return max(len(w.samples), int(int64(w.rate)*int64(waveMinSpan)/int64(time.Second)), 1)
}

// envelope reduces the samples to width columns over an axis of total
// samples: column x holds the min/max of the samples that fall in it, and
// ok[x] is false for a column past the end of the speech. A column wider
// than two blocks is made of whole blocks (each counted in the column its
// first sample falls in), which moves a peak by at most one block, less
// than a column.
func (w *waveform) envelope(width, total int) ([]span, []bool) {
	cols, ok := make([]span, width), make([]bool, width)
	if width <= 0 || len(w.samples) == 0 {
		return cols, ok
	}
	colOf := func(i int) int { return min(int(int64(i)*int64(width)/int64(total)), width-1) }
	add := func(x int, s span) {
		if ok[x] {
			cols[x] = cols[x].merge(s)
		} else {
			cols[x], ok[x] = s, true
		}
	}
	if total/width >= 2*waveBlock {
		for b, s := range w.blocks {
			add(colOf(b*waveBlock), s)
		}
		return cols, ok
	}
	for i, v := range w.samples {
		add(colOf(i), span{v, v})
	}
	return cols, ok
}

func (w *waveform) CreateRenderer() fyne.WidgetRenderer {
	r := &waveformRenderer{w: w}
	r.image = canvas.NewRaster(r.draw)
	r.frame = canvas.NewRectangle(color.Transparent)
	r.frame.StrokeWidth = 1
	r.cursor = canvas.NewLine(color.Black)
	r.cursor.StrokeWidth = 2
	r.empty = canvas.NewText("The speech's waveform is drawn here as it is synthesised.", color.Black)
	r.empty.TextSize = theme.CaptionTextSize()
	r.objects = []fyne.CanvasObject{r.frame, r.image, r.cursor, r.empty}
	r.applyTheme()
	w.r = r
	return r
}

// waveformRenderer draws the envelope into a raster image and lays the
// cursor over it.
type waveformRenderer struct {
	w       *waveform
	image   *canvas.Raster
	frame   *canvas.Rectangle
	cursor  *canvas.Line
	empty   *canvas.Text
	objects []fyne.CanvasObject
}

func (r *waveformRenderer) color(name fyne.ThemeColorName) color.Color {
	return theme.ColorForWidget(name, r.w)
}

func (r *waveformRenderer) applyTheme() {
	r.frame.StrokeColor = r.color(theme.ColorNameSeparator)
	r.cursor.StrokeColor = r.color(theme.ColorNameForeground)
	r.empty.Color = r.color(theme.ColorNamePlaceHolder)
}

func (r *waveformRenderer) Objects() []fyne.CanvasObject { return r.objects }
func (r *waveformRenderer) Destroy()                     {}
func (r *waveformRenderer) MinSize() fyne.Size           { return fyne.NewSize(240, 120) }

func (r *waveformRenderer) Refresh() {
	r.applyTheme()
	r.Layout(r.w.Size())
	canvas.Refresh(r.w)
}

func (r *waveformRenderer) Layout(size fyne.Size) {
	r.frame.Resize(size)
	r.image.Resize(size)
	r.empty.Hidden = len(r.w.samples) > 0
	ts := fyne.MeasureText(r.empty.Text, r.empty.TextSize, r.empty.TextStyle)
	r.empty.Move(fyne.NewPos((size.Width-ts.Width)/2, (size.Height-ts.Height)/2))
	r.placeCursor()
	canvas.Refresh(r.image)
}

// placeCursor puts the cursor line at the play position.
func (r *waveformRenderer) placeCursor() {
	w := r.w
	size := w.Size()
	r.cursor.Hidden = !w.showCursor || len(w.samples) == 0
	if !r.cursor.Hidden {
		at := float64(w.cursor) / float64(time.Second) * float64(w.rate)
		x := float32(min(max(at/float64(w.span()), 0), 1)) * size.Width
		r.cursor.Position1 = fyne.NewPos(x, 0)
		r.cursor.Position2 = fyne.NewPos(x, size.Height)
	}
	r.cursor.Refresh()
}

// draw is the raster's generator: a centre line, and each column's span
// from its lowest to its highest sample, w×h pixels.
func (r *waveformRenderer) draw(width, height int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	if width < 1 || height < 2 || len(r.w.samples) == 0 {
		return img // the empty text alone, not struck through by the axis
	}
	mid := float64(height-1) / 2
	yOf := func(v float32) float64 { return mid - float64(v)*mid }
	cols, ok := r.w.envelope(width, r.w.span())

	axis := newStroke(width, height)
	axis.segment(0, math.Round(mid)+0.5, float64(width), math.Round(mid)+0.5, 0.25)
	axis.paint(img, r.color(theme.ColorNameSeparator))

	wave := newStroke(width, height)
	for x, c := range cols {
		if !ok[x] {
			continue
		}
		// At least a pixel high, so silence shows as a line where the
		// speech has reached.
		top, bottom := yOf(c.hi), yOf(c.lo)
		if bottom-top < 1 {
			top, bottom = (top+bottom)/2-0.5, (top+bottom)/2+0.5
		}
		cx := float64(x) + 0.5
		wave.segment(cx, top, cx, bottom, 0.5)
	}
	wave.paint(img, r.color(theme.ColorNamePrimary))
	return img
}
