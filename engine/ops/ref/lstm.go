package ref

import "math"

// LSTMWeights are one direction of a single-layer nn.LSTM: weight_ih_l0
// [4H][Input], weight_hh_l0 [4H][H], bias_ih_l0, bias_hh_l0 [4H], rows in
// gate order i, f, g, o.
type LSTMWeights struct {
	WIH, WHH, BIH, BHH []float32
}

// LSTMArgs shapes an LSTM over Length steps of Input features.
type LSTMArgs struct {
	Input, Hidden, Length int
}

func sigmoid(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

// LSTM is nn.LSTM(Input, Hidden, bidirectional=bwd != nil) on one sequence
// with zero initial states, x laid out [Input][Length] and the output
// returned as [D*Hidden][Length] (forward h then reverse h per step, as
// torch concatenates them, transposed to channels-first):
//
//	i, f, g, o = split(W_ih x_t + b_ih + W_hh h + b_hh)
//	c = sigmoid(f) c + sigmoid(i) tanh(g);  h = sigmoid(o) tanh(c)
//
// the reverse direction running from the last step to the first with its
// own weights. In float64.
func LSTM(x []float32, fwd LSTMWeights, bwd *LSTMWeights, a LSTMArgs) []float32 {
	H, T := a.Hidden, a.Length
	dirs := []LSTMWeights{fwd}
	if bwd != nil {
		dirs = append(dirs, *bwd)
	}
	y := make([]float32, len(dirs)*H*T)
	for d, w := range dirs {
		h, c := make([]float64, H), make([]float64, H)
		g := make([]float64, 4*H)
		for s := range T {
			t := s
			if d == 1 {
				t = T - 1 - s
			}
			for r := range g {
				acc := float64(w.BIH[r]) + float64(w.BHH[r])
				for k := range a.Input {
					acc += float64(w.WIH[r*a.Input+k]) * float64(x[k*T+t])
				}
				for k := range H {
					acc += float64(w.WHH[r*H+k]) * h[k]
				}
				g[r] = acc
			}
			for j := range H {
				c[j] = sigmoid(g[H+j])*c[j] + sigmoid(g[j])*math.Tanh(g[2*H+j])
				h[j] = sigmoid(g[3*H+j]) * math.Tanh(c[j])
				y[(d*H+j)*T+t] = float32(h[j])
			}
		}
	}
	return y
}
