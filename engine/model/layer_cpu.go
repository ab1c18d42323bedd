package model

import (
	"fmt"
	"slices"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Proj names one projection of a block, in the order a LoRA step indexes
// its targets.
type Proj int

// The projections of a block.
const (
	ProjQ Proj = iota
	ProjK
	ProjV
	ProjO
	ProjGate
	ProjUp
	ProjDown
	// NumProj counts the projections.
	NumProj
)

// Projections returns l's weights indexed by Proj.
func (l *Layer) Projections() [NumProj]*Weight {
	return [NumProj]*Weight{l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down}
}

// LayerVectors are a block's small weights in f32: its norm gains, q/k/v
// biases and QK-norm gains, nil where the architecture has none.
type LayerVectors struct {
	AttnNorm, PostAttnNorm, FFNNorm, PostFFNNorm []float32
	QBias, KBias, VBias, QNorm, KNorm            []float32
	OBias, Sinks                                 []float32
	PLENorm                                      []float32
	// Gemma 3n: AltUp's router, its norm gain, the prediction and
	// correction coefficients and the corrected stream's gain; LAuReL's
	// norm gain.
	AltUpRouter, AltUpRouterNorm, AltUpPredict, AltUpCorrect, AltUpScale []float32
	LaurelNorm                                                           []float32
}

// Vectors dequantizes l's small weights.
func (l *Layer) Vectors() (LayerVectors, error) {
	var v LayerVectors
	for _, p := range []struct {
		dst *[]float32
		w   *Weight
	}{
		{&v.AttnNorm, l.AttnNorm}, {&v.PostAttnNorm, l.PostAttnNorm}, {&v.FFNNorm, l.FFNNorm}, {&v.PostFFNNorm, l.PostFFNNorm},
		{&v.QBias, l.QBias}, {&v.KBias, l.KBias}, {&v.VBias, l.VBias}, {&v.QNorm, l.QNorm}, {&v.KNorm, l.KNorm},
		{&v.OBias, l.OBias}, {&v.Sinks, l.Sinks},
		{&v.PLENorm, l.PLENorm}, {&v.LaurelNorm, l.LaurelNorm},
	} {
		if p.w == nil {
			continue
		}
		f, err := p.w.F32()
		if err != nil {
			return LayerVectors{}, err
		}
		*p.dst = f
	}
	if a := l.AltUp; a != nil {
		for _, p := range []struct {
			dst *[]float32
			w   *Weight
		}{{&v.AltUpRouter, a.Router}, {&v.AltUpRouterNorm, a.RouterNorm}, {&v.AltUpPredict, a.Predict}, {&v.AltUpCorrect, a.Correct}, {&v.AltUpScale, a.CorrectScale}} {
			f, err := p.w.F32()
			if err != nil {
				return LayerVectors{}, err
			}
			*p.dst = f
		}
	}
	return v, nil
}

// LayerActivations are the intermediates of one block's CPU forward, what
// a backward pass through the block needs.
type LayerActivations struct {
	X, XN       []float32 // input, attention-norm output
	QIn, KIn    []float32 // q and k before QK-norm (after bias)
	Q, K, V     []float32 // what attention saw (q, k rotated)
	Att         []float32 // attention output, O's input
	O           []float32 // O's output, before the post-norm
	VIn         []float32 // v before its norm (Gemma 4's VNorm; nil without)
	X2, XN2     []float32 // after the attention residual; FFN-norm output
	Gate, Up, H []float32 // gate and up projections; GLU output, Down's input
	F           []float32 // Down's output, before the post-norm
	// Gemma 4's tail (nil without per-layer embeddings): the stream
	// before it, the gate's product, the layer's per-layer input (n rows
	// of PerLayerInput), the gated slice (PLEProj's input) and PLEProj's
	// output before its norm. Gemma 3n's gate reads First, and PLEIn
	// stays nil.
	PLEIn, PLEG, PLE, PLEH, PLEY []float32
	Out                          []float32 // the block's output
	// Gemma 3n: the layer's streams (its input), AltUp's predictions, the
	// corrected active stream times the correction scale; LAuReL's
	// products L·xn and R·(L·xn); the gate before its sparsity.
	Streams, Pred, First []float32
	LaurelT, LaurelR     []float32
	GateIn               []float32
	// MoE is the mixture of experts' intermediates (Gate, Up, H stay nil).
	MoE *MoEActivations
	// Attention and RopeQ/RopeK are the arguments the forward ran with.
	Attention    ref.AttentionArgs
	RopeQ, RopeK ref.RoPEArgs
}

// CPULayer is what one block's CPU forward runs with.
type CPULayer struct {
	Vectors *LayerVectors
	// Mul returns projection p of x (rows × its columns): W·x and whatever
	// the caller adds to it (LoRA), summed as the caller chooses.
	Mul func(p Proj, x []float32, rows int) ([]float32, error)
	// Factors are the RoPE factors (Model.RopeFactorsFor), nil for none.
	Factors []float32
	// Pos is the position of the first token.
	Pos int
	// K and V are the block's cache (context × KVDim): the tokens' keys
	// and values go in at Pos and attention reads positions 0..Pos+n. Nil
	// attends over the tokens' own keys and values. A layer that reads an
	// earlier layer's cache (Config.Shape's KVLayer) gets that cache, and
	// writes nothing to it.
	K, V []float32
	// PLE are the batch's per-layer-embedding inputs (Gemma 4), nil when
	// the model has none.
	PLE *PLEInputs
	// Batch lifts the causal mask inside the batch (an image's
	// tokens: ops.AttentionArgs.Batch).
	Batch bool
}

// PLEInputs are a batch's per-layer-embedding inputs, Proj and Tok n rows
// of Layers × PerLayerInput: the projection of the tokens' (scaled)
// embeddings by per_layer_model_proj, and the tokens' rows of the
// per-layer table scaled by sqrt(PerLayerInput); Norm is the gain of the
// projection's per-layer norm.
type PLEInputs struct {
	Proj, Tok, Norm []float32
}

// ForwardLayerCPU runs block i over the n tokens of x (n × Hidden) with the
// ops of engine/ops/ref: norm, q/k/v (+ bias), QK-norm, RoPE, attention, O,
// post-norm, residual, norm, gate/up, GLU, down, post-norm, residual. It
// returns the block's output in a new slice; acts, when not nil, receives
// every intermediate.
//
// With Gemma 3n's AltUp, x and the result are the Config.AltUp streams
// (stream-major: AltUp × n × Hidden) and the block runs on the active
// stream's prediction (forwardAltUpCPU); acts then holds the block's
// intermediates on that prediction.
func (m *Model) ForwardLayerCPU(i int, x []float32, n int, s CPULayer, acts *LayerActivations) ([]float32, error) {
	if m.Config.AltUp > 0 {
		return m.forwardAltUpCPU(i, x, n, s, acts)
	}
	return m.forwardBlockCPU(i, x, n, s, acts)
}

// forwardBlockCPU is ForwardLayerCPU on one stream.
func (m *Model) forwardBlockCPU(i int, x []float32, n int, s CPULayer, acts *LayerActivations) ([]float32, error) {
	c, lv := &m.Config, s.Vectors
	d := c.Hidden
	a := acts
	if a == nil {
		a = &LayerActivations{}
	}
	a.X = x
	norm := func(x, w []float32, rows, dim int) []float32 {
		return ref.RMSNorm(x, w, ref.NormArgs{Rows: rows, Dim: dim, Eps: c.Eps})
	}
	var err error
	mul := func(p Proj, x []float32) []float32 {
		if err != nil {
			return nil
		}
		var y []float32
		y, err = s.Mul(p, x, n)
		return y
	}

	// Attention: x += O · attention(rope(q), rope(k), v), q, k, v
	// projections of norm(x).
	sh := c.Shape(i)
	hd, own := sh.HeadDim, c.OwnKV(i)
	if !own && s.K == nil {
		return nil, fmt.Errorf("model: layer %d reads layer %d's cache and has none", i, sh.KVLayer)
	}
	a.XN = norm(x, lv.AttnNorm, n, d)
	// Gemma 3n's LAuReL: xn + norm(R·L·xn), added to attention's residual.
	var laurel []float32
	if l := &m.Layers[i]; l.LaurelL != nil {
		t, err := matmul(l.LaurelL, a.XN, n)
		if err != nil {
			return nil, err
		}
		r, err := matmul(l.LaurelR, t, n)
		if err != nil {
			return nil, err
		}
		laurel = ref.Add(a.XN, norm(r, lv.LaurelNorm, n, d))
		a.LaurelT, a.LaurelR = t, r
	}
	q := mul(ProjQ, a.XN)
	var k, v []float32
	if own {
		k, v = mul(ProjK, a.XN), mul(ProjV, a.XN)
	}
	if err != nil {
		return nil, err
	}
	if lv.QBias != nil {
		ref.AddBias(q, lv.QBias)
		ref.AddBias(k, lv.KBias)
		ref.AddBias(v, lv.VBias)
	}
	a.QIn, a.KIn = q, k
	if lv.QNorm != nil {
		q = norm(q, lv.QNorm, n*c.Heads, hd)
		if own {
			k = norm(k, lv.KNorm, n*sh.KVHeads, hd)
		}
	}
	a.VIn = nil
	if c.VNorm && own {
		a.VIn = v
		v = norm(v, nil, n*sh.KVHeads, hd)
	}
	factors := s.Factors
	if !sh.RopeFactors {
		factors = nil
	}
	base, scale := c.Rope(i)
	a.RopeQ = ref.RoPEArgs{Tokens: n, Heads: c.Heads, HeadDim: hd, RopeDims: sh.RopeDims, NeoX: c.NeoX, Base: base, FreqScale: scale, Pos0: s.Pos, AttnFactor: c.RopeAttnFactor}
	a.RopeK = a.RopeQ
	a.RopeK.Heads = sh.KVHeads
	a.Q = ref.RoPE(q, factors, nil, a.RopeQ)
	if own {
		a.K = ref.RoPE(k, factors, nil, a.RopeK)
	}
	a.V = v
	a.Attention = ref.AttentionArgs{
		HeadDim: hd, Heads: c.Heads, KVHeads: sh.KVHeads, Tokens: n, Pos0: s.Pos, KVLen: s.Pos + n,
		Scale: c.AttnScale, Window: c.Window(i), Softcap: c.AttnSoftcap, Bidirectional: c.Bidirectional, Batch: s.Batch && c.ImageBatch(i),
	}
	a.Attention.Sinks = lv.Sinks
	keys, values := a.K, a.V
	if s.K != nil {
		kvd := sh.KVHeads * hd
		if len(s.K) < (s.Pos+n)*kvd || len(s.V) < (s.Pos+n)*kvd {
			return nil, fmt.Errorf("model: layer %d: cache of %d values is short of %d positions", i, len(s.K), s.Pos+n)
		}
		if own {
			copy(s.K[s.Pos*kvd:], a.K)
			copy(s.V[s.Pos*kvd:], a.V)
		}
		keys, values = s.K, s.V
	}
	a.Att = attention(a.Q, keys, values, a.Attention)
	a.O = mul(ProjO, a.Att)
	if err != nil {
		return nil, err
	}
	if lv.OBias != nil {
		ref.AddBias(a.O, lv.OBias)
	}
	o := a.O
	if lv.PostAttnNorm != nil {
		o = norm(o, lv.PostAttnNorm, n, d)
	}
	a.X2 = ref.Add(x, o)
	if laurel != nil {
		a.X2 = ref.Scale(ref.Add(a.X2, laurel), laurelScale)
	}

	// Feed-forward: x += Down · (act(Gate · norm(x)) * (Up · norm(x))), or
	// a mixture of such experts (moe.go).
	a.XN2 = norm(a.X2, lv.FFNNorm, n, d)
	e := m.Layers[i].MoE
	a.MoE = nil
	if e != nil && acts != nil {
		a.MoE = &MoEActivations{}
	}
	if e != nil && !c.MoE.Dense {
		if a.F, err = m.moeCPU(e, a.XN2, a.XN2, n, a.MoE); err != nil {
			return nil, fmt.Errorf("model: layer %d: %w", i, err)
		}
	} else {
		a.Gate, a.Up = mul(ProjGate, a.XN2), mul(ProjUp, a.XN2)
		if err != nil {
			return nil, err
		}
		if sh.Sparse {
			if acts != nil {
				a.GateIn = slices.Clone(a.Gate)
			}
			ref.GaussianTopK(a.Gate, n, sh.FF, sh.FF, sh.Sparsity)
		}
		if c.GELU {
			a.H = ref.GeGLU(a.Gate, a.Up)
		} else {
			a.H = ref.SwiGLU(a.Gate, a.Up)
		}
		a.F = mul(ProjDown, a.H)
		if err != nil {
			return nil, err
		}
		if e != nil {
			// Gemma 4's experts beside the dense feed-forward.
			if a.F, err = m.denseMoECPU(e, a.X2, a.F, n, a.MoE); err != nil {
				return nil, fmt.Errorf("model: layer %d: %w", i, err)
			}
		}
	}
	f := a.F
	if lv.PostFFNNorm != nil {
		f = norm(f, lv.PostFFNNorm, n, d)
	}
	a.Out = ref.Add(a.X2, f)

	// Gemma 4: x += norm(PLEProj · (gelu(PLEGate · x) · ple_i)), then the
	// whole stream scaled. (Gemma 3n's gate reads the corrected streams:
	// forwardAltUpCPU.)
	if l := &m.Layers[i]; l.PLEGate != nil && c.AltUp == 0 {
		if s.PLE == nil {
			return nil, fmt.Errorf("model: layer %d needs the batch's per-layer-embedding inputs", i)
		}
		g, err := matmul(l.PLEGate, a.Out, n)
		if err != nil {
			return nil, err
		}
		h := ref.PLEGate(g, s.PLE.Proj, s.PLE.Tok, s.PLE.Norm, refPLEArgs(c, n, i))
		y, err := matmul(l.PLEProj, h, n)
		if err != nil {
			return nil, err
		}
		if acts != nil {
			a.PLEIn, a.PLEG, a.PLEH, a.PLEY = a.Out, g, h, y
			a.PLE = ref.PLEInput(s.PLE.Proj, s.PLE.Tok, s.PLE.Norm, refPLEArgs(c, n, i))
		}
		a.Out = ref.Add(a.Out, norm(y, lv.PLENorm, n, d))
	}
	if sc := m.Layers[i].OutScale; sc != 0 {
		for j := range a.Out {
			a.Out[j] *= sc
		}
	}
	return a.Out, nil
}
