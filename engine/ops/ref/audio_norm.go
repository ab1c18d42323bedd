package ref

import "math"

// AudioNormArgs shapes a normalisation of [Channels][Length] activations.
type AudioNormArgs struct {
	Channels, Length int
	Eps              float32
}

// styleAffine is ((v*w + b) * (1 + gamma) + beta) for channel c, each part
// optional (nil).
func styleAffine(v float64, c int, w, b, style []float32) float64 {
	if w != nil {
		v *= float64(w[c])
	}
	if b != nil {
		v += float64(b[c])
	}
	if style != nil {
		v = (1+float64(style[c]))*v + float64(style[len(style)/2+c])
	}
	return v
}

// AdaIN1D is Kokoro's AdaIN1d with gamma, beta = torch.chunk(fc(s), 2)
// given as style = [gamma | beta]: (1 + gamma) * InstanceNorm1d(x) + beta,
// the norm per channel over time with the biased variance and eps, and its
// affine weight w and bias b when not nil. style nil is a plain
// InstanceNorm1d. In float64.
func AdaIN1D(x, style, w, b []float32, a AudioNormArgs) []float32 {
	y := make([]float32, len(x))
	for c := range a.Channels {
		row := x[c*a.Length:][:a.Length]
		mean, inv := meanInvStd(len(row), func(i int) float64 { return float64(row[i]) }, a.Eps)
		for j, v := range row {
			y[c*a.Length+j] = float32(styleAffine((float64(v)-mean)*inv, c, w, b, style))
		}
	}
	return y
}

// ChannelLayerNorm is F.layer_norm over the channel dimension of x laid out
// [Channels][Length] (x.transpose(1, -1), layer_norm, transpose back, as
// Kokoro's text-encoder LayerNorm), with w and b when not nil, then
// AdaLayerNorm's (1 + gamma) * . + beta when style = [gamma | beta] is not
// nil. In float64.
func ChannelLayerNorm(x, w, b, style []float32, a AudioNormArgs) []float32 {
	y := make([]float32, len(x))
	for t := range a.Length {
		at := func(c int) float64 { return float64(x[c*a.Length+t]) }
		mean, inv := meanInvStd(a.Channels, at, a.Eps)
		for c := range a.Channels {
			y[c*a.Length+t] = float32(styleAffine((at(c)-mean)*inv, c, w, b, style))
		}
	}
	return y
}

// meanInvStd is the mean of n values and 1/sqrt(biased variance + eps).
func meanInvStd(n int, at func(int) float64, eps float32) (mean, inv float64) {
	for i := range n {
		mean += at(i)
	}
	mean /= float64(n)
	vr := 0.0
	for i := range n {
		d := at(i) - mean
		vr += d * d
	}
	return mean, 1 / math.Sqrt(vr/float64(n)+float64(eps))
}
