package vision

import (
	"errors"
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/gguf"
)

// GPUTower is a Tower's weights on the device, uploaded as the file stores
// them, with the activations of one image. Encode runs an image as one
// chain and one submit. Like a model runner, it is not safe for concurrent
// use: the engine goroutine owns it.
type GPUTower struct {
	t   *Tower
	dev *gpu.Device

	patch, proj *gpu.Tensor
	patchBias   *gpu.Buffer
	position    *gpu.Buffer
	blocks      []gpuBlock
	postLN      [2]*gpu.Buffer
	softNorm    *gpu.Buffer

	// Activations: the patch rows in, the residual stream x, a normed or
	// projected copy h, q, k, v and attention's output, the MLP's hidden
	// rows, attention's scratch, the pool's channels-first buffers, the
	// pooled and normed tokens, and the projected tokens out.
	in, x, h, q, k, v, att, ff, scratch *gpu.Buffer
	chw, pooledCHW, pooled, normed, out *gpu.Buffer

	g4 *gpuGemma4 // Gemma 4's weights, instead of the fields above's

	// attTile is the attention's tile; zero is the dispatcher's choice
	// (BenchmarkGPUTower compares others).
	attTile ops.AttentionTile

	tensors []*gpu.Tensor
	buffers []*gpu.Buffer
}

// gpuBlock is one of Gemma 3's encoder blocks on the device.
type gpuBlock struct {
	ln1, ln2            [2]*gpu.Buffer // gain, bias
	q, k, v, o, up, dn  *gpu.Tensor
	qb, kb, vb, ob, upb *gpu.Buffer
	dnb                 *gpu.Buffer
}

// NewGPUTower uploads t to dev. Release it before closing t.
func NewGPUTower(dev *gpu.Device, t *Tower) (*GPUTower, error) {
	g := &GPUTower{t: t, dev: dev}
	upload := g.upload
	if t.Config.Projector == projGemma4 {
		upload = g.uploadGemma4
	}
	if err := upload(); err != nil {
		g.Release()
		return nil, fmt.Errorf("vision: %s: %w", t.Path, err)
	}
	return g, nil
}

// upload creates Gemma 3's weights and activations.
func (g *GPUTower) upload() error {
	t, c := g.t, g.t.Config
	var err error
	tensor := func(w *Weight) *gpu.Tensor { return g.tensor(w, &err) }
	vector := func(w *Weight) *gpu.Buffer { return g.vector(w, &err) }
	g.patch, g.patchBias, g.position = tensor(t.Patch), vector(t.PatchBias), vector(t.Position)
	for i := range t.Blocks {
		b := &t.Blocks[i]
		g.blocks = append(g.blocks, gpuBlock{
			ln1: [2]*gpu.Buffer{vector(b.LN1), vector(b.LN1Bias)}, ln2: [2]*gpu.Buffer{vector(b.LN2), vector(b.LN2Bias)},
			q: tensor(b.Q), k: tensor(b.K), v: tensor(b.V), o: tensor(b.O), up: tensor(b.Up), dn: tensor(b.Down),
			qb: vector(b.QBias), kb: vector(b.KBias), vb: vector(b.VBias), ob: vector(b.OBias),
			upb: vector(b.UpBias), dnb: vector(b.DownBias),
		})
	}
	g.postLN = [2]*gpu.Buffer{vector(t.PostLN), vector(t.PostLNBias)}
	g.softNorm = vector(t.SoftNorm)
	if err != nil {
		return err
	}
	// The projection goes up as rows of inputs, the layout of the products.
	rows, err := t.ProjectionRows()
	if err != nil {
		return err
	}
	if g.proj, err = g.dev.NewTensor(t.Projection.Name, gguf.TypeF32, c.TextHidden, c.Hidden, gpu.F32Bytes(rows), 0); err != nil {
		return err
	}
	g.tensors = append(g.tensors, g.proj)

	n, d, tok := c.Patches(), c.Hidden, c.Tokens()
	return g.newBuffers([]activation{
		{&g.in, "vision patches", n * c.PatchWidth()}, {&g.x, "vision x", n * d}, {&g.h, "vision h", n * d},
		{&g.q, "vision q", n * d}, {&g.k, "vision k", n * d}, {&g.v, "vision v", n * d},
		{&g.att, "vision attention", n * d}, {&g.ff, "vision mlp", n * c.FF},
		{&g.scratch, "vision attention scratch", int(max(4, ops.AttentionScratchBytes(g.attention(n))) / 4)},
		{&g.chw, "vision grid", n * d}, {&g.pooledCHW, "vision pooled grid", tok * d},
		{&g.pooled, "vision pooled", tok * d}, {&g.normed, "vision normed", tok * d},
		{&g.out, "vision tokens", tok * c.TextHidden},
	})
}

// activation is a buffer of floats newBuffers creates.
type activation struct {
	p      **gpu.Buffer
	label  string
	floats int
}

// newBuffers creates each activation, which the tower releases.
func (g *GPUTower) newBuffers(as []activation) error {
	for _, b := range as {
		var err error
		if *b.p, err = g.dev.NewBuffer(b.label, uint64(b.floats)*4); err != nil {
			return err
		}
		g.buffers = append(g.buffers, *b.p)
	}
	return nil
}

// tensor uploads w as it is stored, unless *err is set.
func (g *GPUTower) tensor(w *Weight, err *error) *gpu.Tensor {
	if *err != nil {
		return nil
	}
	t, e := g.dev.NewTensor(w.Name, w.Type, w.Rows, w.Cols, w.Data, 0)
	if e != nil {
		*err = e
		return nil
	}
	g.tensors = append(g.tensors, t)
	return t
}

// vector uploads w decoded to f32, unless *err is set.
func (g *GPUTower) vector(w *Weight, err *error) *gpu.Buffer {
	if *err != nil {
		return nil
	}
	f, e := w.F32()
	if e != nil {
		*err = e
		return nil
	}
	return g.buffer(w.Name, f, err)
}

// buffer uploads f as a buffer the tower releases, unless *err is set.
func (g *GPUTower) buffer(label string, f []float32, err *error) *gpu.Buffer {
	b, e := g.dev.NewBufferF32(label, f)
	if e != nil {
		*err = e
		return nil
	}
	g.buffers = append(g.buffers, b)
	return b
}

// attention is the blocks' attention over n patches: every patch sees
// every patch; Gemma 4's at a scale of 1 (its q and k are normed).
func (g *GPUTower) attention(n int) ops.AttentionArgs {
	c := g.t.Config
	a := ops.AttentionArgs{HeadDim: c.HeadDim(), Heads: c.Heads, KVHeads: c.Heads, Tokens: n, KVLen: n, Bidirectional: true}
	if c.Projector == projGemma4 {
		a.Scale = 1
	}
	return a
}

// Release frees the device's memory.
func (g *GPUTower) Release() {
	for _, t := range g.tensors {
		t.Release()
	}
	for _, b := range g.buffers {
		b.Release()
	}
	g.tensors, g.buffers, g.g4, g.x = nil, nil, nil, nil
}

// Tower is the tower the weights came from.
func (g *GPUTower) Tower() *Tower { return g.t }

// Encode runs an image's pixels (as PatchRows takes them for grid gr,
// normalised) through the tower and returns its TokensFor(gr) rows of
// TextHidden values.
func (g *GPUTower) Encode(pixels []float32, gr Grid) ([]float32, error) {
	if g.x == nil {
		return nil, errors.New("vision: the GPU tower is released")
	}
	c := g.t.Config
	record := g.record
	if g.g4 != nil {
		if err := c.checkGrid(gr); err != nil {
			return nil, err
		}
		if err := g.writeGemma4(gr); err != nil {
			return nil, err
		}
		record = func(ch *gpu.Chain) (*gpu.Readback, error) { return g.recordGemma4(ch, gr) }
	} else if gr != (Grid{c.Side(), c.Side()}) {
		return nil, fmt.Errorf("vision: a %d×%d-patch grid, and Gemma 3's tower takes %d×%d", gr.Cols, gr.Rows, c.Side(), c.Side())
	}
	patches, err := c.PatchRows(pixels, gr)
	if err != nil {
		return nil, err
	}
	ch, err := g.dev.NewChain("vision")
	if err != nil {
		return nil, err
	}
	rb, err := record(ch)
	if err != nil {
		ch.Discard()
		return nil, fmt.Errorf("vision: %s: %w", g.t.Path, err)
	}
	if err := g.in.WriteF32(0, patches); err != nil {
		ch.Discard()
		return nil, err
	}
	if err := ch.Submit(); err != nil {
		return nil, err
	}
	raw, err := rb.Bytes()
	if err != nil {
		return nil, err
	}
	return gpu.F32From(raw), nil
}

// record appends the tower's dispatches: the encoder as HiddenCPU, the
// projector as projectCPU, and the tokens' readback.
func (g *GPUTower) record(ch *gpu.Chain) (*gpu.Readback, error) {
	c := g.t.Config
	n, d, tok := c.Patches(), c.Hidden, c.Tokens()
	var err error
	try := func(e error) {
		if err == nil {
			err = e
		}
	}
	// linear is y = x·Wᵀ + b over rows rows.
	linear := func(w *gpu.Tensor, b *gpu.Buffer, x, y *gpu.Buffer, rows int) {
		try(ops.MatMul(ch, w, x, y, rows))
		try(ops.AddBias(ch, y, b, rows, w.Rows))
	}
	ln := func(x *gpu.Buffer, w [2]*gpu.Buffer, y *gpu.Buffer) {
		try(ops.LayerNorm(ch, x, w[0], w[1], y, ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}))
	}
	linear(g.patch, g.patchBias, g.in, g.x, n)
	try(ops.AddInPlace(ch, g.x, g.position, n*d))
	att := g.attention(n)
	for i := range g.blocks {
		b := &g.blocks[i]
		ln(g.x, b.ln1, g.h)
		linear(b.q, b.qb, g.h, g.q, n)
		linear(b.k, b.kb, g.h, g.k, n)
		linear(b.v, b.vb, g.h, g.v, n)
		try(ops.AttentionWith(ch, g.q, g.k, g.v, g.scratch, g.att, att, ops.AttentionOptions{Tile: g.attTile}))
		linear(b.o, b.ob, g.att, g.h, n)
		try(ops.AddInPlace(ch, g.x, g.h, n*d))
		ln(g.x, b.ln2, g.h)
		linear(b.up, b.upb, g.h, g.ff, n)
		try(ops.GELU(ch, g.ff, g.ff, n*c.FF))
		linear(b.dn, b.dnb, g.ff, g.h, n)
		try(ops.AddInPlace(ch, g.x, g.h, n*d))
	}
	ln(g.x, g.postLN, g.h)
	// The pool reads channels first: the grid's rows go to [Hidden][side][side]
	// and the pooled tokens back to rows.
	side := c.Side()
	try(ops.Transpose(ch, g.h, g.chw, n, d))
	try(ops.AvgPool2D(ch, g.chw, g.pooledCHW, d, side, side, c.Merge, c.Merge))
	try(ops.Transpose(ch, g.pooledCHW, g.pooled, d, tok))
	try(ops.RMSNorm(ch, g.pooled, g.softNorm, g.normed, ops.NormArgs{Rows: tok, Dim: d, Eps: c.Eps}))
	try(ops.MatMul(ch, g.proj, g.normed, g.out, tok))
	if err != nil {
		return nil, err
	}
	return ch.ReadBack(g.out, 0, uint64(tok*c.TextHidden)*4)
}
