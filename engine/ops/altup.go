package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// AltUpArgs shapes Gemma 3n's AltUp (shaders/altup.wgsl): Streams residual
// streams, each Tokens rows of Dim floats, stream-major (element e of
// stream k's row t at (k*Tokens + t)*Dim + e).
type AltUpArgs struct {
	Tokens, Dim, Streams int
	// Active is the stream the layer computes on (altup.active_idx).
	Active int
	// Eps is the RMSNorm eps of the router's input (AltUpPredict,
	// AltUpCorrect) or of the added row (AltUpAddNormed).
	Eps float32
}

// altUpMaxStreams is the most streams the kernels take: MAX_STREAMS in
// shaders/altup.wgsl (arch.MaxAltUp, which a model's config is held to).
const altUpMaxStreams = 8

// altUpParams mirrors Params in shaders/altup_common.wgsl.
type altUpParams struct {
	Tokens, Dim, Streams, Active uint32
	Eps                          float32
	HasRow                       uint32
	_                            [2]uint32
}

func (a AltUpArgs) check(kernel string) error {
	if a.Tokens <= 0 || a.Dim <= 0 {
		return fmt.Errorf("ops: %s: tokens %d and dim %d must be positive", kernel, a.Tokens, a.Dim)
	}
	if a.Streams < 2 || a.Streams > altUpMaxStreams {
		return fmt.Errorf("ops: %s: %d streams: want 2 to %d", kernel, a.Streams, altUpMaxStreams)
	}
	if a.Active < 0 || a.Active >= a.Streams {
		return fmt.Errorf("ops: %s: active stream %d is not one of the %d", kernel, a.Active, a.Streams)
	}
	if int64(a.Tokens) > math.MaxUint32/(int64(a.Dim)*int64(a.Streams)) {
		return fmt.Errorf("ops: %s: %d streams of %d x %d floats overflow the kernel's 32-bit index", kernel, a.Streams, a.Tokens, a.Dim)
	}
	if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
		return fmt.Errorf("ops: %s: eps %v must be finite and >= 0", kernel, a.Eps)
	}
	return nil
}

func (a AltUpArgs) params() altUpParams {
	return altUpParams{Tokens: uint32(a.Tokens), Dim: uint32(a.Dim), Streams: uint32(a.Streams), Active: uint32(a.Active), Eps: a.Eps}
}

// altUp checks the operands and dispatches an entry point of family (altup
// or altup_backward) over the tokens, its slots filled in order.
func altUp(c *gpu.Chain, family, kernel string, a AltUpArgs, hasRow bool, ops []operand, distinct [][2]*gpu.Buffer, slots ...*gpu.Buffer) error {
	if err := a.check(kernel); err != nil {
		return err
	}
	for _, o := range ops {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	for _, d := range distinct {
		if d[0] == d[1] {
			return fmt.Errorf("ops: %s: buffer %q is both an input and the output it is read beside", kernel, d[0].Label())
		}
	}
	p := a.params()
	if hasRow {
		p.HasRow = 1
	}
	return dispatch(c, gpu.Spec(family, kernel, "WG", normWG(a.Dim)), p, gpu.Grid(a.Tokens, 1), slots...)
}

// PackAltUp lays one layer's AltUp weights out as the kernels read them
// (shaders/altup_common.wgsl): the router norm's gain (Dim), the router
// (Streams rows of Dim), the prediction coefficients (Streams² rows of
// Streams), the correction coefficients (Streams rows of Streams), the
// correction scale (Dim). One buffer for the five leaves a dispatch's eight
// storage bindings to the activations.
func PackAltUp(norm, router, predict, correct, scale []float32) []float32 {
	out := make([]float32, 0, len(norm)+len(router)+len(predict)+len(correct)+len(scale))
	for _, v := range [][]float32{norm, router, predict, correct, scale} {
		out = append(out, v...)
	}
	return out
}

// packedFloats is PackAltUp's length for a.
func (a AltUpArgs) packedFloats() int {
	n := a.Streams
	return a.Dim*(2+n) + n*n*(n+1)
}

// AltUpPredict appends AltUp's prediction: for each token, with the
// modalities m_j = tanh(router_j · rmsnorm(s_active)·w / Dim) and c =
// coef·m (the prediction coefficients, Streams² rows of Streams),
//
//	pred_i = s_i + Σ_j c[i*Streams + j] · s_j
//
// and active = pred_Active (Tokens rows of Dim), transformers'
// Gemma3nTextAltUp.predict. wts are the layer's weights packed
// (PackAltUp). s and pred are Streams×Tokens×Dim and must differ; active
// must be neither.
func AltUpPredict(c *gpu.Chain, s, wts, pred, active *gpu.Buffer, a AltUpArgs) error {
	n, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	return altUp(c, "altup", "altup_predict", a, false,
		[]operand{{"s", s, n}, {"weights", wts, a.packedFloats()}, {"pred", pred, n}, {"active", active, rows}},
		[][2]*gpu.Buffer{{s, pred}, {s, active}, {pred, active}, {wts, pred}, {wts, active}},
		s, wts, pred, active, active)
}

// AltUpCorrect appends AltUp's correction: for each token, with m the
// modalities of x (the layer's output on the active prediction, Tokens
// rows of Dim) and c = coef·m + 1 (the correction coefficients, Streams
// rows of Streams),
//
//	s_i = pred_i + c_i · (x - pred_Active)
//	first = s_Active · scale
//
// transformers' Gemma3nTextAltUp.correct and scale_corrected_output (scale
// is correct_output_scale). wts are the layer's weights packed
// (PackAltUp). s, pred, x and first must all differ.
func AltUpCorrect(c *gpu.Chain, pred, x, wts, s, first *gpu.Buffer, a AltUpArgs) error {
	n, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	return altUp(c, "altup", "altup_correct", a, false,
		[]operand{{"pred", pred, n}, {"x", x, rows}, {"weights", wts, a.packedFloats()}, {"s", s, n}, {"first", first, rows}},
		[][2]*gpu.Buffer{{s, pred}, {s, x}, {s, first}, {pred, x}, {pred, first}, {x, first}, {wts, s}, {wts, first}},
		s, wts, pred, x, first)
}

// AltUpAddNormed appends s_k += rmsnorm(x)·w for every stream k but stream
// 0 (x Tokens rows of Dim, w Dim floats), in place: where Gemma 3n adds
// its per-layer embedding's output (corrected_predictions[1:] +=
// first_prediction). x must not be s.
func AltUpAddNormed(c *gpu.Chain, x, w, s *gpu.Buffer, a AltUpArgs) error {
	return altUp(c, "altup", "altup_add_normed", a, false,
		[]operand{{"x", x, a.Tokens * a.Dim}, {"weight", w, a.Dim}, {"s", s, a.Streams * a.Tokens * a.Dim}},
		[][2]*gpu.Buffer{{s, x}, {s, w}},
		s, w, s, x, x)
}

// AltUpRescale appends, in place, each token's row of every stream but
// stream 0 times rms(s_0) / sqrt(max(mean(s_k^2), 1e-5)): how Gemma 3n
// brings the streams it projects from the embedding to its scale.
func AltUpRescale(c *gpu.Chain, s *gpu.Buffer, a AltUpArgs) error {
	return altUp(c, "altup", "altup_rescale", a, false,
		[]operand{{"s", s, a.Streams * a.Tokens * a.Dim}}, nil,
		s, s, s, s, s)
}

// AltUpMerge appends out = the mean of the streams, every stream but
// stream 0 first rescaled as AltUpRescale does (Tokens rows of Dim): the
// end of Gemma 3n's stack, s_k for k > 0 being altup_unembd_proj's
// outputs. out must not be s.
func AltUpMerge(c *gpu.Chain, s, out *gpu.Buffer, a AltUpArgs) error {
	return altUp(c, "altup", "altup_merge", a, false,
		[]operand{{"s", s, a.Streams * a.Tokens * a.Dim}, {"out", out, a.Tokens * a.Dim}},
		[][2]*gpu.Buffer{{s, out}},
		s, s, s, out, out)
}

// gaussianTopKParams mirrors Params in shaders/gaussian_topk.wgsl.
type gaussianTopKParams struct {
	Rows, N, Stride uint32
	Mult            float32
}

// GaussianTopK appends Gemma 3n's activation sparsity over rows rows of n
// gate values, stride floats apart (2n for the fused [gate | up] rows), in
// place: g = max(g - (mean + mult·std), 0) with the row's mean and
// population standard deviation (transformers'
// Gemma3nTextMLP._gaussian_topk).
func GaussianTopK(c *gpu.Chain, g *gpu.Buffer, rows, n, stride int, mult float32) error {
	const kernel = "gaussian_topk"
	if err := checkGaussianTopK(kernel, rows, n, stride, mult); err != nil {
		return err
	}
	if err := needF32(kernel, "g", g, (rows-1)*stride+n); err != nil {
		return err
	}
	p := gaussianTopKParams{Rows: uint32(rows), N: uint32(n), Stride: uint32(stride), Mult: mult}
	return dispatch(c, gpu.Spec("gaussian_topk", kernel, "WG", normWG(n)), p, gpu.Grid(rows, 1), g, g, g)
}

// checkGaussianTopK checks the shape and multiplier of a gaussian_topk dispatch.
func checkGaussianTopK(kernel string, rows, n, stride int, mult float32) error {
	if rows <= 0 || n <= 0 || stride < n {
		return fmt.Errorf("ops: %s: %d rows of %d values %d apart: want positive counts and a stride of at least the row", kernel, rows, n, stride)
	}
	if int64(rows-1) > (math.MaxUint32-int64(n))/int64(stride) {
		return fmt.Errorf("ops: %s: %d rows %d apart overflow the kernel's 32-bit index", kernel, rows, stride)
	}
	if math.IsNaN(float64(mult)) || math.IsInf(float64(mult), 0) {
		return fmt.Errorf("ops: %s: std multiplier %v must be finite", kernel, mult)
	}
	return nil
}

// GaussianTopKBackward appends the gradient of GaussianTopK's input g for
// the gradient dy of its output, into dg (the gate values of each row; the
// rest of each stride is left as it is): with the mask of the kept values,
// S = Σ mask·dy, the row's mean μ and population std σ,
//
//	dg = mask·dy - S/n - S·mult·(g - μ)/(n·σ)
//
// g is GaussianTopK's input, before it; dg may be dy, not g.
func GaussianTopKBackward(c *gpu.Chain, g, dy, dg *gpu.Buffer, rows, n, stride int, mult float32) error {
	const kernel = "gaussian_topk_backward"
	if err := checkGaussianTopK(kernel, rows, n, stride, mult); err != nil {
		return err
	}
	size := (rows-1)*stride + n
	for _, o := range []operand{{"g", g, size}, {"dy", dy, size}, {"dg", dg, size}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if dg == g {
		return fmt.Errorf("ops: %s: dg %q must not be g", kernel, dg.Label())
	}
	p := gaussianTopKParams{Rows: uint32(rows), N: uint32(n), Stride: uint32(stride), Mult: mult}
	return dispatch(c, gpu.Spec("gaussian_topk", kernel, "WG", normWG(n)), p, gpu.Grid(rows, 1), g, dy, dg)
}

// AltUpPredictBackward appends the gradient ds of AltUpPredict's input s
// for the gradients dPred of its predictions and dActive of its active row
// (nil for none; the two add): with c = coef·m(s_active),
//
//	ds_j = dpred_j + Σ_i c[i*N + j]·dpred_i
//
// plus the router's path into the active stream (ref.AltUpPredictBackward).
// wts are the layer's weights packed (PackAltUp). ds must be none of the
// others.
func AltUpPredictBackward(c *gpu.Chain, s, wts, dPred, dActive, ds *gpu.Buffer, a AltUpArgs) error {
	n, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	ops := []operand{{"s", s, n}, {"weights", wts, a.packedFloats()}, {"dpred", dPred, n}, {"ds", ds, n}}
	row := dActive
	if row == nil {
		row = dPred
	} else {
		ops = append(ops, operand{"dactive", dActive, rows})
	}
	return altUp(c, "altup_backward", "altup_predict_backward", a, dActive != nil, ops,
		[][2]*gpu.Buffer{{ds, s}, {ds, dPred}, {ds, row}, {ds, wts}},
		s, wts, s, dPred, row, ds, ds)
}

// AltUpCorrectBackward appends the gradients dPred and dX of
// AltUpCorrect's pred and x for the gradients dOut of its streams and
// dFirst of its first prediction (nil for none): g_i = dout_i (+
// dfirst·scale on the active stream), dpred_i = g_i less Σ_i c_i·g_i on the
// active stream, dx = Σ_i c_i·g_i plus the router's path
// (ref.AltUpCorrectBackward). wts are the layer's weights packed
// (PackAltUp). dPred and dX must be none of the others.
func AltUpCorrectBackward(c *gpu.Chain, pred, x, wts, dOut, dFirst, dPred, dX *gpu.Buffer, a AltUpArgs) error {
	n, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	ops := []operand{{"pred", pred, n}, {"x", x, rows}, {"weights", wts, a.packedFloats()}, {"dout", dOut, n}, {"dpred", dPred, n}, {"dx", dX, rows}}
	row := dFirst
	if row == nil {
		row = dOut
	} else {
		ops = append(ops, operand{"dfirst", dFirst, rows})
	}
	var distinct [][2]*gpu.Buffer
	for _, out := range []*gpu.Buffer{dPred, dX} {
		for _, in := range []*gpu.Buffer{pred, x, wts, dOut, row} {
			distinct = append(distinct, [2]*gpu.Buffer{out, in})
		}
	}
	distinct = append(distinct, [2]*gpu.Buffer{dPred, dX})
	return altUp(c, "altup_backward", "altup_correct_backward", a, dFirst != nil, ops, distinct,
		pred, wts, x, dOut, row, dPred, dX)
}

// AltUpMergeBackward appends the gradient du of AltUpMerge's streams u for
// the gradient dOut of its output (ref.AltUpMergeBackward). du must be
// neither.
func AltUpMergeBackward(c *gpu.Chain, u, dOut, du *gpu.Buffer, a AltUpArgs) error {
	n, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	return altUp(c, "altup_backward", "altup_merge_backward", a, false,
		[]operand{{"u", u, n}, {"dout", dOut, rows}, {"du", du, n}},
		[][2]*gpu.Buffer{{du, u}, {du, dOut}},
		u, u, u, u, dOut, du, du)
}
