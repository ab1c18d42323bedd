package ui

import (
	"math"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
)

// envelopeByHand is the min/max of the samples in each column, sample by
// sample: what envelope's blocks must agree with.
func envelopeByHand(samples []float32, width, total int) ([]span, []bool) {
	cols, ok := make([]span, width), make([]bool, width)
	for i, v := range samples {
		x := min(i*width/total, width-1)
		if ok[x] {
			cols[x] = cols[x].merge(span{v, v})
		} else {
			cols[x], ok[x] = span{v, v}, true
		}
	}
	return cols, ok
}

// Ten minutes of speech, 14.4 million samples, arriving in chunks: the
// envelope keeps every peak, agrees with a sample-by-sample reduction to
// within a block at the columns' edges, the widget's objects do not grow,
// and a redraw takes milliseconds.
func TestWaveformLargeInput(t *testing.T) {
	const rate = 24000
	n := 10 * 60 * rate
	// A tone whose loudness swells and fades every few seconds, from a
	// table: 14 million calls of math.Sin would take longer than the test.
	tone := make([]float32, 44)
	for k := range tone {
		tone[k] = 0.3 * float32(math.Sin(2*math.Pi*float64(k)/44))
	}
	samples := make([]float32, n)
	for i := range samples {
		samples[i] = tone[i%44] * float32(1+(i/rate)%4) / 2
	}
	spike := n/2 + 123
	samples[spike] = 0.99
	samples[spike+1] = -0.97

	test.NewTempApp(t)
	w := newWaveform(rate)
	win := test.NewWindow(w)
	defer win.Close()
	win.Resize(fyne.NewSize(600, 200))
	w.Append(samples[:rate]) // the first chunk
	few := len(test.WidgetRenderer(w).Objects())
	for i := rate; i < n; i += 10 * rate {
		w.Append(samples[i:min(i+10*rate, n)])
	}
	if len(w.Samples()) != n || w.Duration() != 10*time.Minute {
		t.Fatalf("%d samples, %v; want %d, 10 minutes", len(w.Samples()), w.Duration(), n)
	}
	if got := len(test.WidgetRenderer(w).Objects()); got != few {
		t.Errorf("%d objects after one chunk, %d after ten minutes", few, got)
	}

	const width = 800
	cols, ok := w.envelope(width, w.span())
	want, wantOK := envelopeByHand(samples, width, w.span())
	var hi, lo float32
	for x := range cols {
		if ok[x] != wantOK[x] {
			t.Fatalf("column %d: filled %v, want %v", x, ok[x], wantOK[x])
		}
		hi, lo = max(hi, cols[x].hi), min(lo, cols[x].lo)
		// A block that straddles a column's edge counts in its first
		// sample's column: a neighbour's samples may widen a column, never
		// narrow it below the samples of its interior.
		inner := want[x]
		if x > 0 && x < width-1 {
			if cols[x].hi < inner.hi-0.05 || cols[x].lo > inner.lo+0.05 {
				t.Errorf("column %d spans %v, the samples in it %v", x, cols[x], inner)
			}
		}
	}
	if hi != 0.99 || lo != -0.97 {
		t.Errorf("the envelope spans %v..%v, want the spike's 0.99 and -0.97", lo, hi)
	}
	if x := spike * width / n; cols[x].hi != 0.99 && cols[x-1].hi != 0.99 && cols[x+1].hi != 0.99 {
		t.Errorf("the spike is not in column %d or beside it", x)
	}

	r := test.WidgetRenderer(w).(*waveformRenderer)
	start := time.Now()
	img := r.draw(width, 200)
	took := time.Since(start)
	t.Logf("drawing 10 minutes (%d samples) at %d×200 px took %s", n, width, took)
	if took > 500*time.Millisecond {
		t.Errorf("a redraw took %s: it should depend on the width, not the samples", took)
	}
	if px := colourPixels(img, r.color(theme.ColorNamePrimary)); px < width*10 {
		t.Errorf("%d pixels of the wave's colour", px)
	}
}

// A short speech fills the left of a view of waveMinSpan; samples that are
// not numbers are silence; the cursor shows and hides without a redraw.
func TestWaveformShortSpeechAndCursor(t *testing.T) {
	test.NewTempApp(t)
	w := newWaveform(1000)
	win := test.NewWindow(w)
	defer win.Close()
	win.Resize(fyne.NewSize(500, 100))
	r := test.WidgetRenderer(w).(*waveformRenderer)
	if !r.empty.Visible() || r.cursor.Visible() {
		t.Error("an empty waveform has no empty text, or shows a cursor")
	}
	w.Append([]float32{float32(math.NaN()), float32(math.Inf(1)), 2, -2, 0.5})
	if s := w.Samples(); s[0] != 0 || s[1] != 0 || s[2] != 1 || s[3] != -1 || s[4] != 0.5 {
		t.Errorf("samples kept as %v", s)
	}
	more := make([]float32, 995)
	w.Append(more) // one second in a view of five
	cols, ok := w.envelope(100, w.span())
	if !ok[0] || !ok[19] || ok[20] || ok[99] {
		t.Errorf("a second of five fills columns %v", ok)
	}
	if cols[0].hi != 1 || cols[0].lo != -1 {
		t.Errorf("the first column spans %v", cols[0])
	}
	w.SetCursor(500 * time.Millisecond)
	if want := w.Size().Width / 10; !r.cursor.Visible() || math.Abs(float64(r.cursor.Position1.X-want)) > 0.5 {
		t.Errorf("the cursor at half a second is at x %v, want %v (a tenth of the width)", r.cursor.Position1.X, want)
	}
	w.HideCursor()
	if r.cursor.Visible() {
		t.Error("the cursor stays after HideCursor")
	}
	w.Clear()
	if len(w.Samples()) != 0 || !r.empty.Visible() {
		t.Error("Clear left samples")
	}
	// Degenerate sizes draw nothing and do not panic.
	for _, size := range [][2]int{{0, 0}, {1, 1}, {3, 2}} {
		r.draw(size[0], size[1])
	}
	if cols, _ := w.envelope(0, 1); len(cols) != 0 {
		t.Error("an envelope of no columns")
	}
}
