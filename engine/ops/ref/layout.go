package ref

// Transpose returns xᵀ for x [rows][cols]: [cols][rows].
func Transpose(x []float32, rows, cols int) []float32 {
	y := make([]float32, rows*cols)
	for i := range rows {
		for j := range cols {
			y[j*rows+i] = x[i*cols+j]
		}
	}
	return y
}

// GatherColumns returns y [rows][len(idx)] with y[r][f] = x[r][idx[f]] for
// x [rows][cols]; an index past the last column takes the last one, as the
// kernel clamps.
func GatherColumns(x []float32, idx []uint32, rows, cols int) []float32 {
	n := len(idx)
	y := make([]float32, rows*n)
	for r := range rows {
		for f, j := range idx {
			y[r*n+f] = x[r*cols+min(int(j), cols-1)]
		}
	}
	return y
}

// BroadcastColumns writes v[r] into y[off + r*n + t] for r < len(v), t < n.
func BroadcastColumns(v, y []float32, n, off int) {
	for r, x := range v {
		for t := range n {
			y[off+r*n+t] = x
		}
	}
}

// UpsampleNearest1D returns F.interpolate(x, scale_factor=scale,
// mode='nearest') for x [rows][length]: [rows][scale*length].
func UpsampleNearest1D(x []float32, rows, length, scale int) []float32 {
	y := make([]float32, rows*length*scale)
	for i := range y {
		r, t := i/(length*scale), i%(length*scale)
		y[i] = x[r*length+t/scale]
	}
	return y
}
