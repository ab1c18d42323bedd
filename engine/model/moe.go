package model

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// A mixture-of-experts feed-forward (Config.MoE: Qwen 3 MoE, gpt-oss,
// Gemma 4 26B-A4B; docs/moe.md), as llama.cpp's build_moe_ffn runs it: the
// router's scores of the normed stream pick each token's Used experts and
// their weights (softmax, top-k, renormalised); each chosen expert runs a
// GLU feed-forward on the token (its gate and up rows of the stacked
// ffn_gate_exps/ffn_up_exps, act(gate)·up, its rows of ffn_down_exps), and
// the token's output is the experts' outputs summed with the weights. A
// (token, expert) pair is a slot: slot t·Used + k is token t's k-th
// choice. gpt-oss adds biases (the router's, each expert's) and its own
// gated unit; Gemma 4 runs the experts beside its dense feed-forward.

// MoEActivations are what a mixture of experts computed for a batch: the
// router's scores (n rows of Experts), each slot's expert and weight, the
// slots' gate, up and activated rows (FF each) and their outputs (Hidden
// each), before the weighted sum.
type MoEActivations struct {
	Logits         []float32
	IDs            []uint32
	Weights        []float32
	Gate, Up, H, Y []float32
	// Gemma 4's (nil otherwise): the experts' input (their pre-norm of the
	// stream), the router's input, the dense feed-forward's output before
	// its norm and the experts' weighted sum before theirs.
	In, RouterIn, Dense, Sum []float32
}

// moeCPU is layer l's mixture of experts on the n rows of xn (the
// experts' input) routed by routerIn (the router's input: xn itself, or
// Gemma 4's own norm of the stream), the tokens grouped by
// expert so that each expert's weights are dequantized once per batch; it
// returns the weighted sums (n rows of Hidden).
func (m *Model) moeCPU(l *MoELayer, xn, routerIn []float32, n int, acts *MoEActivations) ([]float32, error) {
	c := &m.Config
	e, d := c.MoE, c.Hidden
	logits, err := matmul(l.Router, routerIn, n)
	if err != nil {
		return nil, err
	}
	bias := func(w *Weight) []float32 {
		if w == nil || err != nil {
			return nil
		}
		var v []float32
		v, err = w.F32()
		return v
	}
	rb, gb, ub, db := bias(l.RouterBias), bias(l.GateBias), bias(l.UpBias), bias(l.DownBias)
	if err != nil {
		return nil, err
	}
	if rb != nil {
		ref.AddBias(logits, rb)
	}
	var scale []float32
	if l.DownScale != nil {
		if scale, err = l.DownScale.F32(); err != nil {
			return nil, err
		}
	}
	ids, weights := ref.MoERoute(logits, scale, ref.MoERouteArgs{Tokens: n, Experts: e.Experts, TopK: e.Used, Sigmoid: e.Sigmoid, Renorm: e.Renorm})
	slots := n * e.Used
	// One group a chosen expert: its slots, in slot order.
	order, groups := ref.MoEGroup(ids, e.Experts, slots)
	// product puts W_e · in[row(s)] into out's row s for every slot s of
	// each group, in's rows of w's columns.
	product := func(w *Weight, in []float32, row func(s uint32) int, out []float32) error {
		cols, rows := w.Cols, w.Rows/w.Stack
		for _, g := range groups {
			sl := order[g[1] : g[1]+g[2]]
			x := make([]float32, 0, len(sl)*cols)
			for _, s := range sl {
				r := row(s)
				x = append(x, in[r*cols:(r+1)*cols]...)
			}
			y, err := matmul(w.Matrix(int(g[0])), x, len(sl))
			if err != nil {
				return err
			}
			for j, s := range sl {
				copy(out[int(s)*rows:], y[j*rows:(j+1)*rows])
			}
		}
		return nil
	}
	token := func(s uint32) int { return int(s) / e.Used }
	ff := e.FF
	gate, up := make([]float32, slots*ff), make([]float32, slots*ff)
	if l.GateUp != nil {
		gu := make([]float32, 2*slots*ff)
		if err := product(l.GateUp, xn, token, gu); err != nil {
			return nil, err
		}
		for s := range slots {
			copy(gate[s*ff:(s+1)*ff], gu[2*s*ff:])
			copy(up[s*ff:(s+1)*ff], gu[(2*s+1)*ff:])
		}
	} else {
		if err := product(l.Gate, xn, token, gate); err != nil {
			return nil, err
		}
		if err := product(l.Up, xn, token, up); err != nil {
			return nil, err
		}
	}
	if gb != nil {
		ref.MoEAddBias(gate, gb, ids, ff, ff, 0)
		ref.MoEAddBias(up, ub, ids, ff, ff, 0)
	}
	var h []float32
	switch {
	case e.OAI:
		h = ref.SwiGLUOAI(gate, up)
	case c.GELU:
		h = ref.GeGLU(gate, up)
	default:
		h = ref.SwiGLU(gate, up)
	}
	y := make([]float32, slots*d)
	if err := product(l.Down, h, func(s uint32) int { return int(s) }, y); err != nil {
		return nil, err
	}
	if db != nil {
		ref.MoEAddBias(y, db, ids, d, d, 0)
	}
	if acts != nil {
		*acts = MoEActivations{Logits: logits, IDs: ids, Weights: weights, Gate: gate, Up: up, H: h, Y: y}
	}
	return ref.MoECombine(y, weights, n, e.Used, d, e.Scale), nil
}

// RouterGain is Gemma 4's router gain, ffn_gate_inp.scale times
// 1/sqrt(Hidden), rounded to f32 once: its router reads the stream
// RMS-normalised and multiplied by both, which both backends do as one
// norm with this gain.
func RouterGain(l *MoELayer, hidden int) ([]float32, error) {
	g, err := l.RouterScale.F32()
	if err != nil {
		return nil, err
	}
	r := 1 / math.Sqrt(float64(hidden))
	for i, v := range g {
		g[i] = float32(float64(v) * r)
	}
	return g, nil
}

// denseMoECPU is Gemma 4's feed-forward once the dense part has given f1
// (Down's output, before its norm): the experts on their own pre-norm of
// the stream x, routed by the router's norm of it, and the sum of the two
// outputs, each normed: norm1(f1) + norm2(experts).
func (m *Model) denseMoECPU(l *MoELayer, x, f1 []float32, n int, acts *MoEActivations) ([]float32, error) {
	c := &m.Config
	d := c.Hidden
	norm := func(x []float32, w *Weight) ([]float32, error) {
		var g []float32
		if w != nil {
			var err error
			if g, err = w.F32(); err != nil {
				return nil, err
			}
		}
		return ref.RMSNorm(x, g, ref.NormArgs{Rows: n, Dim: d, Eps: c.Eps}), nil
	}
	xn, err := norm(x, l.PreNorm)
	if err != nil {
		return nil, err
	}
	gain, err := RouterGain(l, d)
	if err != nil {
		return nil, err
	}
	routerIn := ref.RMSNorm(x, gain, ref.NormArgs{Rows: n, Dim: d, Eps: c.Eps})
	f2, err := m.moeCPU(l, xn, routerIn, n, acts)
	if err != nil {
		return nil, err
	}
	if acts != nil {
		acts.In, acts.RouterIn, acts.Dense, acts.Sum = xn, routerIn, f1, f2
	}
	n1, err := norm(f1, l.PostNorm1)
	if err != nil {
		return nil, err
	}
	n2, err := norm(f2, l.PostNorm2)
	if err != nil {
		return nil, err
	}
	return ref.Add(n1, n2), nil
}

// GPUMoE is a layer's mixture of experts on the device: the router and the
// stacked experts (gpu.Tensor.Stack), gate and up as one GateUp (each
// expert's gate rows, then its up rows: fused in the file, or merged at
// upload when they share a type) or apart; Gemma 4's router gain
// (routerGain), per-expert output scale and norms, nil for other
// families.
type GPUMoE struct {
	Router, GateUp, Gate, Up, Down *gpu.Tensor
	RouterGain, DownScale          *gpu.Buffer
	PreNorm, PostNorm1, PostNorm2  *gpu.Buffer
	// gpt-oss's biases: the router's, the experts' gate and up as GateUp's
	// rows are (GateUpBias, 2·FF an expert) or apart, and down's.
	RouterBias, GateUpBias, GateBias, UpBias, DownBias *gpu.Buffer
}

// GPUMoEActivations are a batch's mixture-of-experts buffers: the router's
// scores (n rows of Experts), the slots' experts (u32) and weights, the
// grouping of the slots (ops.MoEGroupWords), the slots' gate and up side by
// side (2·FF a slot), their activated rows (FF) and outputs (Hidden); for
// Gemma 4 also (n rows of Hidden each) the router's input, the experts'
// input, their weighted sum, and the sum of the dense feed-forward's and
// the experts' normed outputs.
type GPUMoEActivations struct {
	Logits, IDs, Weights, Groups *gpu.Buffer
	GateUp, H, Y                 *gpu.Buffer
	RouterIn, In, Sum, Dense     *gpu.Buffer
}

// moeSizes are the floats (or words) of each GPUMoEActivations buffer for a
// batch of n tokens of c.
func moeSizes(c *Config, n int) (logits, slots, groups, gateUp, h, y int) {
	e := c.MoE
	s := n * e.Used
	return n * e.Experts, s, ops.MoEGroupWords(s, e.Experts), 2 * s * e.FF, s * e.FF, s * c.Hidden
}

// NewGPUMoEActivations allocates a batch of n tokens' buffers with alloc.
func NewGPUMoEActivations(c *Config, n int, alloc func(dst **gpu.Buffer, label string, floats int)) *GPUMoEActivations {
	a := &GPUMoEActivations{}
	logits, slots, groups, gateUp, h, y := moeSizes(c, n)
	alloc(&a.Logits, "moe.logits", logits)
	alloc(&a.IDs, "moe.ids", slots)
	alloc(&a.Weights, "moe.weights", slots)
	alloc(&a.Groups, "moe.groups", groups)
	alloc(&a.GateUp, "moe.gate_up", gateUp)
	alloc(&a.H, "moe.h", h)
	alloc(&a.Y, "moe.y", y)
	if c.MoE.Dense {
		alloc(&a.RouterIn, "moe.router_in", n*c.Hidden)
		alloc(&a.In, "moe.in", n*c.Hidden)
		alloc(&a.Sum, "moe.sum", n*c.Hidden)
		alloc(&a.Dense, "moe.dense", n*c.Hidden)
	}
	return a
}

// recordMoE appends layer i's mixture of experts on xn (n rows, the
// experts' input) routed by routerIn (the router's input), the weighted
// sum added to out (accumulate: the stream) or written there. A decoded
// token whose experts are quantized multiplies only its chosen experts'
// rows, the GLU fused into down's product (ops.MoEMatVec); a batch groups
// its slots by expert first (ops.MoEGroup, ops.MoEMatMul), as does a pass
// that keeps every intermediate (keep: the backward reads the groups and
// the activated rows H). normOf, when not nil, is the stream whose
// feed-forward norm xn (and routerIn, the same buffer) still is to be:
// the norm is then computed with the router's product
// (ops.MoERouterNormed, a decoded token's).
func (w *GPUWeights) recordMoE(ch *gpu.Chain, i int, a *GPUMoEActivations, xn, routerIn, out, normOf *gpu.Buffer, accumulate bool, n int, keep bool, try func(error)) {
	c, l := w.c, &w.Layers[i]
	e, g := c.MoE, l.MoE
	if a == nil {
		try(fmt.Errorf("model: layer %d is a mixture of experts and the pass has no buffers for it", i))
		return
	}
	slots, ff := n*e.Used, e.FF
	if normOf != nil {
		try(ops.MoERouterNormed(ch, g.Router, normOf, l.FFNNorm, a.Logits, xn, ops.NormArgs{Rows: 1, Dim: c.Hidden, Eps: c.Eps}))
	} else {
		try(ops.MatMul(ch, g.Router, routerIn, a.Logits, n))
	}
	route := ops.MoERouteArgs{Tokens: n, Experts: e.Experts, TopK: e.Used, Sigmoid: e.Sigmoid, Renorm: e.Renorm}
	if g.RouterBias != nil {
		if keep {
			// The backward reads the biased logits.
			try(ops.AddBias(ch, a.Logits, g.RouterBias, n, e.Experts))
		} else {
			route.Bias = g.RouterBias
		}
	}
	// biases adds the experts' gate and up biases to each slot's
	// [gate | up] row.
	biases := func() {
		switch {
		case g.GateUpBias != nil:
			try(ops.MoEAddBias(ch, g.GateUpBias, a.IDs, a.GateUp, slots, e.Experts, 2*ff, 0, 0))
		case g.GateBias != nil:
			try(ops.MoEAddBias(ch, g.GateBias, a.IDs, a.GateUp, slots, e.Experts, ff, 2*ff, 0))
			try(ops.MoEAddBias(ch, g.UpBias, a.IDs, a.GateUp, slots, e.Experts, ff, 2*ff, ff))
		}
	}
	try(ops.MoERoute(ch, a.Logits, g.DownScale, a.IDs, a.Weights, route))
	// Each slot's [gate | up] row, 2·FF floats: one product of the merged
	// experts, or gate's and up's side by side; bias is each one's experts'
	// biases, which a decoded token's products add as they store.
	type product struct {
		t    *gpu.Tensor
		a    ops.MoEArgs
		bias *gpu.Buffer
	}
	first := []product{{g.GateUp, ops.MoEArgs{Slots: slots, XDiv: e.Used}, g.GateUpBias}}
	if g.GateUp == nil {
		o := ops.MatmulOptions{YStride: 2 * ff}
		first = []product{{g.Gate, ops.MoEArgs{Slots: slots, XDiv: e.Used, Options: o}, g.GateBias}}
		o.YOffset = ff
		first = append(first, product{g.Up, ops.MoEArgs{Slots: slots, XDiv: e.Used, Options: o}, g.UpBias})
	}
	down := ops.MoEArgs{Slots: slots, XDiv: 1}
	vec := n == 1 && !keep && ops.HasMoEMatVec(g.Down.Type)
	for _, p := range first {
		vec = vec && ops.HasMoEMatVec(p.t.Type)
	}
	if vec {
		for _, p := range first {
			p.a.Bias = p.bias
			try(ops.MoEMatVec(ch, p.t, xn, a.IDs, a.GateUp, p.a))
		}
		down.GLU = &ops.GLUArgs{FF: ff, GELU: c.GELU && !e.OAI, OAI: e.OAI}
		down.Bias = g.DownBias
		try(ops.MoEMatVec(ch, g.Down, a.GateUp, a.IDs, a.Y, down))
	} else {
		try(ops.MoEGroup(ch, a.IDs, a.Groups, slots, e.Experts))
		for _, p := range first {
			try(ops.MoEMatMul(ch, p.t, xn, a.Groups, a.GateUp, p.a))
		}
		biases()
		switch {
		case e.OAI:
			try(ops.SwiGLUOAIFused(ch, a.GateUp, a.H, slots, ff))
		case c.GELU:
			try(ops.GeGLUFused(ch, a.GateUp, a.H, slots, ff))
		default:
			try(ops.SwiGLUFused(ch, a.GateUp, a.H, slots, ff))
		}
		try(ops.MoEMatMul(ch, g.Down, a.H, a.Groups, a.Y, down))
		if g.DownBias != nil {
			try(ops.MoEAddBias(ch, g.DownBias, a.IDs, a.Y, slots, e.Experts, c.Hidden, 0, 0))
		}
	}
	try(ops.MoECombine(ch, a.Y, a.Weights, out, ops.MoECombineArgs{Tokens: n, Used: e.Used, Dim: c.Hidden, Scale: e.Scale, Accumulate: accumulate}))
}

// recordDenseMoE appends Gemma 4's experts beside the dense feed-forward,
// whose output f1 (n rows) is ready: f1's norm into a.Dense, the experts on
// their pre-norm of the stream x (a.In) routed by the router's norm of it
// (a.RouterIn), their sum (a.Sum) normed and added to a.Dense, which it
// returns: the sum the feed-forward's post-norm takes. Every intermediate
// stays in its buffer for a backward.
func (w *GPUWeights) recordDenseMoE(ch *gpu.Chain, i int, a *GPUMoEActivations, x, f1 *gpu.Buffer, n int, keep bool, try func(error)) *gpu.Buffer {
	c, g := w.c, w.Layers[i].MoE
	if a == nil || a.Dense == nil {
		try(fmt.Errorf("model: layer %d has experts beside its feed-forward and the pass has no buffers for them", i))
		return f1
	}
	na := ops.NormArgs{Rows: n, Dim: c.Hidden, Eps: c.Eps}
	try(ops.RMSNorm(ch, f1, g.PostNorm1, a.Dense, na))
	try(ops.RMSNorm(ch, x, g.PreNorm, a.In, na))
	try(ops.RMSNorm(ch, x, g.RouterGain, a.RouterIn, na))
	w.recordMoE(ch, i, a, a.In, a.RouterIn, a.Sum, nil, false, n, keep, try)
	try(ops.RMSNormAdd(ch, a.Sum, g.PostNorm2, a.Dense, na))
	return a.Dense
}
