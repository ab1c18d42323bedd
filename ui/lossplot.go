package ui

import (
	"image"
	"image/color"
	"math"
	"strconv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
)

// lossPlot draws a training run's loss: the training loss of every step as
// a line, the validation losses as dots joined by a line of another
// colour, on axes that grow with the run. The curves are rasterized into
// one image at the plot's pixel size, and a run of thousands of steps is
// first reduced to one column per pixel (downsample), so the cost of a
// redraw depends on the plot's width, not on the steps, and the widget has
// the same few objects at step 10 and at step 100 000.
type lossPlot struct {
	widget.BaseWidget
	train, valid []app.TrainPoint
	// steps is the run's length: the x axis ends there (or at the last
	// point, if that is later).
	steps int
}

// Axis ticks: at most this many labels per axis, few enough that their
// texts never overlap at the plot's minimum size.
const maxTicks = 6

// plotInset keeps the first and last steps off the frame's sides, so a
// validation dot at the last step is drawn whole.
const plotInset float32 = 6

func newLossPlot() *lossPlot {
	p := &lossPlot{}
	p.ExtendBaseWidget(p)
	return p
}

// Set replaces the plot's points with history (a checkpoint's, or a
// resumed run's first report) for a run of steps.
func (p *lossPlot) Set(history []app.TrainPoint, steps int) {
	p.train, p.valid = p.train[:0], p.valid[:0]
	p.steps = steps
	p.Add(history, steps)
}

// Add appends points, in step order, and sets the run's length.
func (p *lossPlot) Add(points []app.TrainPoint, steps int) {
	for _, pt := range points {
		if math.IsNaN(pt.Loss) || math.IsInf(pt.Loss, 0) {
			continue
		}
		if pt.Valid {
			p.valid = append(p.valid, pt)
		} else {
			p.train = append(p.train, pt)
		}
	}
	if steps > 0 {
		p.steps = steps
	}
	p.Refresh()
}

// Len is the number of points the plot holds.
func (p *lossPlot) Len() (train, valid int) { return len(p.train), len(p.valid) }

// ranges are the plot's axes: steps x0..x1 and losses lo..hi.
func (p *lossPlot) ranges() (x0, x1, lo, hi float64, ok bool) {
	if len(p.train) == 0 && len(p.valid) == 0 {
		return 0, 1, 0, 1, false
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	last := 0
	for _, s := range [][]app.TrainPoint{p.train, p.valid} {
		for _, pt := range s {
			lo, hi = min(lo, pt.Loss), max(hi, pt.Loss)
			last = max(last, pt.Step)
		}
	}
	x1 = float64(max(last, p.steps, 1))
	if hi-lo < 1e-6 {
		lo, hi = lo-0.5, hi+0.5
	}
	// A margin of 5% keeps the extremes off the frame.
	pad := 0.05 * (hi - lo)
	lo, hi = lo-pad, hi+pad
	if lo < 0 && min(minLoss(p.train), minLoss(p.valid)) >= 0 {
		lo = 0 // a loss is never negative: no axis below zero for the margin's sake
	}
	return 0, x1, lo, hi, true
}

func minLoss(pts []app.TrainPoint) float64 {
	m := math.Inf(1)
	for _, pt := range pts {
		m = min(m, pt.Loss)
	}
	return m
}

// column is the training losses that fall in one pixel column of the plot.
type column struct {
	x                     int
	min, max, first, last float64
}

// downsample reduces pts (in step order) to at most one column per pixel
// of a plot width pixels wide showing steps x0..x1: each column keeps the
// lowest and highest loss in it, so a spike is never lost, and the first
// and last, which the line joins to the neighbouring columns.
func downsample(pts []app.TrainPoint, x0, x1 float64, width int) []column {
	if width <= 0 || len(pts) == 0 {
		return nil
	}
	scale := float64(width-1) / max(x1-x0, 1e-9)
	var cols []column
	for _, pt := range pts {
		x := int(math.Round((float64(pt.Step) - x0) * scale))
		x = min(max(x, 0), width-1)
		if n := len(cols); n > 0 && cols[n-1].x == x {
			c := &cols[n-1]
			c.min, c.max, c.last = min(c.min, pt.Loss), max(c.max, pt.Loss), pt.Loss
			continue
		}
		cols = append(cols, column{x: x, min: pt.Loss, max: pt.Loss, first: pt.Loss, last: pt.Loss})
	}
	return cols
}

// niceTicks are at most n round values (1, 2 or 5 times a power of ten
// apart) between lo and hi; with whole, no step is below 1.
func niceTicks(lo, hi float64, n int, whole bool) []float64 {
	if !(hi > lo) || n < 2 {
		return nil
	}
	raw := (hi - lo) / float64(n-1)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		step = m * mag
		if step >= raw {
			break
		}
	}
	if whole {
		step = max(step, 1)
	}
	var ticks []float64
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		// k·step in ten significant digits: 6 × 0.005 is 0.030000000000000002.
		v, _ := strconv.ParseFloat(strconv.FormatFloat(k*step, 'g', 10, 64), 64)
		ticks = append(ticks, v)
	}
	return ticks
}

func tickText(v float64) string {
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func (p *lossPlot) CreateRenderer() fyne.WidgetRenderer {
	r := &lossPlotRenderer{p: p}
	r.image = canvas.NewRaster(r.draw)
	r.frame = canvas.NewRectangle(color.Transparent)
	r.frame.StrokeWidth = 1
	for range maxTicks + 1 {
		r.xTicks = append(r.xTicks, r.text(""))
		r.yTicks = append(r.yTicks, r.text(""))
	}
	r.xTitle, r.yTitle = r.text("step"), r.text("loss")
	r.trainKey, r.validKey = canvas.NewLine(color.Black), canvas.NewCircle(color.Black)
	r.trainKey.StrokeWidth = 2
	r.trainText, r.validText = r.text("train"), r.text("validation")
	r.empty = r.text("The loss of each step is drawn here once a run starts.")
	r.objects = []fyne.CanvasObject{r.frame, r.image, r.xTitle, r.yTitle, r.trainKey, r.trainText, r.validKey, r.validText, r.empty}
	for i := range r.xTicks {
		r.objects = append(r.objects, r.xTicks[i], r.yTicks[i])
	}
	r.applyTheme()
	return r
}

// lossPlotRenderer lays out the axes' texts around the plot area and
// draws the curves into one raster image inside it.
type lossPlotRenderer struct {
	p                    *lossPlot
	image                *canvas.Raster
	frame                *canvas.Rectangle
	xTicks, yTicks       []*canvas.Text
	xTitle, yTitle       *canvas.Text
	trainKey             *canvas.Line
	validKey             *canvas.Circle
	trainText, validText *canvas.Text
	empty                *canvas.Text
	objects              []fyne.CanvasObject

	// The layout's ranges, which draw maps the points with.
	x0, x1, lo, hi float64
	xs, ys         []float64 // the ticks shown
	size           fyne.Size
}

func (r *lossPlotRenderer) text(s string) *canvas.Text {
	t := canvas.NewText(s, color.Black)
	t.TextSize = theme.CaptionTextSize()
	return t
}

func (r *lossPlotRenderer) color(name fyne.ThemeColorName) color.Color {
	return theme.ColorForWidget(name, r.p)
}

// Colours: the training line in the theme's primary colour, the
// validation in orange, which stays distinct from every primary colour
// Fyne offers but orange itself, and from the red of errors.
func (r *lossPlotRenderer) trainColor() color.Color { return r.color(theme.ColorNamePrimary) }
func (r *lossPlotRenderer) validColor() color.Color {
	if c, ok := r.color(theme.ColorNamePrimary).(color.NRGBA); ok && c == theme.PrimaryColorNamed(theme.ColorOrange) {
		return r.color(theme.ColorNameSuccess)
	}
	return r.color(theme.ColorNameWarning)
}

func (r *lossPlotRenderer) applyTheme() {
	fg, dim := r.color(theme.ColorNameForeground), r.color(theme.ColorNamePlaceHolder)
	for _, t := range append(r.xTicks, r.yTicks...) {
		t.Color = dim
	}
	for _, t := range []*canvas.Text{r.xTitle, r.yTitle, r.trainText, r.validText} {
		t.Color = fg
	}
	r.empty.Color = dim
	r.frame.StrokeColor = r.color(theme.ColorNameSeparator)
	r.trainKey.StrokeColor = r.trainColor()
	r.validKey.FillColor = r.validColor()
}

func (r *lossPlotRenderer) Objects() []fyne.CanvasObject { return r.objects }
func (r *lossPlotRenderer) Destroy()                     {}

func (r *lossPlotRenderer) MinSize() fyne.Size {
	return fyne.NewSize(320, 180)
}

func (r *lossPlotRenderer) Refresh() {
	r.applyTheme()
	r.Layout(r.p.Size())
	canvas.Refresh(r.p)
}

// Layout places the legend on top, the loss ticks on the left, the step
// ticks below, and the image in the rectangle they leave.
func (r *lossPlotRenderer) Layout(size fyne.Size) {
	r.size = size
	pad := theme.Padding()
	var ok bool
	r.x0, r.x1, r.lo, r.hi, ok = r.p.ranges()
	r.empty.Hidden = ok
	textH := fyne.MeasureText("0", r.xTitle.TextSize, r.xTitle.TextStyle).Height

	// The y ticks' labels decide the left margin.
	r.ys = nil
	if ok {
		r.ys = niceTicks(r.lo, r.hi, maxTicks, false)
	}
	left := float32(0)
	for i, t := range r.yTicks {
		t.Hidden = i >= len(r.ys)
		if !t.Hidden {
			t.Text = tickText(r.ys[i])
			left = max(left, fyne.MeasureText(t.Text, t.TextSize, t.TextStyle).Width)
		}
	}
	left = max(left, fyne.MeasureText(r.yTitle.Text, r.yTitle.TextSize, r.yTitle.TextStyle).Width) + 2*pad
	top := textH + 2*pad
	bottom := 2*textH + 2*pad
	right := 2 * pad
	area := fyne.NewSize(max(size.Width-left-right, 1), max(size.Height-top-bottom, 1))
	origin := fyne.NewPos(left, top)
	r.frame.Move(origin)
	r.frame.Resize(area)
	r.image.Move(origin)
	r.image.Resize(area)

	// The y ticks, right-aligned against the plot; the axis title above
	// them.
	for i, t := range r.yTicks {
		if t.Hidden {
			continue
		}
		w := fyne.MeasureText(t.Text, t.TextSize, t.TextStyle).Width
		y := origin.Y + float32((r.hi-r.ys[i])/(r.hi-r.lo))*area.Height
		t.Move(fyne.NewPos(left-pad-w, y-textH/2))
		t.Refresh()
	}
	r.yTitle.Move(fyne.NewPos(pad, pad))

	// The x ticks, centred under their step; the title at the right end.
	r.xs = nil
	if ok {
		r.xs = niceTicks(r.x0, r.x1, maxTicks, true)
	}
	for i, t := range r.xTicks {
		t.Hidden = i >= len(r.xs)
		if t.Hidden {
			continue
		}
		t.Text = tickText(r.xs[i])
		w := fyne.MeasureText(t.Text, t.TextSize, t.TextStyle).Width
		x := origin.X + plotInset + float32((r.xs[i]-r.x0)/(r.x1-r.x0))*(area.Width-2*plotInset)
		t.Move(fyne.NewPos(min(max(x-w/2, origin.X-w/2), size.Width-w), origin.Y+area.Height+pad/2))
		t.Refresh()
	}
	tw := fyne.MeasureText(r.xTitle.Text, r.xTitle.TextSize, r.xTitle.TextStyle).Width
	r.xTitle.Move(fyne.NewPos(origin.X+area.Width-tw, origin.Y+area.Height+textH+pad))

	// The legend, right-aligned above the plot.
	vw := fyne.MeasureText(r.validText.Text, r.validText.TextSize, r.validText.TextStyle).Width
	trw := fyne.MeasureText(r.trainText.Text, r.trainText.TextSize, r.trainText.TextStyle).Width
	x := size.Width - right - vw
	r.validText.Move(fyne.NewPos(x, pad))
	dot := textH / 2
	x -= dot + pad
	r.validKey.Move(fyne.NewPos(x, pad+textH/2-dot/2))
	r.validKey.Resize(fyne.NewSquareSize(dot))
	x -= 3*pad + trw
	r.trainText.Move(fyne.NewPos(x, pad))
	x -= pad + 2*textH
	r.trainKey.Position1 = fyne.NewPos(x, pad+textH/2)
	r.trainKey.Position2 = fyne.NewPos(x+2*textH-pad, pad+textH/2)
	for _, o := range []fyne.CanvasObject{r.validText, r.validKey, r.trainText, r.trainKey} {
		o.Refresh()
	}
	ew := fyne.MeasureText(r.empty.Text, r.empty.TextSize, r.empty.TextStyle)
	r.empty.Move(fyne.NewPos(origin.X+(area.Width-ew.Width)/2, origin.Y+(area.Height-ew.Height)/2))
	canvas.Refresh(r.image)
}

// draw is the raster's generator: the grid lines at the y ticks, then the
// training curve, then the validation points, w×h pixels.
func (r *lossPlotRenderer) draw(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	if w < 2 || h < 2 || r.hi <= r.lo || r.x1 <= r.x0 {
		return img
	}
	px := float64(w) / max(float64(r.image.Size().Width), 1) // pixels per unit
	inset := math.Round(float64(plotInset) * px)
	inner := max(w-2*int(inset), 2) // the pixel columns steps map to
	xOf := func(step float64) float64 { return inset + (step-r.x0)/(r.x1-r.x0)*float64(inner-1) }
	yOf := func(loss float64) float64 { return (r.hi - loss) / (r.hi - r.lo) * float64(h-1) }

	grid := newStroke(w, h)
	for _, v := range r.ys {
		y := math.Round(yOf(v)) + 0.5
		grid.segment(0, y, float64(w), y, 0.5*px)
	}
	grid.paint(img, r.color(theme.ColorNameSeparator))

	// The training loss: each column's span from its lowest to its
	// highest loss, joined to the next column from its last loss.
	line := newStroke(w, h)
	cols := downsample(r.p.train, r.x0, r.x1, inner)
	half := 0.75 * px
	for i, c := range cols {
		x := inset + float64(c.x) + 0.5
		line.segment(x, yOf(c.min), x, yOf(c.max), half)
		if i > 0 {
			prev := cols[i-1]
			line.segment(inset+float64(prev.x)+0.5, yOf(prev.last), x, yOf(c.first), half)
		}
	}
	line.paint(img, r.trainColor())

	valid := newStroke(w, h)
	for i, pt := range r.p.valid {
		x, y := xOf(float64(pt.Step))+0.5, yOf(pt.Loss)
		valid.dot(x, y, 3*px)
		if i > 0 {
			prev := r.p.valid[i-1]
			valid.segment(xOf(float64(prev.Step))+0.5, yOf(prev.Loss), x, y, 0.5*px)
		}
	}
	valid.paint(img, r.validColor())
	return img
}

// stroke is the coverage of one colour's shapes, pixel by pixel (0..1),
// kept as the maximum over the shapes so that where they overlap (a line's
// joints) nothing is painted twice.
type stroke struct {
	w, h int
	cov  []float32
}

func newStroke(w, h int) *stroke { return &stroke{w: w, h: h, cov: make([]float32, w*h)} }

// segment covers the pixels within half (plus half a pixel of
// anti-aliasing) of the segment from (x0,y0) to (x1,y1).
func (s *stroke) segment(x0, y0, x1, y1, half float64) {
	ax0, ax1 := max(int(math.Floor(min(x0, x1)-half-1)), 0), min(int(math.Ceil(max(x0, x1)+half+1)), s.w-1)
	ay0, ay1 := max(int(math.Floor(min(y0, y1)-half-1)), 0), min(int(math.Ceil(max(y0, y1)+half+1)), s.h-1)
	dx, dy := x1-x0, y1-y0
	l2 := dx*dx + dy*dy
	for y := ay0; y <= ay1; y++ {
		for x := ax0; x <= ax1; x++ {
			cx, cy := float64(x)+0.5, float64(y)+0.5
			t := 0.0
			if l2 > 0 {
				t = min(max(((cx-x0)*dx+(cy-y0)*dy)/l2, 0), 1)
			}
			ex, ey := cx-(x0+t*dx), cy-(y0+t*dy)
			s.cover(x, y, half+0.5-math.Sqrt(ex*ex+ey*ey))
		}
	}
}

// dot covers a disc of radius r around (x, y).
func (s *stroke) dot(x, y, r float64) { s.segment(x, y, x, y, r) }

func (s *stroke) cover(x, y int, c float64) {
	if c <= 0 {
		return
	}
	i := y*s.w + x
	s.cov[i] = max(s.cov[i], float32(min(c, 1)))
}

// paint blends c over img where the stroke covers it.
func (s *stroke) paint(img *image.RGBA, c color.Color) {
	r, g, b, a := c.RGBA() // premultiplied, 16 bits
	for i, cov := range s.cov {
		if cov == 0 {
			continue
		}
		k := float32(a) / 0xffff * cov // the source's alpha here
		o := img.Pix[4*i : 4*i+4]
		src := [4]float32{float32(r>>8) * cov, float32(g>>8) * cov, float32(b>>8) * cov, 255 * k}
		for j := range 4 {
			o[j] = uint8(min(src[j]+float32(o[j])*(1-k), 255) + 0.5)
		}
	}
}
