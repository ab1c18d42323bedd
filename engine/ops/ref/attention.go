package ref

import "math"

// AttentionArgs mirror ops.AttentionArgs field for field (see there for the
// layouts, the mask and the sinks), with the sinks' values where ops holds
// their buffer.
type AttentionArgs struct {
	HeadDim int
	Heads   int
	KVHeads int
	Tokens  int
	Pos0    int
	KVLen   int
	Scale   float32 // 0 means 1/sqrt(HeadDim)
	Window  int     // 0 means none; else key j is visible from position i iff i-j < Window (|i-j| < Window with Bidirectional)
	Softcap float32 // 0 means none
	// Bidirectional drops the causal mask: every query sees all KVLen keys
	// (those within the symmetric Window, if any).
	Bidirectional bool
	// Batch lifts the causal mask inside the batch (positions
	// Pos0..Pos0+Tokens-1); the window still applies.
	Batch bool
	// Sinks, when not nil, are Heads sink logits: head h's softmax
	// denominator gets exp(Sinks[h] - m), a term with no value.
	Sinks []float32
}

// visible says whether the query at position i sees key j: causally, j <=
// i and i - j < Window; bidirectionally, |i - j| < Window; with Batch, the
// batch's later keys too (within the window's bound on the past).
func (a AttentionArgs) visible(i, j int) bool {
	if a.Bidirectional {
		return a.Window == 0 || max(i-j, j-i) < a.Window
	}
	ahead := a.Batch && j < a.Pos0+a.Tokens
	return (j <= i || ahead) && (a.Window == 0 || i-j < a.Window)
}

// sink is head h's sink logit, -inf (a term of weight 0) without sinks.
func (a AttentionArgs) sink(h int) float64 {
	if a.Sinks == nil {
		return math.Inf(-1)
	}
	return float64(a.Sinks[h])
}

// Attention is causal (or, with Bidirectional, unmasked) scaled dot-product attention of a.Tokens queries over
// the KV history, two passes per (token, head): the masked scores, then the
// softmax-weighted sum of values, the softmax's denominator with the head's
// sink, if any (transformers' gpt_oss eager_attention_forward: the scaled,
// masked scores concatenated with the sink, softmaxed, the sink's column
// dropped). Dot products, the softmax and the weighted sum are accumulated
// in float64, so the oracle's rounding is far below the kernel's f32.
func Attention(q, k, v []float32, a AttentionArgs) []float32 {
	hd := a.HeadDim
	scale := float64(a.Scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(hd))
	}
	group := a.Heads / a.KVHeads
	out := make([]float32, a.Tokens*a.Heads*hd)
	scores := make([]float64, a.KVLen)
	acc := make([]float64, hd)
	for t := range a.Tokens {
		i := a.Pos0 + t
		for h := range a.Heads {
			qv := q[(t*a.Heads+h)*hd : (t*a.Heads+h+1)*hd]
			kvh := h / group
			sink := a.sink(h)
			m := sink
			for j := range a.KVLen {
				if !a.visible(i, j) {
					scores[j] = math.Inf(-1)
					continue
				}
				kv := k[(j*a.KVHeads+kvh)*hd:]
				dot := 0.0
				for d := range hd {
					dot += float64(qv[d]) * float64(kv[d])
				}
				s := dot * scale
				if a.Softcap > 0 {
					c := float64(a.Softcap)
					s = c * math.Tanh(s/c)
				}
				scores[j] = s
				m = math.Max(m, s)
			}
			clear(acc)
			sum := math.Exp(sink - m)
			for j := range a.KVLen {
				if math.IsInf(scores[j], -1) {
					continue
				}
				w := math.Exp(scores[j] - m)
				sum += w
				vv := v[(j*a.KVHeads+kvh)*hd:]
				for d := range hd {
					acc[d] += w * float64(vv[d])
				}
			}
			o := out[(t*a.Heads+h)*hd:]
			for d := range hd {
				o[d] = float32(acc[d] / sum)
			}
		}
	}
	return out
}
