package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// MoERouteArgs shape a mixture-of-experts gate: Tokens rows of Experts
// router logits (the router projection's output), TopK experts chosen a
// token. Sigmoid gates each expert with sigmoid(logit) (DeepSeek-style
// routers) instead of a softmax over all of them (Qwen 3 MoE, gpt-oss,
// Mixtral, Gemma 4 26B-A4B); Renorm divides the chosen weights by their sum
// (norm_topk_prob; the softmax over the chosen logits that gpt-oss and
// Mixtral take gives the same weights).
type MoERouteArgs struct {
	Tokens, Experts, TopK int
	Sigmoid, Renorm       bool
	// Bias, MoERoute only: the router's bias, Experts floats added to
	// every token's logits as they are read (gpt-oss's; the logits
	// buffer keeps the unbiased projection). MoERouteBackward takes
	// biased logits and refuses it.
	Bias *gpu.Buffer
}

// check says what the router's kernels (forward and backward) cannot run.
func (a MoERouteArgs) check(kernel string) error {
	switch {
	case a.Tokens <= 0 || a.Experts <= 0:
		return fmt.Errorf("ops: %s: %d tokens of %d experts must be positive", kernel, a.Tokens, a.Experts)
	case a.Experts > moeMaxExperts:
		return fmt.Errorf("ops: %s: %d experts, at most %d", kernel, a.Experts, moeMaxExperts)
	case a.TopK <= 0 || a.TopK > min(a.Experts, moeMaxTopK):
		return fmt.Errorf("ops: %s: top-k %d must be 1 to the %d experts, at most %d", kernel, a.TopK, a.Experts, moeMaxTopK)
	case int64(a.Tokens)*int64(a.Experts) > math.MaxUint32:
		return fmt.Errorf("ops: %s: %d tokens of %d experts overflow the kernel's 32-bit index", kernel, a.Tokens, a.Experts)
	}
	return nil
}

// flags are a's bits of moeRouteParams.Flags, without the scale's.
func (a MoERouteArgs) flags() uint32 {
	var f uint32
	if a.Sigmoid {
		f |= moeSigmoid
	}
	if a.Renorm {
		f |= moeRenorm
	}
	return f
}

// moeRouteParams mirrors Params in shaders/moe_route.wgsl.
type moeRouteParams struct {
	Tokens, Experts, TopK, Flags uint32
}

// Flags of moeRouteParams, as FLAG_* in shaders/moe_common.wgsl (bias:
// shaders/moe_route.wgsl).
const (
	moeSigmoid = 1
	moeRenorm  = 2
	moeScale   = 4
	moeBias    = 8
)

// moeRouteWG is the router's workgroup size, one expert an invocation for
// the common 128-expert routers; moeMaxExperts the most experts it holds a
// token's scores and their keys for in workgroup memory (8 KiB), past
// the 256 of the largest routers in use (DeepSeek V3; Qwen 3 MoE, Gemma 4
// 26B-A4B and Llama 4 have 128, gpt-oss 32); moeMaxTopK the most it
// chooses (those models choose 4 to 8).
const (
	moeRouteWG    = 128
	moeMaxExperts = 1024
	moeMaxTopK    = 64
)

// MoERoute appends, for each token, the TopK experts with the largest gate
// values (ties to the lower index, largest first) to ids and their weights
// to weights, both [Tokens, TopK]: the gate value, over the chosen values'
// sum with a.Renorm, times scale[expert] when scale is not nil (Gemma 4's
// per-expert scale, Experts floats). ids holds u32 words.
func MoERoute(c *gpu.Chain, logits, scale, ids, weights *gpu.Buffer, a MoERouteArgs) error {
	const kernel = "moe_route"
	if err := a.check(kernel); err != nil {
		return err
	}
	n := a.Tokens * a.TopK
	for _, o := range []operand{{"logits", logits, a.Tokens * a.Experts}, {"ids", ids, n}, {"weights", weights, n}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if ids == weights || ids == logits || weights == logits {
		return fmt.Errorf("ops: %s: logits, ids and weights must be three buffers", kernel)
	}
	p := moeRouteParams{Tokens: uint32(a.Tokens), Experts: uint32(a.Experts), TopK: uint32(a.TopK), Flags: a.flags()}
	scale, err := expertVector(kernel, "scale", scale, a.Experts, moeScale, &p.Flags, logits, ids, weights)
	if err != nil {
		return err
	}
	bias, err := expertVector(kernel, "bias", a.Bias, a.Experts, moeBias, &p.Flags, logits, ids, weights)
	if err != nil {
		return err
	}
	spec := gpu.Spec("moe_route", kernel, "WG", moeRouteWG, "MAX_E", moeMaxExperts, "MAX_K", moeMaxTopK)
	return dispatch(c, spec, p, gpu.Grid(a.Tokens, 1), logits, scale, ids, weights, bias)
}

// expertVector checks v, an optional vector of one float an expert (a
// router's scale or bias), and returns the buffer its binding takes: v,
// with flag set in flags, or fill when v is nil (the kernel then reads
// nothing there). v must not be one of the kernel's outputs.
func expertVector(kernel, what string, v *gpu.Buffer, experts int, flag uint32, flags *uint32, fill *gpu.Buffer, outputs ...*gpu.Buffer) (*gpu.Buffer, error) {
	if v == nil {
		return fill, nil
	}
	if err := needF32(kernel, what, v, experts); err != nil {
		return nil, err
	}
	for _, o := range outputs {
		if v == o {
			return nil, fmt.Errorf("ops: %s: %s %q must not be an output", kernel, what, v.Label())
		}
	}
	*flags |= flag
	return v, nil
}

// moeRouterParams mirrors Params in shaders/moe_router.wgsl.
type moeRouterParams struct {
	K, Experts uint32
	Eps        float32
	Flags      uint32
}

// The normed router's workgroup: 256 invocations over x, 8 experts each
// (gpt-oss's 32 in 4 workgroups, Qwen 3's 128 in 16).
const (
	moeRouterWG   = 256
	moeRouterRows = 8
)

// HasMoERouterNormed reports whether MoERouterNormed takes a router of
// type t over rows of k floats: F32, as llama.cpp keeps routers, and k a
// multiple of 4.
func HasMoERouterNormed(t gguf.Type, k int) bool { return t == gguf.TypeF32 && k > 0 && k%4 == 0 }

// MoERouterNormed appends a decoded token's RMSNorm and router product in
// one dispatch: xn = x ⊙ gain / sqrt(mean(x²) + a.Eps) (1 + gain with
// a.OnePlus) and logits = W·xn, W the router (w.Rows experts of a.Dim
// columns, F32). It replaces RMSNorm then MatVec for one row (a.Rows 1);
// xn is written for the experts' products.
func MoERouterNormed(c *gpu.Chain, w *gpu.Tensor, x, gain, logits, xn *gpu.Buffer, a NormArgs) error {
	const kernel = "moe_router_normed"
	switch {
	case w == nil:
		return fmt.Errorf("ops: %s: router tensor is nil", kernel)
	case !HasMoERouterNormed(w.Type, w.Cols):
		return fmt.Errorf("ops: %s %q: %v router of %d columns; want F32 and a multiple of 4 (use RMSNorm then MatVec)", kernel, w.Name, w.Type, w.Cols)
	case a.Rows != 1 || a.Dim != w.Cols:
		return fmt.Errorf("ops: %s %q: norm shape %dx%d, want 1x%d (one token's row)", kernel, w.Name, a.Rows, a.Dim, w.Cols)
	case !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0):
		return fmt.Errorf("ops: %s %q: eps %v must be finite and >= 0", kernel, w.Name, a.Eps)
	case w.Rows > moeMaxExperts:
		return fmt.Errorf("ops: %s %q: %d experts, at most %d", kernel, w.Name, w.Rows, moeMaxExperts)
	case len(w.Chunks) != 1:
		return fmt.Errorf("ops: %s %q: a router in %d chunks", kernel, w.Name, len(w.Chunks))
	}
	for _, o := range []operand{{"x", x, a.Dim}, {"gain", gain, a.Dim}, {"logits", logits, w.Rows}, {"xn", xn, a.Dim}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if xn == x || xn == gain || xn == logits || logits == x || logits == gain {
		return fmt.Errorf("ops: %s %q: logits and xn must be two buffers apart from x and the gain", kernel, w.Name)
	}
	p := moeRouterParams{K: uint32(a.Dim), Experts: uint32(w.Rows), Eps: a.Eps}
	if a.OnePlus {
		p.Flags |= 2
	}
	spec := gpu.Spec("moe_router", kernel, "WG", moeRouterWG, "ROWS", moeRouterRows)
	return dispatch(c, spec, p, gpu.Grid(w.Rows, moeRouterRows), w.Chunks[0].Buf, x, gain, logits, xn)
}
