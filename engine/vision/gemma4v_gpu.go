package vision

import (
	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/gguf"
)

// gpuGemma4 is Gemma 4's tower on the device: the weights, the position
// tables as two lookup tables, and the per-image index buffers. The
// activations (GPUTower's) are sized for the budget's largest grid.
type gpuGemma4 struct {
	patch, proj, posX, posY *gpu.Tensor
	blocks                  []gpuBlock4
	std                     *gpu.Buffer // the negated biases, then the scales; nil without
	// Per image: each patch's column and row (the tables' ids), and the
	// 2D rotation's positions (ropePositions).
	cols, rows, ropePos *gpu.Buffer
	gate                *gpu.Buffer // the MLP's gate rows (up in GPUTower.ff)
}

// gpuBlock4 is one of Gemma 4's blocks on the device.
type gpuBlock4 struct {
	ln1, attnPost, ln2, ffnPost, qNorm, kNorm *gpu.Buffer
	q, k, v, o, gate, up, down                gpuLinear
}

// gpuLinear is a Linear on the device.
type gpuLinear struct {
	w       *gpu.Tensor
	in, out [2]float32
}

// maxPatches is the most patches an image of the budget has.
func (c Config) maxPatches() int { return c.MaxTokens * c.Merge * c.Merge }

// uploadGemma4 creates Gemma 4's weights and activations.
func (g *GPUTower) uploadGemma4() error {
	t, c := g.t, g.t.Config
	g4 := &gpuGemma4{}
	g.g4 = g4
	var err error
	tensor := func(w *Weight) *gpu.Tensor { return g.tensor(w, &err) }
	vector := func(w *Weight) *gpu.Buffer { return g.vector(w, &err) }
	linear := func(l Linear) gpuLinear { return gpuLinear{w: tensor(l.W), in: l.In, out: l.Out} }
	g4.patch, g4.proj = tensor(t.Patch), tensor(t.Projection)
	for i := range t.Blocks4 {
		b := &t.Blocks4[i]
		g4.blocks = append(g4.blocks, gpuBlock4{
			ln1: vector(b.LN1), attnPost: vector(b.AttnPost), ln2: vector(b.LN2), ffnPost: vector(b.FFNPost),
			qNorm: vector(b.QNorm), kNorm: vector(b.KNorm),
			q: linear(b.Q), k: linear(b.K), v: linear(b.V), o: linear(b.O),
			gate: linear(b.Gate), up: linear(b.Up), down: linear(b.Down),
		})
	}
	if err != nil {
		return err
	}
	pos, err := t.Position.F32()
	if err != nil {
		return err
	}
	s, d := c.PositionSize, c.Hidden
	for i, p := range []**gpu.Tensor{&g4.posX, &g4.posY} {
		if *p, err = g.dev.NewTensor(t.Position.Name, gguf.TypeF32, s, d, gpu.F32Bytes(pos[i*s*d:(i+1)*s*d]), 0); err != nil {
			return err
		}
		g.tensors = append(g.tensors, *p)
	}
	if t.StdBias != nil {
		bias, err := t.StdBias.F32()
		if err != nil {
			return err
		}
		scale, err := t.StdScale.F32()
		if err != nil {
			return err
		}
		shifts := make([]float32, 0, 2*d)
		for _, b := range bias {
			shifts = append(shifts, -b)
		}
		if g4.std = g.buffer("vision standardisation", append(shifts, scale...), &err); err != nil {
			return err
		}
	}
	n, tok := c.maxPatches(), c.MaxTokens
	return g.newBuffers([]activation{
		{&g.in, "vision patches", n * c.PatchWidth()}, {&g.x, "vision x", n * d}, {&g.h, "vision h", n * d},
		{&g.q, "vision q", n * d}, {&g.k, "vision k", n * d}, {&g.v, "vision v", n * d},
		{&g.att, "vision attention", n * d}, {&g.ff, "vision mlp", n * c.FF}, {&g4.gate, "vision mlp gate", n * c.FF},
		{&g.scratch, "vision attention scratch", int(max(4, ops.AttentionScratchBytes(g.attention(n))) / 4)},
		{&g.chw, "vision grid", n * d}, {&g.pooledCHW, "vision pooled grid", tok * d},
		{&g.pooled, "vision pooled", tok * d}, {&g.normed, "vision normed", tok * d},
		{&g.out, "vision tokens", tok * c.TextHidden},
		{&g4.cols, "vision columns", n}, {&g4.rows, "vision rows", n}, {&g4.ropePos, "vision rotary positions", 2 * n * c.Heads},
	})
}

// writeGemma4 writes an image's indices for grid gr.
func (g *GPUTower) writeGemma4(gr Grid) error {
	cols, rows := make([]uint32, gr.Patches()), make([]uint32, gr.Patches())
	for i := range cols {
		cols[i], rows[i] = uint32(i%gr.Cols), uint32(i/gr.Cols)
	}
	for _, w := range []struct {
		b *gpu.Buffer
		v []uint32
	}{{g.g4.cols, cols}, {g.g4.rows, rows}, {g.g4.ropePos, g.t.Config.ropePositions(gr)}} {
		if err := w.b.Write(0, gpu.U32Bytes(w.v)); err != nil {
			return err
		}
	}
	return nil
}

// recordGemma4 appends Gemma 4's tower for grid gr: hiddenGemma4CPU and
// projectGemma4CPU's steps.
func (g *GPUTower) recordGemma4(ch *gpu.Chain, gr Grid) (*gpu.Readback, error) {
	c, g4 := g.t.Config, g.g4
	n, d, hd, tok := gr.Patches(), c.Hidden, c.HeadDim(), c.TokensFor(gr)
	var err error
	try := func(e error) {
		if err == nil {
			err = e
		}
	}
	linear := func(l gpuLinear, x, y *gpu.Buffer) {
		if l.in != unbounded {
			try(ops.Clamp(ch, x, x, n*l.w.Cols, l.in[0], l.in[1]))
		}
		try(ops.MatMul(ch, l.w, x, y, n))
		if l.out != unbounded {
			try(ops.Clamp(ch, y, y, n*l.w.Rows, l.out[0], l.out[1]))
		}
	}
	norm := func(x, w, y *gpu.Buffer, rows, dim int) {
		try(ops.RMSNorm(ch, x, w, y, ops.NormArgs{Rows: rows, Dim: dim, Eps: c.Eps}))
	}
	// x = patches·Wᵀ + (x table[column] + y table[row])
	try(ops.MatMul(ch, g4.patch, g.in, g.x, n))
	try(ops.Embed(ch, g4.posX, g4.cols, n, g.h))
	try(ops.Embed(ch, g4.posY, g4.rows, n, g.q))
	try(ops.AddInPlace(ch, g.h, g.q, n*d))
	try(ops.AddInPlace(ch, g.x, g.h, n*d))
	r := c.rope2D(gr)
	rope := ops.RoPEArgs{Tokens: r.Tokens, Heads: r.Heads, HeadDim: r.HeadDim, NeoX: true, Base: gemma4Theta}
	att := g.attention(n)
	for i := range g4.blocks {
		b := &g4.blocks[i]
		// A clamp writes its input in place: h feeds q, k and v, so each
		// product reads its own copy when the bounds differ.
		norm(g.x, b.ln1, g.h, n, d)
		for _, p := range []struct {
			l    gpuLinear
			out  *gpu.Buffer
			gain *gpu.Buffer
		}{{b.q, g.q, b.qNorm}, {b.k, g.k, b.kNorm}, {b.v, g.v, nil}} {
			in := g.h
			if p.l.in != unbounded {
				try(ops.CopyF32(ch, g.h, 0, g.att, 0, n*d))
				in = g.att
			}
			linear(p.l, in, p.out)
			norm(p.out, p.gain, p.out, n*c.Heads, hd)
		}
		try(ops.RoPE(ch, g.q, nil, g4.ropePos, rope))
		try(ops.RoPE(ch, g.k, nil, g4.ropePos, rope))
		try(ops.AttentionWith(ch, g.q, g.k, g.v, g.scratch, g.att, att, ops.AttentionOptions{Tile: g.attTile}))
		linear(b.o, g.att, g.h)
		try(ops.RMSNormAdd(ch, g.h, b.attnPost, g.x, ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}))
		norm(g.x, b.ln2, g.h, n, d)
		if b.gate.in != unbounded {
			try(ops.CopyF32(ch, g.h, 0, g.att, 0, n*d))
			linear(b.gate, g.att, g4.gate)
		} else {
			linear(b.gate, g.h, g4.gate)
		}
		linear(b.up, g.h, g.ff)
		try(ops.GeGLU(ch, g4.gate, g.ff, g.ff, n*c.FF))
		linear(b.down, g.ff, g.h)
		try(ops.RMSNormAdd(ch, g.h, b.ffnPost, g.x, ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}))
	}
	try(ops.Transpose(ch, g.x, g.chw, n, d))
	try(ops.AvgPool2D(ch, g.chw, g.pooledCHW, d, gr.Rows, gr.Cols, c.Merge, c.Merge))
	try(ops.Transpose(ch, g.pooledCHW, g.pooled, d, tok))
	try(ops.Scale(ch, g.pooled, g.pooled, tok*d, c.poolScale()))
	if g4.std != nil {
		try(ops.ShiftScale(ch, g.pooled, g4.std, g.pooled, tok, d))
	}
	norm(g.pooled, nil, g.normed, tok, d)
	try(ops.MatMul(ch, g4.proj, g.normed, g.out, tok))
	if err != nil {
		return nil, err
	}
	return ch.ReadBack(g.out, 0, uint64(tok*c.TextHidden)*4)
}
