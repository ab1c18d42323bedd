package model

import "github.com/hearthstudio/hearth/gguf"

// dot is the f32 dot product of the CPU forward's matrix products: gguf's
// FMA kernel, whose sums the fused decode kernels (gguf.FusedDot)
// reproduce bit for bit.
func dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	if gguf.HasDotFMA {
		return gguf.DotFMA(a, b)
	}
	return dotGo(a, b[:len(a)])
}

// dotRows sets y[t·ystride] = dot(w, x[t·len(w):][:len(w)]) for each of
// the len(x)/len(w) activation rows, four at a time where it can.
func dotRows(w, x, y []float32, ystride int) {
	n := len(w)
	m := len(x) / n
	t := 0
	if gguf.HasDotFMA && n > 0 {
		var out [4]float32
		for ; t+4 <= m; t += 4 {
			gguf.Dot4FMA(w, x[t*n:], n, &out)
			for i, v := range out {
				y[(t+i)*ystride] = v
			}
		}
	}
	for ; t < m; t++ {
		y[t*ystride] = dot(w, x[t*n:(t+1)*n])
	}
}
