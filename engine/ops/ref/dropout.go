package ref

import "math"

// DropoutMask is a dropout mask that is a function of its indices, not of
// a random stream: element (token, col) is kept when
//
//	pcg(col + pcg(token + Key)) >= Threshold
//
// with pcg the PCG-RXS-M-XS 32-bit hash (Jarzyński and Olano, "Hash
// Functions for GPU Rendering", JCGT 2020) and Key = DropoutKey(seed, step,
// site). So the same indices give the same mask in a forward, in the
// recomputation of a layer before its backward, in the backward itself and
// in shaders/dropout.wgsl, which spells the same hash in WGSL; no mask is
// ever stored. A kept element is multiplied by Scale = 1/(1−p) (inverted
// dropout, torch.nn.Dropout's training mode).
type DropoutMask struct {
	Key, Threshold uint32
	Scale          float32
}

// pcg is the PCG-RXS-M-XS hash of one u32; every product wraps mod 2³².
func pcg(v uint32) uint32 {
	s := v*747796405 + 2891336453
	w := ((s >> ((s >> 28) + 4)) ^ s) * 277803737
	return (w >> 22) ^ w
}

// DropoutKey folds a run's seed, the step (micro-batch) counter and the
// site (which adapted input: a LoRA pair's index) into the mask's key.
// Two sites whose keys differ by the difference of two token indices
// share a row of mask; with 32-bit keys that is a 2⁻³² chance per pair of
// rows, which is harmless for dropout.
func DropoutKey(seed, step uint64, site uint32) uint32 {
	return pcg(uint32(seed) + pcg(uint32(seed>>32)+pcg(uint32(step)+pcg(uint32(step>>32)+pcg(site)))))
}

// NewDropoutMask is the mask of drop probability p (0 ≤ p < 1) at key: an
// element is dropped when its hash is below round(p·2³²), so the drop rate
// is p within 2⁻³².
func NewDropoutMask(key uint32, p float32) DropoutMask {
	t := math.Round(float64(p) * (1 << 32))
	t = math.Max(0, math.Min(t, math.MaxUint32))
	return DropoutMask{Key: key, Threshold: uint32(t), Scale: float32(1 / (1 - float64(p)))}
}

// Keep reports whether element (token, col) passes.
func (m DropoutMask) Keep(token, col uint32) bool {
	return pcg(col+pcg(token+m.Key)) >= m.Threshold
}

// Dropout returns x (rows × cols, its row i being mask row token0+i) with
// the dropped elements zeroed and the kept ones multiplied by m.Scale.
func Dropout(x []float32, rows, cols, token0 int, m DropoutMask) []float32 {
	y := make([]float32, rows*cols)
	for i := range rows {
		for j := range cols {
			if m.Keep(uint32(token0+i), uint32(j)) {
				y[i*cols+j] = x[i*cols+j] * m.Scale
			}
		}
	}
	return y
}
