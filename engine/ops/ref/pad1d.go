package ref

// Pad1D is F.pad(x, (left, right)) along time for x laid out [channels][t]:
// zeros ('constant'), or with reflect nn.ReflectionPad1d((left, right)),
// mirroring about the edge samples (pads must be < t).
func Pad1D(x []float32, channels, t, left, right int, reflect bool) []float32 {
	tout := t + left + right
	y := make([]float32, channels*tout)
	for c := range channels {
		for j := range tout {
			pos := j - left
			if reflect {
				pos = reflectIndex(pos, t)
			} else if pos < 0 || pos >= t {
				continue
			}
			y[c*tout+j] = x[c*t+pos]
		}
	}
	return y
}
