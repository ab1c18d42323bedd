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

// altUpParams mirrors Params in shaders/altup.wgsl.
type altUpParams struct {
	Tokens, Dim, Streams, Active uint32
	Eps                          float32
	_                            [3]uint32
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

// altUp checks the operands and dispatches one of altup.wgsl's entry
// points over the tokens, its nine slots filled in order.
func altUp(c *gpu.Chain, kernel string, a AltUpArgs, ops []operand, distinct [][2]*gpu.Buffer, slots [8]*gpu.Buffer) error {
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
	return dispatch(c, gpu.Spec("altup", kernel, "WG", normWG(a.Dim)), a.params(), gpu.Grid(a.Tokens, 1), slots[:]...)
}

// AltUpPredict appends AltUp's prediction: for each token, with the
// modalities m_j = tanh(router_j · rmsnorm(s_active)·w / Dim) and c =
// coef·m (coef Streams² rows of Streams, router Streams rows of Dim, w Dim),
//
//	pred_i = s_i + Σ_j c[i*Streams + j] · s_j
//
// and active = pred_Active (Tokens rows of Dim), transformers'
// Gemma3nTextAltUp.predict. s and pred are Streams×Tokens×Dim and must
// differ; active must be neither.
func AltUpPredict(c *gpu.Chain, s, w, router, coef, pred, active *gpu.Buffer, a AltUpArgs) error {
	n, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	return altUp(c, "altup_predict", a,
		[]operand{{"s", s, n}, {"weight", w, a.Dim}, {"router", router, a.Streams * a.Dim}, {"coef", coef, a.Streams * a.Streams * a.Streams}, {"pred", pred, n}, {"active", active, rows}},
		[][2]*gpu.Buffer{{s, pred}, {s, active}, {pred, active}},
		[8]*gpu.Buffer{s, w, router, coef, pred, active, w, active})
}

// AltUpCorrect appends AltUp's correction: for each token, with m the
// modalities of x (the layer's output on the active prediction, Tokens
// rows of Dim) and c = coef·m + 1 (coef Streams rows of Streams),
//
//	s_i = pred_i + c_i · (x - pred_Active)
//	first = s_Active · scale
//
// transformers' Gemma3nTextAltUp.correct and scale_corrected_output
// (scale is correct_output_scale, Dim floats). s, pred, x and first must
// all differ.
func AltUpCorrect(c *gpu.Chain, pred, x, w, router, coef, scale, s, first *gpu.Buffer, a AltUpArgs) error {
	n, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	return altUp(c, "altup_correct", a,
		[]operand{{"pred", pred, n}, {"x", x, rows}, {"weight", w, a.Dim}, {"router", router, a.Streams * a.Dim}, {"coef", coef, a.Streams * a.Streams}, {"scale", scale, a.Dim}, {"s", s, n}, {"first", first, rows}},
		[][2]*gpu.Buffer{{s, pred}, {s, x}, {s, first}, {pred, x}, {pred, first}, {x, first}},
		[8]*gpu.Buffer{s, w, router, coef, pred, x, scale, first})
}

// AltUpAddNormed appends s_k += rmsnorm(x)·w for every stream k but stream
// 0 (x Tokens rows of Dim, w Dim floats), in place: where Gemma 3n adds
// its per-layer embedding's output (corrected_predictions[1:] +=
// first_prediction). x must not be s.
func AltUpAddNormed(c *gpu.Chain, x, w, s *gpu.Buffer, a AltUpArgs) error {
	return altUp(c, "altup_add_normed", a,
		[]operand{{"x", x, a.Tokens * a.Dim}, {"weight", w, a.Dim}, {"s", s, a.Streams * a.Tokens * a.Dim}},
		[][2]*gpu.Buffer{{s, x}},
		[8]*gpu.Buffer{s, w, w, w, s, x, w, x})
}

// AltUpRescale appends, in place, each token's row of every stream but
// stream 0 times rms(s_0) / sqrt(max(mean(s_k^2), 1e-5)): how Gemma 3n
// brings the streams it projects from the embedding to its scale.
func AltUpRescale(c *gpu.Chain, s *gpu.Buffer, a AltUpArgs) error {
	return altUp(c, "altup_rescale", a,
		[]operand{{"s", s, a.Streams * a.Tokens * a.Dim}}, nil,
		[8]*gpu.Buffer{s, s, s, s, s, s, s, s})
}

// AltUpMerge appends out = the mean of the streams, every stream but
// stream 0 first rescaled as AltUpRescale does (Tokens rows of Dim): the
// end of Gemma 3n's stack, s_k for k > 0 being altup_unembd_proj's
// outputs. out must not be s.
func AltUpMerge(c *gpu.Chain, s, out *gpu.Buffer, a AltUpArgs) error {
	return altUp(c, "altup_merge", a,
		[]operand{{"s", s, a.Streams * a.Tokens * a.Dim}, {"out", out, a.Tokens * a.Dim}},
		[][2]*gpu.Buffer{{s, out}},
		[8]*gpu.Buffer{s, s, s, s, s, out, s, out})
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
	if rows <= 0 || n <= 0 || stride < n {
		return fmt.Errorf("ops: %s: %d rows of %d values %d apart: want positive counts and a stride of at least the row", kernel, rows, n, stride)
	}
	if int64(rows-1) > (math.MaxUint32-int64(n))/int64(stride) {
		return fmt.Errorf("ops: %s: %d rows %d apart overflow the kernel's 32-bit index", kernel, rows, stride)
	}
	if math.IsNaN(float64(mult)) || math.IsInf(float64(mult), 0) {
		return fmt.Errorf("ops: %s: std multiplier %v must be finite", kernel, mult)
	}
	if err := needF32(kernel, "g", g, (rows-1)*stride+n); err != nil {
		return err
	}
	p := gaussianTopKParams{Rows: uint32(rows), N: uint32(n), Stride: uint32(stride), Mult: mult}
	return dispatch(c, gpu.Spec("gaussian_topk", kernel, "WG", normWG(n)), p, gpu.Grid(rows, 1), g)
}
