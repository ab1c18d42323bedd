package model

import (
	"fmt"
	"os"
	"slices"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/gguf"
)

// GPUActivations are the buffers one block's GPU forward (RecordLayer)
// reads and writes. Serving passes one set for every block, the stream
// updated in place and the scratch shared; a training step sets Keep and
// gives every intermediate its backward reads a buffer of its own.
type GPUActivations struct {
	// Keep keeps every intermediate (ForwardLayerCPU's LayerActivations):
	// X is left as it is, the stream after attention goes to X2 and the
	// block's output to Out, q and k before their QK-norm to QIn and KIn,
	// and no kernel fusion drops a value the backward reads. It needs the
	// unmerged weight layout and position 0.
	Keep bool
	// X is the residual stream, n rows of Hidden: the block's input, and
	// without Keep its output too.
	X, X2, Out *gpu.Buffer
	// XN and XN2 receive the attention and FFN norms' outputs (serving:
	// one buffer).
	XN, XN2 *gpu.Buffer
	// QKV receives the merged q|k|v projections (serving); with Keep they go
	// to Q, K and V.
	QKV *gpu.Buffer
	// Q gets the rotated queries. K and V are the block's keys and values:
	// serving's cache (context rows, the tokens' written at pos); with Keep
	// the tokens' own n rows.
	Q, K, V  *gpu.Buffer
	QIn, KIn *gpu.Buffer
	// VIn, with Keep, gets v before Gemma 4's v norm.
	VIn        *gpu.Buffer
	Att        *gpu.Buffer // attention's output, O's input
	AttScratch *gpu.Buffer // ops.Attention's split scratch
	// O and F receive O's and Down's products before their post-norms
	// (serving: one scratch).
	O, F *gpu.Buffer
	// Gate and Up receive the gate and up projections (merged: Gate holds
	// both per row, 2·FF floats) and H the GLU's output, Down's input
	// (serving: H is Up).
	Gate, Up, H *gpu.Buffer
	// PLEProj and PLETok are the batch's per-layer-embedding inputs (Gemma
	// 4; n rows of Layers × PerLayerInput: the projection of the
	// embeddings and the table's rows), PLEG and PLEH the layer's gate and
	// gated slice (n rows of PerLayerInput); nil without PLE.
	PLEProj, PLETok, PLEG, PLEH *gpu.Buffer
	// PLEY, when set (training), keeps the per-layer embedding's
	// projection before its norm; nil puts it in the scratch F.
	PLEY *gpu.Buffer
	// Gemma 3n's AltUp (nil without): Streams are the block's input and
	// output (Config.AltUp streams of n rows, stream-major) and X the
	// active stream's prediction the block runs on; Pred receives the
	// predictions (laid out as Streams) and First the corrected active
	// stream that gates the per-layer embedding (n rows); Laurel receives
	// LAuReL's rank-wide product (n rows of its rank).
	Streams, Pred, First, Laurel *gpu.Buffer
	// With Keep (training), StreamsOut receives the corrected streams (the
	// input streams stay as they were), LaurelR LAuReL's R·(L·xn) before
	// its norm, and GateIn the gate before its sparsity.
	StreamsOut, LaurelR, GateIn *gpu.Buffer
	// MoE are the buffers of a mixture of experts (Config.MoE), nil
	// without.
	MoE *GPUMoEActivations
	// XQ, when set, receives a decoded token's activations quantized to 8
	// bits (ops.QuantizeQ8, ops.Q8Words of the widest input) for each
	// product whose weights decode that way (q8DecodeTypes): ggml's
	// arithmetic for those, not f32's; their LoRA terms stay f32. Nil keeps
	// every product on f32 activations. With Q8Prefill XQ holds a whole
	// batch's rows, and a prompt's products whose weights allow it
	// (q8Prefills) run on 8-bit activations too (ops.MatMulQ8).
	XQ        *gpu.Buffer
	Q8Prefill bool
	// RowQKV, RowQ and RowAtt are one token's q|k|v, rotated q and
	// attention output: a batched decode (GPULayerArgs.Seqs) runs each
	// token's rotation and attention on its own sequence through them.
	// Nil without Seqs.
	RowQKV, RowQ, RowAtt *gpu.Buffer
}

// SeqKV is one token's own sequence in a batched decode: the token sits at
// Pos, and K and V are its sequence's cache of the layer (the layer whose
// cache it reads, for Gemma 4's KV-sharing layers).
type SeqKV struct {
	Pos  int
	K, V *gpu.Buffer
}

// GPULayerArgs are one RecordLayer call's tokens and hooks.
type GPULayerArgs struct {
	N, Pos int // tokens and the position of the first
	// Seqs, when set, makes the N tokens those of N sequences decoded
	// together (Runner.Decode): token t sits at Seqs[t].Pos in its own
	// cache, and Pos and the GPUActivations' K and V are not used. The
	// products run on all N rows at once; each token's rotation, cache
	// write and attention run on its own sequence.
	Seqs []SeqKV
	// Batch lifts the causal mask inside the N tokens (an image's
	// tokens: ops.AttentionArgs.Batch).
	Batch bool
	// Normed says XN already holds this block's attention norm of X (the
	// block before wrote it); Next, when set, is the next block's attention
	// norm gain, which this block's last residual then applies into XN.
	// Serving's fusions: Keep takes neither.
	Normed bool
	Next   *gpu.Buffer
	// LoRA, when set, appends projection p's adapter term, y += Δp(x) for
	// the n rows of x, y placed by o; Adapted says which projections have
	// one (a kernel fusion that would hide x from it is then skipped).
	LoRA    func(ch *gpu.Chain, p Proj, x, y *gpu.Buffer, n int, o ops.MatmulOptions) error
	Adapted func(p Proj) bool
}

// RoPEArgs are c's block i's rotations of q and k for n tokens from pos.
func RoPEArgs(c *Config, i, n, pos int) (q, k ops.RoPEArgs) {
	base, scale := c.Rope(i)
	sh := c.Shape(i)
	q = ops.RoPEArgs{Tokens: n, Heads: c.Heads, HeadDim: sh.HeadDim, RopeDims: sh.RopeDims, NeoX: c.NeoX,
		Base: base, FreqScale: scale, Pos0: pos, AttnFactor: c.RopeAttnFactor}
	k = q
	k.Heads = sh.KVHeads
	return q, k
}

// AttentionArgs are c's block i's attention of n tokens from pos over the
// positions up to theirs.
func AttentionArgs(c *Config, i, n, pos int) ops.AttentionArgs {
	sh := c.Shape(i)
	return ops.AttentionArgs{
		HeadDim: sh.HeadDim, Heads: c.Heads, KVHeads: sh.KVHeads, Tokens: n, Pos0: pos, KVLen: pos + n,
		Scale: c.AttnScale, Window: c.Window(i), Softcap: c.AttnSoftcap, Bidirectional: c.Bidirectional,
	}
}

// AttentionArgs are AttentionArgs(c, i, n, pos) with block i's attention
// sinks (gpt-oss), nil without.
func (w *GPUWeights) AttentionArgs(i, n, pos int) ops.AttentionArgs {
	a := AttentionArgs(w.c, i, n, pos)
	a.Sinks = w.Layers[i].Sinks
	return a
}

// ropeFactors are the RoPE factors block i rotates with: w's, unless the
// layer rotates plainly (Gemma 4's sliding layers).
func (w *GPUWeights) ropeFactors(i int) *gpu.Buffer {
	if !w.c.Shape(i).RopeFactors {
		return nil
	}
	return w.Factors
}

// RecordLayer appends block i's forward over s.N tokens to ch, the GPU
// counterpart of ForwardLayerCPU: norm, q/k/v (+ bias), QK-norm, RoPE,
// attention, O, post-norm, residual, norm, gate/up, GLU, down, post-norm,
// residual. Serving fuses what a decoded token allows (the pre-norms into
// the projections' matvecs, bias + QK-norm + RoPE + cache write in one
// kernel, the GLU into the down matvec, post-norm + residual + the next
// pre-norm in one); with a.Keep the same graph runs unfused, keeping what
// the backward reads. Gemma 3n's block runs on AltUp's active prediction
// and corrects the streams after it (a.Streams; altup.go), with LAuReL's
// side path added before attention's residual. It reports whether XN now
// holds the next block's attention norm (s.Next applied).
func (w *GPUWeights) RecordLayer(ch *gpu.Chain, i int, a *GPUActivations, s GPULayerArgs) (normed bool, err error) {
	c, l := w.c, &w.Layers[i]
	n, d := s.N, c.Hidden
	sh, own := c.Shape(i), c.OwnKV(i)
	if a.Keep && (!l.unmerged() || s.Pos != 0 || s.Normed || s.Next != nil || s.Seqs != nil) {
		return false, fmt.Errorf("model: layer %d: keeping activations needs unmerged weights at position 0 without cross-block fusion, one sequence", i)
	}
	if s.Seqs != nil && (len(s.Seqs) != n || a.RowQKV == nil || a.RowQ == nil || a.RowAtt == nil) {
		return false, fmt.Errorf("model: layer %d: a decode of %d sequences has %d tokens, and needs the row buffers", i, len(s.Seqs), n)
	}
	try := func(e error) {
		if err == nil {
			err = e
		}
	}
	adapted := func(ps ...Proj) bool {
		for _, p := range ps {
			if s.LoRA != nil && s.Adapted != nil && s.Adapted(p) {
				return true
			}
		}
		return false
	}
	lora := func(p Proj, x, y *gpu.Buffer, o ops.MatmulOptions) {
		if adapted(p) {
			try(s.LoRA(ch, p, x, y, n, o))
		}
	}
	norm := func(x, g, y *gpu.Buffer, rows, dim int) {
		try(ops.RMSNorm(ch, x, g, y, ops.NormArgs{Rows: rows, Dim: dim, Eps: c.Eps}))
	}
	// A kept activation must be written out, so Keep fuses no norm.
	fuseNorm := func(lora bool, ts ...*gpu.Tensor) bool {
		return !a.Keep && normFuses(n, lora, ts...)
	}
	// q8 says whether the products with ts run on 8-bit activations: a
	// decoded token's, or the tokens of a batched decode (up to
	// ops.MaxQ8Rows, each weight read once for all), and with a.Q8Prefill
	// a prompt's. A LoRA term still reads its input in f32: where that
	// input is a norm's output, the norm is then written out (and
	// quantized) instead of folded into the quantizer.
	q8 := func(ts ...*gpu.Tensor) bool {
		if a.XQ == nil || a.Keep {
			return false
		}
		if n == 1 || (s.Seqs != nil && n <= ops.MaxQ8Rows) {
			return q8Decodes(ch.Device(), ts...)
		}
		return a.Q8Prefill && s.Seqs == nil && q8Prefills(ch.Device(), ts...)
	}
	// The fused norms' rows: one token's for MatVecNormed (normFuses), the
	// batch's for the quantizers.
	normArgs := ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}
	rq, rk := RoPEArgs(c, i, n, s.Pos)

	// Gemma 3n: the block runs on the active stream's prediction.
	if l.AltUp != nil {
		try(ops.AltUpPredict(ch, a.Streams, l.AltUp.Weights, a.Pred, a.X, OpsAltUpArgs(c, n)))
		s.Normed = false // X is new: no norm of it was written
	}
	// LAuReL's side path R·(L·xn) of the attention norm, which is then
	// written out; xn + norm(R·L·xn) goes into the stream just before
	// attention's residual, which then scales the sum (attnScale).
	attnScale := float32(0)
	laurelR := a.O // read before O's product overwrites it
	if a.LaurelR != nil {
		laurelR = a.LaurelR
	}
	if l.LaurelL != nil {
		if l.PostAttnNorm == nil {
			return false, fmt.Errorf("model: layer %d: LAuReL's scale rides on the post-attention norm's add, and the layer has none", i)
		}
		if !s.Normed {
			norm(a.X, l.AttnNorm, a.XN, n, d)
			s.Normed = true
		}
		try(ops.MatMul(ch, l.LaurelL, a.XN, a.Laurel, n))
		try(ops.MatMul(ch, l.LaurelR, a.Laurel, laurelR, n))
		attnScale = laurelScale
	}

	// Attention: x += post(O · attention(rope(q), rope(k), v)), the
	// projections of norm(x).
	if a.Keep {
		w.keptQKV(ch, i, a, s.N, norm, lora, try)
		try(ops.RoPE(ch, a.Q, w.ropeFactors(i), nil, rq))
		if own {
			try(ops.RoPE(ch, a.K, w.ropeFactors(i), nil, rk))
		}
	} else {
		// q, k and v side by side in QKV; then bias, QK-norms, the rotations
		// and the cache rows of k and v at pos in one kernel. A layer that
		// reads an earlier layer's cache has q alone.
		qd, kvd := c.LayerQDim(i), c.LayerKVDim(i)
		kvHeads, kc, vc := sh.KVHeads, a.K, a.V
		if !own {
			kvd, kvHeads, kc, vc = 0, 0, nil, nil
		}
		qkvd := qd + 2*kvd // a token's row of QKV
		ts := make([]*gpu.Tensor, len(l.QKV))
		for j, p := range l.QKV {
			ts[j] = p.T
		}
		switch {
		case q8(ts...):
			// The quantizer applies the norm itself unless a LoRA reads XN.
			// Each product quantizes its own input where ops.Q8Fuses says
			// so; else the first one's quantizer writes XQ for the rest.
			normedQ8 := !s.Normed && !adapted(ProjQ, ProjK, ProjV)
			if !s.Normed && !normedQ8 {
				norm(a.X, l.AttnNorm, a.XN, n, d)
			}
			quantized := false // XQ holds the input
			for _, p := range l.QKV {
				o := ops.MatmulOptions{YOffset: p.Col, YStride: qkvd}
				switch {
				case quantized:
					try(ops.MatMulQ8(ch, p.T, a.XQ, a.QKV, n, o))
				case normedQ8:
					try(ops.MatMulQ8Normed(ch, p.T, a.X, l.AttnNorm, a.XQ, a.QKV, normArgs, o))
				default:
					try(ops.MatMulQ8Of(ch, p.T, a.XN, a.XQ, a.QKV, n, o))
				}
				quantized = quantized || !ops.Q8Fuses(ch.Device(), p.T, n)
			}
		case !s.Normed && fuseNorm(adapted(ProjQ, ProjK, ProjV), ts...):
			for _, p := range l.QKV {
				try(ops.MatVecNormed(ch, p.T, a.X, l.AttnNorm, a.QKV, normArgs, ops.MatmulOptions{YOffset: p.Col, YStride: qkvd}))
			}
		default:
			if !s.Normed {
				norm(a.X, l.AttnNorm, a.XN, n, d)
			}
			for _, p := range l.QKV {
				try(ops.MatMulWith(ch, p.T, a.XN, a.QKV, n, ops.MatmulOptions{YOffset: p.Col, YStride: qkvd}))
			}
		}
		lora(ProjQ, a.XN, a.QKV, ops.MatmulOptions{YStride: qkvd})
		if own {
			lora(ProjK, a.XN, a.QKV, ops.MatmulOptions{YOffset: qd, YStride: qkvd})
			lora(ProjV, a.XN, a.QKV, ops.MatmulOptions{YOffset: qd + kvd, YStride: qkvd})
		}
		if s.Seqs == nil {
			try(ops.RoPEQKV(ch, a.QKV, l.QKVBias, l.QKNorm, w.ropeFactors(i), a.Q, kc, vc,
				ops.RoPEQKVArgs{RoPEArgs: rq, KVHeads: kvHeads, Eps: c.Eps, VNorm: c.VNorm}))
		} else {
			// Each sequence's token: its row of QKV out, rotated at its
			// position into its cache, its attention over its cache, its
			// output row back. The kernels are the single-token decode's.
			for t, q := range s.Seqs {
				rq, _ := RoPEArgs(c, i, 1, q.Pos)
				kc, vc := q.K, q.V
				if !own {
					kc, vc = nil, nil
				}
				try(ops.CopyF32(ch, a.QKV, t*qkvd, a.RowQKV, 0, qkvd))
				try(ops.RoPEQKV(ch, a.RowQKV, l.QKVBias, l.QKNorm, w.ropeFactors(i), a.RowQ, kc, vc,
					ops.RoPEQKVArgs{RoPEArgs: rq, KVHeads: kvHeads, Eps: c.Eps, VNorm: c.VNorm}))
				try(ops.Attention(ch, a.RowQ, q.K, q.V, a.AttScratch, a.RowAtt, w.AttentionArgs(i, 1, q.Pos)))
				try(ops.CopyF32(ch, a.RowAtt, 0, a.Att, t*qd, qd))
			}
		}
	}
	if s.Seqs == nil {
		att := w.AttentionArgs(i, n, s.Pos)
		att.Batch = s.Batch && c.ImageBatch(i)
		try(ops.Attention(ch, a.Q, a.K, a.V, a.AttScratch, a.Att, att))
	}

	// residual appends x += post(W · in): straight into the stream, or into
	// tmp and then normed and added in one kernel (Gemma 2/3's post-norms),
	// which then also writes xn = norm(x)·next when next is set (the
	// pre-norm that follows) and reports that it did. p's LoRA term goes
	// into W · in before the norm. With glu set, in is one token's
	// [gate | up] and W reads act(gate)·up (ops.MatVecGLU, or quantized
	// by ops.QuantizeQ8GLU). bias, when set, is W's (gpt-oss's output
	// projection's), added to W · in: by a decoded token's quantized
	// product as it stores (one dispatch fewer), else apart.
	residual := func(x *gpu.Buffer, t *gpu.Tensor, p Proj, in, post, tmp, next, xn *gpu.Buffer, glu *ops.GLUArgs, bias *gpu.Buffer, scale float32, mix func(tmp *gpu.Buffer) *gpu.Buffer) bool {
		product := func(y *gpu.Buffer, o ops.MatmulOptions) error {
			apart := bias
			if bias != nil && n == 1 && glu == nil && (q8(t) || ops.HasMatVecBias(t.Type)) {
				o.Bias, apart = bias, nil
			}
			switch {
			case q8(t) && glu != nil:
				try(ops.MatMulQ8GLU(ch, t, in, a.XQ, y, *glu, n, o))
			case q8(t):
				try(ops.MatMulQ8Of(ch, t, in, a.XQ, y, n, o))
			case glu != nil:
				try(ops.MatVecGLU(ch, t, in, y, *glu, o))
			default:
				try(ops.MatMulWith(ch, t, in, y, n, o))
			}
			if apart != nil {
				return ops.AddBias(ch, y, apart, n, t.Rows)
			}
			return nil
		}
		if post == nil {
			try(product(x, ops.MatmulOptions{Accumulate: true}))
			lora(p, in, x, ops.MatmulOptions{})
			return false
		}
		try(product(tmp, ops.MatmulOptions{}))
		lora(p, in, tmp, ops.MatmulOptions{})
		if mix != nil {
			tmp = mix(tmp)
		}
		na := ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps, Scale: scale}
		if next == nil {
			try(ops.RMSNormAdd(ch, tmp, post, x, na))
			return false
		}
		try(ops.RMSNormAddNorm(ch, tmp, post, x, next, xn, na))
		return true
	}
	x := a.X
	if a.Keep {
		try(ops.CopyF32(ch, a.X, 0, a.X2, 0, n*d))
		x = a.X2
	}
	if l.LaurelL != nil {
		try(ops.AddInPlace(ch, x, a.XN, n*d))
		try(ops.RMSNormAdd(ch, laurelR, l.LaurelNorm, x, ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}))
	}
	normed = residual(x, l.O, ProjO, a.Att, l.PostAttnNorm, a.O, l.FFNNorm, a.XN2, nil, l.OBias, attnScale, nil)

	tail := l.PLEGate != nil || l.OutScale != 0
	if l.MoE != nil && !c.MoE.Dense {
		// A mixture of experts in place of the dense feed-forward: its
		// sum added to the stream, through the post-norm where there is
		// one.
		// A decoded token's norm rides on the router's product.
		var normOf *gpu.Buffer
		if !normed {
			if n == 1 && !a.Keep && ops.HasMoERouterNormed(l.MoE.Router.Type, l.MoE.Router.Cols) {
				normOf = x
			} else {
				norm(x, l.FFNNorm, a.XN2, n, d)
			}
		}
		if a.Keep {
			try(ops.CopyF32(ch, a.X2, 0, a.Out, 0, n*d))
			x = a.Out
		}
		if l.PostFFNNorm == nil {
			w.recordMoE(ch, i, a.MoE, a.XN2, a.XN2, x, normOf, true, n, a.Keep, try)
		} else {
			w.recordMoE(ch, i, a.MoE, a.XN2, a.XN2, a.F, normOf, false, n, a.Keep, try)
			try(ops.RMSNormAdd(ch, a.F, l.PostFFNNorm, x, ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}))
		}
		normed = false
	} else {
		// Feed-forward: x += post(Down · (act(Gate · norm(x)) * (Up · norm(x)))).
		ff := sh.FF
		q8FFN := l.GateUp != nil && q8(l.GateUp)
		// The quantizer applies the norm itself unless a LoRA reads XN2.
		q8Normed := q8FFN && !normed && !adapted(ProjGate, ProjUp)
		fuseFFN := !normed && !q8FFN && l.GateUp != nil && fuseNorm(adapted(ProjGate, ProjUp), l.GateUp)
		if !normed && !fuseFFN && !q8Normed {
			norm(x, l.FFNNorm, a.XN2, n, d)
		}
		var glu *ops.GLUArgs // set when the down matvec applies the GLU to Gate
		if l.GateUp != nil {
			switch {
			case q8Normed:
				try(ops.MatMulQ8Normed(ch, l.GateUp, x, l.FFNNorm, a.XQ, a.Gate, normArgs, ops.MatmulOptions{}))
			case q8FFN:
				try(ops.MatMulQ8Of(ch, l.GateUp, a.XN2, a.XQ, a.Gate, n, ops.MatmulOptions{}))
			case fuseFFN:
				try(ops.MatVecNormed(ch, l.GateUp, x, l.FFNNorm, a.Gate, normArgs, ops.MatmulOptions{}))
			default:
				try(ops.MatMul(ch, l.GateUp, a.XN2, a.Gate, n))
			}
			// gate and up rows alternate per token: 2·FF floats a row.
			lora(ProjGate, a.XN2, a.Gate, ops.MatmulOptions{YStride: 2 * ff})
			lora(ProjUp, a.XN2, a.Gate, ops.MatmulOptions{YOffset: ff, YStride: 2 * ff})
			if sh.Sparse {
				try(ops.GaussianTopK(ch, a.Gate, n, ff, 2*ff, sh.Sparsity))
			}
			// A decoded token's GLU goes into the down matvec (ops.MatVecGLU),
			// several tokens' into the quantizer of an 8-bit down product,
			// unless a LoRA on down has to read the activated rows from H.
			if !adapted(ProjDown) && (n == 1 && ops.HasMatVecGLU(l.Down.Type) || n > 1 && q8(l.Down)) {
				glu = &ops.GLUArgs{FF: ff, GELU: c.GELU}
			} else if c.GELU {
				try(ops.GeGLUFused(ch, a.Gate, a.H, n, ff))
			} else {
				try(ops.SwiGLUFused(ch, a.Gate, a.H, n, ff))
			}
		} else {
			try(ops.MatMul(ch, l.Gate, a.XN2, a.Gate, n))
			lora(ProjGate, a.XN2, a.Gate, ops.MatmulOptions{})
			if sh.Sparse {
				if a.GateIn != nil {
					try(ops.CopyF32(ch, a.Gate, 0, a.GateIn, 0, n*ff))
				}
				try(ops.GaussianTopK(ch, a.Gate, n, ff, ff, sh.Sparsity))
			}
			try(ops.MatMul(ch, l.Up, a.XN2, a.Up, n))
			lora(ProjUp, a.XN2, a.Up, ops.MatmulOptions{})
			if c.GELU {
				try(ops.GeGLU(ch, a.Gate, a.Up, a.H, n*ff))
			} else {
				try(ops.SwiGLU(ch, a.Gate, a.Up, a.H, n*ff))
			}
		}
		if a.Keep {
			try(ops.CopyF32(ch, a.X2, 0, a.Out, 0, n*d))
			x = a.Out
		}
		// The next block's pre-norm goes into the last residual add, which is
		// the feed-forward's unless Gemma 4's PLE and output scale follow.
		next := s.Next
		if tail {
			next = nil
		}
		// Gemma 4's experts beside the dense feed-forward: its output
		// and theirs, each normed, summed before the post-norm.
		var mix func(*gpu.Buffer) *gpu.Buffer
		if l.MoE != nil {
			if l.PostFFNNorm == nil {
				try(fmt.Errorf("experts beside the dense feed-forward need its post-norm"))
			}
			mix = func(f1 *gpu.Buffer) *gpu.Buffer {
				return w.recordDenseMoE(ch, i, a.MoE, x, f1, n, a.Keep, try)
			}
		}
		in := a.H
		if glu != nil {
			in = a.Gate
		}
		normed = residual(x, l.Down, ProjDown, in, l.PostFFNNorm, a.F, next, a.XN, glu, nil, 0, mix)
	}
	switch {
	case l.AltUp != nil:
		w.recordAltUpTail(ch, i, a, x, n, try)
	case tail:
		w.recordTail(ch, i, a, x, n, try)
	}
	if err != nil {
		return false, fmt.Errorf("model: layer %d: %w", i, err)
	}
	return normed, nil
}

// recordTail appends Gemma 4's end of block i on the stream x: x +=
// norm(PLEProj · (gelu(PLEGate · x) · ple_i)), the per-layer embeddings'
// gate, then the whole stream times the layer's output scale, which the
// add applies when there is one. The projection goes to a.PLEY, or to the
// scratch a.F when not kept.
func (w *GPUWeights) recordTail(ch *gpu.Chain, i int, a *GPUActivations, x *gpu.Buffer, n int, try func(error)) {
	c, l := w.c, &w.Layers[i]
	d := c.Hidden
	if l.PLEGate == nil {
		try(ops.Scale(ch, x, x, n*d, l.OutScale))
		return
	}
	y := a.F
	if a.PLEY != nil {
		y = a.PLEY
	}
	try(ops.MatMul(ch, l.PLEGate, x, a.PLEG, n))
	try(ops.PLEGate(ch, a.PLEG, a.PLEProj, a.PLETok, w.PLEProjNorm, a.PLEH, PLEArgs(c, n, i)))
	try(ops.MatMul(ch, l.PLEProj, a.PLEH, y, n))
	try(ops.RMSNormAdd(ch, y, l.PLENorm, x, ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps, Scale: l.OutScale}))
}

// normFuses says whether an RMSNorm of rows rows can go into the matvecs
// of ts that read it (ops.MatVecNormed: each workgroup normalises x as it
// stages it, one dispatch fewer): one row, weights with such a kernel, and
// no LoRA, which would read the normalised x.
func normFuses(rows int, lora bool, ts ...*gpu.Tensor) bool {
	if rows != 1 || lora {
		return false
	}
	for _, t := range ts {
		if !ops.HasMatVecNormed(t.Type) {
			return false
		}
	}
	return true
}

// q8Decodes says whether every tensor of ts decodes on 8-bit activations
// on d, so that one quantized copy of their input serves them all.
func q8Decodes(d *gpu.Device, ts ...*gpu.Tensor) bool {
	types := q8DecodeTypes(ops.Q8Packed(d))
	for _, t := range ts {
		if !slices.Contains(types, t.Type) {
			return false
		}
	}
	return len(ts) > 0
}

// q8DecodeTypes are the weight types a decoded token multiplies on 8-bit
// activations (ops.MatVecQ8), given whether its products take
// dot4I8Packed: Q4_K and Q6_K always (an 8B Q4_K_M token 1.6x on an H200
// with two products a u32 multiply), and Q8_0 with dot4I8Packed only. On an
// H100 in one lease (docs/performance.md, "The new binding on a GPU") an
// 8B Q8_0 token took 144 tokens/s on packed 8-bit activations against 82
// on f32 ones, SWAR 121, all three with naga's loop bounding on; the old
// binding's f32 Q8_0 decode, without it, ran 145-149.
// HEARTH_Q8_DECODE_Q8_0=0 keeps Q8_0 on f32 activations, =1 puts it on
// 8-bit ones without dot4I8Packed too, so that one binary measures each.
func q8DecodeTypes(packed bool) []gguf.Type {
	switch q8DecodeQ8_0 {
	case "0":
		return q8DecodeKQuants
	case "1":
		return q8DecodeAll
	}
	if packed {
		return q8DecodeAll
	}
	return q8DecodeKQuants
}

var (
	q8DecodeQ8_0    = os.Getenv("HEARTH_Q8_DECODE_Q8_0")
	q8DecodeKQuants = []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K}
	q8DecodeAll     = []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ8_0}
)

// Q8PackedDot is ops.Q8PackedDot: whether the decode products take
// dot4I8Packed where the compiler has it (hearth info).
func Q8PackedDot() bool { return ops.Q8PackedDot }

// q8Prefills says whether every tensor of ts multiplies a prompt on 8-bit
// activations on d (ops.HasMatMulQ8: Q4_K, Q6_K and Q8_0 where the
// compiler takes dot4I8Packed), so that one quantized copy of their input
// serves them all.
func q8Prefills(d *gpu.Device, ts ...*gpu.Tensor) bool {
	for _, t := range ts {
		if !ops.HasMatMulQ8(d, t.Type) {
			return false
		}
	}
	return len(ts) > 0
}

// q8PrefillOn says whether a runner on d quantizes prompts' activations:
// the device's compiler takes dot4I8Packed (the prefill product has no
// other form), unless HEARTH_Q8_PREFILL=0, which keeps prompts on f32
// activations so that one binary measures both.
func q8PrefillOn(d *gpu.Device) bool {
	return ops.Q8Packed(d) && Q8PrefillAllowed()
}

// Q8PrefillAllowed is false with HEARTH_Q8_PREFILL=0 (hearth info).
func Q8PrefillAllowed() bool { return os.Getenv("HEARTH_Q8_PREFILL") != "0" }

// Q8FusedWorkgroups is ops.Q8FuseMaxWorkgroups: the most workgroups of a
// decode product that quantizes its own input (hearth info).
func Q8FusedWorkgroups() int { return ops.Q8FuseMaxWorkgroups }

// Q8DecodeTypes lists the weight types a decoded token multiplies on 8-bit
// activations, given whether the products take dot4I8Packed (hearth info).
func Q8DecodeTypes(packed bool) []gguf.Type { return slices.Clone(q8DecodeTypes(packed)) }

// keptQKV appends the unfused q, k, v stage: the projections of norm(X)
// into Q, K and V, their biases, and QK-norm with its inputs kept in QIn
// and KIn.
//
// A layer that reads another's cache projects q alone; a.K and a.V are
// then that layer's. With Gemma 4's v norm, v before it goes to VIn.
func (w *GPUWeights) keptQKV(ch *gpu.Chain, i int, a *GPUActivations, n int, norm func(x, g, y *gpu.Buffer, rows, dim int), lora func(Proj, *gpu.Buffer, *gpu.Buffer, ops.MatmulOptions), try func(error)) {
	c, l := w.c, &w.Layers[i]
	sh, own := c.Shape(i), c.OwnKV(i)
	qd, kvd := c.LayerQDim(i), c.LayerKVDim(i)
	norm(a.X, l.AttnNorm, a.XN, n, c.Hidden)
	outs := []*gpu.Buffer{a.Q, a.K, a.V}
	if !own {
		outs = outs[:1]
	}
	for j, y := range outs {
		try(ops.MatMul(ch, l.QKV[j].T, a.XN, y, n))
		lora(ProjQ+Proj(j), a.XN, y, ops.MatmulOptions{})
	}
	if l.QBias != nil {
		try(ops.AddBias(ch, a.Q, l.QBias, n, qd))
		try(ops.AddBias(ch, a.K, l.KBias, n, kvd))
		try(ops.AddBias(ch, a.V, l.VBias, n, kvd))
	}
	if l.QNorm != nil {
		try(ops.CopyF32(ch, a.Q, 0, a.QIn, 0, n*qd))
		norm(a.Q, l.QNorm, a.Q, n*c.Heads, sh.HeadDim)
		if own {
			try(ops.CopyF32(ch, a.K, 0, a.KIn, 0, n*kvd))
			norm(a.K, l.KNorm, a.K, n*sh.KVHeads, sh.HeadDim)
		}
	}
	if c.VNorm && own {
		try(ops.CopyF32(ch, a.V, 0, a.VIn, 0, n*kvd))
		norm(a.V, nil, a.V, n*sh.KVHeads, sh.HeadDim)
	}
}
