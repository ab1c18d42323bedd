package ref

// Conv1DArgs shapes a 1-D convolution as ops.Conv1DArgs: x is
// [InChannels][Length], the weight [OutChannels][InChannels/Groups][Kernel]
// (torch's Conv1d layout). Stride, Dilation and Groups of 0 mean 1.
type Conv1DArgs struct {
	InChannels, OutChannels int
	Length                  int
	Kernel                  int
	Stride                  int
	Padding                 int
	Dilation                int
	Groups                  int
	// Reflect pads by mirroring (padding_mode='reflect') instead of zeros.
	Reflect bool
}

func orOne(v int) int {
	if v == 0 {
		return 1
	}
	return v
}

// OutLength is floor((L + 2p - d(k-1) - 1) / s) + 1, torch's formula.
func (a Conv1DArgs) OutLength() int {
	return (a.Length+2*a.Padding-orOne(a.Dilation)*(a.Kernel-1)-1)/orOne(a.Stride) + 1
}

// reflectIndex maps a position outside [0, n) back inside by mirroring about
// the edge samples (torch's reflect: -1 -> 1, n -> n-2), for |overshoot| < n.
func reflectIndex(pos, n int) int {
	if pos < 0 {
		pos = -pos
	}
	if pos >= n {
		pos = 2*(n-1) - pos
	}
	return pos
}

// Conv1D is torch.nn.functional.conv1d(x, w, bias, stride, padding,
// dilation, groups) on one batch item (x.unsqueeze(0)), or nn.Conv1d with
// padding_mode='reflect' when a.Reflect: y[co][t] = bias[co] +
// sum over ci in co's group and k of w[co][ci][k] * x[ci][t*s + k*d - p].
// bias may be nil. Sums in float64.
func Conv1D(x, w, bias []float32, a Conv1DArgs) []float32 {
	s, d, g := orOne(a.Stride), orOne(a.Dilation), orOne(a.Groups)
	tout := a.OutLength()
	cinG, coutG := a.InChannels/g, a.OutChannels/g
	y := make([]float32, a.OutChannels*tout)
	for co := range a.OutChannels {
		grp := co / coutG
		for t := range tout {
			acc := 0.0
			if bias != nil {
				acc = float64(bias[co])
			}
			for ci := range cinG {
				xrow := x[(grp*cinG+ci)*a.Length:][:a.Length]
				wrow := w[(co*cinG+ci)*a.Kernel:][:a.Kernel]
				for k, wv := range wrow {
					pos := t*s + k*d - a.Padding
					if a.Reflect {
						pos = reflectIndex(pos, a.Length)
					} else if pos < 0 || pos >= a.Length {
						continue
					}
					acc += float64(xrow[pos]) * float64(wv)
				}
			}
			y[co*tout+t] = float32(acc)
		}
	}
	return y
}
