package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// PLEArgs shapes Gemma 4's per-layer-embedding gate for one layer: Tokens
// tokens of a model with Layers layers, each layer's per-layer input Dim
// floats wide (hidden_size_per_layer_input, 256 in E2B and E4B).
type PLEArgs struct {
	Tokens, Layers, Dim int
	// Layer is the decoder layer whose slice of proj and tok is used, in
	// [0, Layers).
	Layer int
	// Eps is per_layer_projection_norm's eps (rms_norm_eps).
	Eps float32
	// ProjScale multiplies proj before the norm: hidden_size^-0.5.
	ProjScale float32
	// InputScale multiplies the sum of the normalised projection and the
	// embedding: 2^-0.5.
	InputScale float32
}

// pleParams mirrors Params in shaders/ple.wgsl.
type pleParams struct {
	Tokens, Dim    uint32
	Stride, Offset uint32
	Eps            float32
	ProjScale      float32
	InputScale     float32
	_              uint32
}

// PLEGate appends, for each token t and j < Dim, with the layer's slice
// p_j = proj[t][Layer*Dim + j] * ProjScale,
//
//	out[t][j] = gelu(g[t][j]) * (p_j / sqrt(mean(p^2) + Eps) * w[j] + tok[t][Layer*Dim + j]) * InputScale
//
// Gemma 4's project_per_layer_inputs for one layer followed by the decoder
// layer's act_fn(per_layer_input_gate(h)) * per_layer_input, GELU being the
// tanh approximation GeGLU uses. g and out are [Tokens][Dim]; proj (the
// per_layer_model_projection of the input embeddings) and tok (the tokens'
// rows of embed_tokens_per_layer, already scaled by sqrt(Dim)) are
// [Tokens][Layers*Dim]; w (per_layer_projection_norm's weight, applied as
// is) is Dim floats. out may be g; it must not be proj, tok or w.
func PLEGate(c *gpu.Chain, g, proj, tok, w, out *gpu.Buffer, a PLEArgs) error {
	if g == nil {
		return fmt.Errorf("ops: ple_gate: the gate g is nil")
	}
	return ple(c, "ple_gate", g, proj, tok, w, out, a)
}

// PLEInput appends PLEGate's per-layer input alone, without the gate:
//
//	out[t][j] = (p_j / sqrt(mean(p^2) + Eps) * w[j] + tok[t][Layer*Dim + j]) * InputScale
//
// what the training step's backward of the gate multiplies by. out must not
// be proj, tok or w.
func PLEInput(c *gpu.Chain, proj, tok, w, out *gpu.Buffer, a PLEArgs) error {
	return ple(c, "ple_input", nil, proj, tok, w, out, a)
}

// ple checks and dispatches an entry of shaders/ple.wgsl; g nil is the
// gate ple_input does not read.
func ple(c *gpu.Chain, kernel string, g, proj, tok, w, out *gpu.Buffer, a PLEArgs) error {
	for _, s := range []struct {
		what string
		n    int
	}{{"tokens", a.Tokens}, {"layers", a.Layers}, {"dim", a.Dim}} {
		if s.n <= 0 {
			return fmt.Errorf("ops: %s: %s %d must be positive", kernel, s.what, s.n)
		}
	}
	if a.Layer < 0 || a.Layer >= a.Layers {
		return fmt.Errorf("ops: %s: layer %d out of range [0, %d)", kernel, a.Layer, a.Layers)
	}
	// Divisions rather than products, which could themselves overflow int.
	if int64(a.Layers) > math.MaxUint32/int64(a.Dim) || int64(a.Tokens) > math.MaxUint32/(int64(a.Layers)*int64(a.Dim)) {
		return fmt.Errorf("ops: %s: %d tokens x %d layers x %d floats overflow the kernel's 32-bit index", kernel, a.Tokens, a.Layers, a.Dim)
	}
	if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
		return fmt.Errorf("ops: %s: eps %v must be finite and >= 0", kernel, a.Eps)
	}
	// Positive, not merely finite: a zero scale is most likely a field left
	// unset, and would zero the projection or the whole gate without a trace.
	for _, s := range []struct {
		what string
		v    float32
	}{{"proj scale", a.ProjScale}, {"input scale", a.InputScale}} {
		if !(s.v > 0) || math.IsInf(float64(s.v), 0) {
			return fmt.Errorf("ops: %s: %s %v must be finite and > 0", kernel, s.what, s.v)
		}
	}
	stride := a.Layers * a.Dim
	n := a.Tokens * a.Dim
	if g == nil {
		g = out // fills the slot; ple_input does not read it
	}
	for _, o := range []operand{{"g", g, n}, {"proj", proj, a.Tokens * stride}, {"tok", tok, a.Tokens * stride}, {"weight", w, a.Dim}, {"out", out, n}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if out == proj || out == tok || out == w {
		return fmt.Errorf("ops: %s: out %q must not be proj, tok or the weight", kernel, out.Label())
	}
	params := pleParams{
		Tokens: uint32(a.Tokens), Dim: uint32(a.Dim),
		Stride: uint32(stride), Offset: uint32(a.Layer * a.Dim),
		Eps: a.Eps, ProjScale: a.ProjScale, InputScale: a.InputScale,
	}
	return dispatch(c, gpu.Spec("ple", kernel, "WG", normWG(a.Dim)), params, gpu.Grid(a.Tokens, 1), g, proj, tok, w, out)
}
