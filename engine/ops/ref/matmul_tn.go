package ref

// MatMulTN returns G[r×k] = alpha·Aᵀ·B for row-major A (m×r) and B (m×k),
// summed in float64: the LoRA weight gradient over a batch of m rows
// (dA = dHᵀ·X, dB = scale·dYᵀ·H).
func MatMulTN(a, b []float32, m, r, k int, alpha float32) []float32 {
	acc := make([]float64, r*k)
	for i := range m {
		bi := b[i*k : (i+1)*k]
		for j, av := range a[i*r : (i+1)*r] {
			if av == 0 {
				continue
			}
			row := acc[j*k : (j+1)*k]
			for c, bv := range bi {
				row[c] += float64(av) * float64(bv)
			}
		}
	}
	g := make([]float32, r*k)
	for i, v := range acc {
		g[i] = float32(float64(alpha) * v)
	}
	return g
}
