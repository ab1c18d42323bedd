package ref

// ConvTranspose1DArgs shapes a transposed convolution as
// ops.ConvTranspose1DArgs: x [InChannels][Length], weight
// [InChannels][OutChannels/Groups][Kernel]. Stride and Groups of 0 mean 1.
type ConvTranspose1DArgs struct {
	InChannels, OutChannels int
	Length                  int
	Kernel                  int
	Stride                  int
	Padding                 int
	OutputPadding           int
	Groups                  int
}

// OutLength is (L-1)*s - 2p + k + output_padding.
func (a ConvTranspose1DArgs) OutLength() int {
	return (a.Length-1)*orOne(a.Stride) - 2*a.Padding + a.Kernel + a.OutputPadding
}

// ConvTranspose1D is torch.nn.functional.conv_transpose1d(x, w, bias,
// stride, padding, output_padding, groups, dilation=1) on one batch item,
// written as the scatter that defines it: input step s of channel ci adds
// x[ci][s] * w[ci][co][k] to the full output at s*stride + k, and the full
// output is then trimmed by Padding on the left (output_padding only
// extends the right end, where nothing more is scattered). Sums in float64.
func ConvTranspose1D(x, w, bias []float32, a ConvTranspose1DArgs) []float32 {
	s, g := orOne(a.Stride), orOne(a.Groups)
	tout := a.OutLength()
	cinG, coutG := a.InChannels/g, a.OutChannels/g
	acc := make([]float64, a.OutChannels*tout)
	for co := range a.OutChannels {
		for t := range tout {
			if bias != nil {
				acc[co*tout+t] = float64(bias[co])
			}
		}
	}
	for ci := range a.InChannels {
		grp := ci / cinG
		for col := range coutG {
			co := grp*coutG + col
			wrow := w[(ci*coutG+col)*a.Kernel:][:a.Kernel]
			for si := range a.Length {
				xv := float64(x[ci*a.Length+si])
				for k, wv := range wrow {
					t := si*s + k - a.Padding
					if t >= 0 && t < tout {
						acc[co*tout+t] += xv * float64(wv)
					}
				}
			}
		}
	}
	y := make([]float32, len(acc))
	for i, v := range acc {
		y[i] = float32(v)
	}
	return y
}
