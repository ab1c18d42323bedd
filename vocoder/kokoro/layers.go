package kokoro

import (
	"errors"
	"fmt"

	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/internal/parallel"
)

// The CPU forward's building blocks: the torch layers Kokoro is made of,
// each holding its weights and applying itself to activations laid out
// channels first, [Channels][Length], as engine/ops and its references lay
// them out. The arithmetic is engine/ops/ref's (float64 inside, f32 out),
// except the convolutions, which carry almost all of the work and run here
// in parallel over output channels (conv1d) with the same float64 sums.

// loader takes tensors out of Weights by name, checking shapes, and
// collects every error so that a bad checkpoint is described in full.
type loader struct {
	w    *Weights
	used map[string]bool
	errs []error
}

func newLoader(w *Weights) *loader { return &loader{w: w, used: map[string]bool{}} }

// tensor returns the named weight's data, or nil after recording an error
// (a missing tensor or one of another shape; -1 matches any size).
func (l *loader) tensor(name string, shape ...int) []float32 {
	t, err := l.w.Tensor(name, shape...)
	if err != nil {
		l.errs = append(l.errs, err)
		return nil
	}
	l.used[name] = true
	return t.Data
}

// shape returns the named weight's shape without taking it (nil if absent).
func (l *loader) shape(name string) []int {
	t, err := l.w.Tensor(name)
	if err != nil {
		l.errs = append(l.errs, err)
		return nil
	}
	return t.Shape
}

// unused lists the tensors no layer took.
func (l *loader) unused() []string {
	var out []string
	for _, n := range l.w.Names() {
		if !l.used[n] {
			out = append(out, n)
		}
	}
	return out
}

func (l *loader) err() error { return errors.Join(l.errs...) }

// Linear is nn.Linear: y = W x + b, W [Out][In].
type Linear struct {
	W, B    []float32
	In, Out int
}

func loadLinear(l *loader, name string, in, out int) *Linear {
	return &Linear{W: l.tensor(name+".weight", out, in), B: l.tensor(name+".bias", out), In: in, Out: out}
}

// rows applies the layer to each of n rows of x ([n][In]), giving [n][Out].
func (m *Linear) rows(x []float32, n int) []float32 {
	y := make([]float32, n*m.Out)
	parallel.For(n*m.Out, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r, o := i/m.Out, i%m.Out
			xr, wr := x[r*m.In:][:m.In], m.W[o*m.In:][:m.In]
			acc := 0.0
			if m.B != nil {
				acc = float64(m.B[o])
			}
			for k, v := range xr {
				acc += float64(v) * float64(wr[k])
			}
			y[i] = float32(acc)
		}
	})
	return y
}

// Conv1d is nn.Conv1d without padding modes other than zeros: weight
// [Out][In/Groups][Kernel], weight norm already folded by Weights.
type Conv1d struct {
	W, B                                       []float32
	In, Out, Kernel, Stride, Padding, Dilation int
}

func loadConv1d(l *loader, name string, in, out, kernel, stride, padding, dilation int, bias bool) *Conv1d {
	c := &Conv1d{W: l.tensor(name+".weight", out, in, kernel), In: in, Out: out, Kernel: kernel,
		Stride: stride, Padding: padding, Dilation: dilation}
	if bias {
		c.B = l.tensor(name+".bias", out)
	}
	return c
}

// outLength is torch's floor((L + 2p - d(k-1) - 1) / s) + 1.
func (c *Conv1d) outLength(length int) int {
	return (length+2*c.Padding-c.Dilation*(c.Kernel-1)-1)/c.Stride + 1
}

// apply convolves x ([In][length]) into [Out][outLength]. It is
// ref.Conv1D's sum (float64, every input channel then every tap in order)
// rearranged so that the innermost loop runs along time over one weight,
// four output channels at a time sharing each input load, which is what
// makes the generator's 10^9-10^10 multiply-adds take seconds rather than
// minutes.
func (c *Conv1d) apply(x []float32, length int) []float32 {
	tout := c.outLength(length)
	x64 := make([]float64, len(x))
	for i, v := range x {
		x64[i] = float64(v)
	}
	y := make([]float32, c.Out*tout)
	const block = 4
	blocks := (c.Out + block - 1) / block
	parallel.For(blocks, 1, func(lo, hi int) {
		var acc [block][]float64
		for j := range acc {
			acc[j] = make([]float64, tout)
		}
		for bi := lo; bi < hi; bi++ {
			co0 := bi * block
			n := min(block, c.Out-co0)
			for j := range n {
				b := 0.0
				if c.B != nil {
					b = float64(c.B[co0+j])
				}
				for t := range acc[j] {
					acc[j][t] = b
				}
			}
			for ci := range c.In {
				xr := x64[ci*length:][:length]
				for k := range c.Kernel {
					off := k*c.Dilation - c.Padding
					// Output steps t whose input t*s+off lies in [0, length).
					t0 := 0
					if off < 0 {
						t0 = (-off + c.Stride - 1) / c.Stride
					}
					if length-1-off < 0 {
						continue
					}
					t1 := min(tout, (length-1-off)/c.Stride+1)
					if t0 >= t1 {
						continue
					}
					var w [block]float64
					for j := range n {
						w[j] = float64(c.W[((co0+j)*c.In+ci)*c.Kernel+k])
					}
					if c.Stride == 1 && n == block {
						a0, a1, a2, a3 := acc[0][t0:t1], acc[1][t0:t1], acc[2][t0:t1], acc[3][t0:t1]
						xs := xr[t0+off : t1+off][:len(a0)]
						a1, a2, a3 = a1[:len(a0)], a2[:len(a0)], a3[:len(a0)]
						for i, v := range xs {
							a0[i] += w[0] * v
							a1[i] += w[1] * v
							a2[i] += w[2] * v
							a3[i] += w[3] * v
						}
						continue
					}
					for j := range n {
						a := acc[j]
						for t := t0; t < t1; t++ {
							a[t] += w[j] * xr[t*c.Stride+off]
						}
					}
				}
			}
			for j := range n {
				yr := y[(co0+j)*tout:][:tout]
				for t, v := range acc[j] {
					yr[t] = float32(v)
				}
			}
		}
	})
	return y
}

// ConvTranspose1d is nn.ConvTranspose1d: weight [In][Out/Groups][Kernel].
type ConvTranspose1d struct {
	W, B []float32
	Args ref.ConvTranspose1DArgs
}

func loadConvTranspose1d(l *loader, name string, a ref.ConvTranspose1DArgs) *ConvTranspose1d {
	g := max(a.Groups, 1)
	return &ConvTranspose1d{W: l.tensor(name+".weight", a.InChannels, a.OutChannels/g, a.Kernel),
		B: l.tensor(name+".bias", a.OutChannels), Args: a}
}

func (c *ConvTranspose1d) apply(x []float32, length int) ([]float32, int) {
	a := c.Args
	a.Length = length
	return ref.ConvTranspose1D(x, c.W, c.B, a), a.OutLength()
}

// AdaIN1d is StyleTTS2's adaptive instance norm: InstanceNorm1d (with its
// affine weight, which Kokoro keeps for an ONNX export bug) scaled by
// 1 + gamma and shifted by beta, [gamma | beta] = FC(style).
type AdaIN1d struct {
	NormW, NormB []float32
	FC           *Linear
	Channels     int
}

func loadAdaIN1d(l *loader, name string, styleDim, channels int) *AdaIN1d {
	return &AdaIN1d{NormW: l.tensor(name+".norm.weight", channels), NormB: l.tensor(name+".norm.bias", channels),
		FC: loadLinear(l, name+".fc", styleDim, 2*channels), Channels: channels}
}

// instanceNormEps is nn.InstanceNorm1d's default eps.
const instanceNormEps = 1e-5

func (n *AdaIN1d) apply(x []float32, length int, style []float32) []float32 {
	gb := n.FC.rows(style, 1)
	return ref.AdaIN1D(x, gb, n.NormW, n.NormB, ref.AudioNormArgs{Channels: n.Channels, Length: length, Eps: instanceNormEps})
}

// BiLSTM is a single-layer bidirectional nn.LSTM (batch_first, as all of
// Kokoro's are): [Input][T] in, [2*Hidden][T] out, forward h then reverse h.
type BiLSTM struct {
	Fwd, Bwd      ref.LSTMWeights
	Input, Hidden int
}

func loadBiLSTM(l *loader, name string, input, hidden int) *BiLSTM {
	dir := func(suffix string) ref.LSTMWeights {
		return ref.LSTMWeights{
			WIH: l.tensor(name+".weight_ih_l0"+suffix, 4*hidden, input),
			WHH: l.tensor(name+".weight_hh_l0"+suffix, 4*hidden, hidden),
			BIH: l.tensor(name+".bias_ih_l0"+suffix, 4*hidden),
			BHH: l.tensor(name+".bias_hh_l0"+suffix, 4*hidden),
		}
	}
	return &BiLSTM{Fwd: dir(""), Bwd: dir("_reverse"), Input: input, Hidden: hidden}
}

func (m *BiLSTM) apply(x []float32, length int) []float32 {
	bwd := m.Bwd
	return ref.LSTM(x, m.Fwd, &bwd, ref.LSTMArgs{Input: m.Input, Hidden: m.Hidden, Length: length})
}

// transpose turns [rows][cols] into [cols][rows].
func transpose(x []float32, rows, cols int) []float32 {
	y := make([]float32, len(x))
	for r := range rows {
		for c := range cols {
			y[c*rows+r] = x[r*cols+c]
		}
	}
	return y
}

// concatChannels stacks [Ci][length] activations along channels.
func concatChannels(parts ...[]float32) []float32 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]float32, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// checkLen is the error for an activation of the wrong size, which means a
// bug in the forward, not bad input.
func checkLen(what string, x []float32, want int) error {
	if len(x) != want {
		return fmt.Errorf("kokoro: %s: %d values, want %d", what, len(x), want)
	}
	return nil
}
