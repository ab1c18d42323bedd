package vision

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// Grid is an image's patch grid as the tower sees it: Rows × Cols patches.
type Grid struct{ Rows, Cols int }

// Patches is the number of patches in g.
func (g Grid) Patches() int { return g.Rows * g.Cols }

// GridFor is the patch grid of a width × height image: Gemma 3's fixed
// square, or Gemma 4's aspect-preserving grid within MaxTokens
// (Gemma4Size).
func (c Config) GridFor(width, height int) (Grid, error) {
	if c.Projector != projGemma4 {
		return Grid{c.Side(), c.Side()}, nil
	}
	w, h, err := Gemma4Size(width, height, c.PatchSize, c.Merge, c.MaxTokens)
	if err != nil {
		return Grid{}, err
	}
	g := Grid{h / c.PatchSize, w / c.PatchSize}
	if max(g.Rows, g.Cols) > c.PositionSize {
		return Grid{}, fmt.Errorf("vision: a %d×%d-patch grid is past the tower's %d positions a side", g.Cols, g.Rows, c.PositionSize)
	}
	return g, nil
}

// TokensFor is the number of tokens an image of grid g becomes.
func (c Config) TokensFor(g Grid) int { return (g.Rows / c.Merge) * (g.Cols / c.Merge) }

// PreprocessFor is how the tower wants an image of grid g: Gemma 3's
// (Preprocess), or transformers' Gemma 4 processor's resize to the grid's
// pixels, bicubic with antialiasing, and rescale (the tower itself maps
// the values to [-1, 1]).
func (c Config) PreprocessFor(g Grid) Preprocess {
	if c.Projector != projGemma4 {
		return c.Preprocess()
	}
	return Preprocess{Width: g.Cols * c.PatchSize, Height: g.Rows * c.PatchSize, Mean: c.Mean, Std: c.Std, Rescale: 1.0 / 255, Resample: TorchvisionBicubicUint8}
}

// PatchRows cuts an image's pixels (3 × Rows·PatchSize × Cols·PatchSize,
// channels first, as Preprocess.Pixels returns them) into the tower's
// patches: g.Patches() rows, left to right and top to bottom over the
// grid, each holding its PatchWidth values in the convolution's order
// (channel, then row, then column). The patch embedding is then one matrix
// product. Gemma 4's values are mapped to 2·(v - 0.5), as its patch
// embedder does before its product.
func (c Config) PatchRows(pixels []float32, g Grid) ([]float32, error) {
	p := c.PatchSize
	w, h := g.Cols*p, g.Rows*p
	if g.Rows <= 0 || g.Cols <= 0 || len(pixels) != 3*w*h {
		return nil, fmt.Errorf("vision: %d pixel values for a %d×%d-patch grid, want 3×%d×%d", len(pixels), g.Cols, g.Rows, h, w)
	}
	pw := c.PatchWidth()
	rows := make([]float32, g.Patches()*pw)
	for gy := range g.Rows {
		for gx := range g.Cols {
			row := rows[(gy*g.Cols+gx)*pw:]
			for ch := range 3 {
				for y := range p {
					src := pixels[(ch*h+gy*p+y)*w+gx*p:]
					copy(row[(ch*p+y)*p:(ch*p+y+1)*p], src[:p])
				}
			}
		}
	}
	if c.Projector == projGemma4 {
		for i, v := range rows {
			rows[i] = 2 * (v - 0.5)
		}
	}
	return rows, nil
}

// EncodeCPU is the reference encoder: an image's pixels (as PatchRows
// takes them, normalised) to its TokensFor(g) rows of TextHidden values,
// in float32 with float64 sums (engine/ops/ref). It is the oracle of the
// GPU encoder, and slow: a real tower takes minutes on a CPU.
func (t *Tower) EncodeCPU(pixels []float32, g Grid) ([]float32, error) {
	hidden, err := t.HiddenCPU(pixels, g)
	if err != nil {
		return nil, err
	}
	if t.Config.Projector == projGemma4 {
		return t.projectGemma4CPU(hidden, g)
	}
	return t.projectCPU(hidden)
}

// HiddenCPU is the encoder's last hidden state: g.Patches() rows of
// Hidden (transformers' vision_tower last_hidden_state for Gemma 3, after
// its final LayerNorm; Gemma 4's encoder output before its pool).
func (t *Tower) HiddenCPU(pixels []float32, g Grid) ([]float32, error) {
	if t.Config.Projector == projGemma4 {
		return t.hiddenGemma4CPU(pixels, g)
	}
	c := t.Config
	n, d := c.Patches(), c.Hidden
	if g != (Grid{c.Side(), c.Side()}) {
		return nil, fmt.Errorf("vision: a %d×%d-patch grid, and Gemma 3's tower takes %d×%d", g.Cols, g.Rows, c.Side(), c.Side())
	}
	patches, err := c.PatchRows(pixels, g)
	if err != nil {
		return nil, err
	}
	v := &vectors{}
	x := v.linear(t.Patch, t.PatchBias, patches, n)
	ref.AddInPlace(x, v.f32(t.Position))
	ln := func(x []float32, w, b *Weight) []float32 {
		return ref.LayerNorm(x, v.f32(w), v.f32(b), ref.NormArgs{Rows: n, Dim: d, Eps: c.Eps})
	}
	att := ref.AttentionArgs{HeadDim: c.HeadDim(), Heads: c.Heads, KVHeads: c.Heads, Tokens: n, KVLen: n, Bidirectional: true}
	for i := range t.Blocks {
		b := &t.Blocks[i]
		h := ln(x, b.LN1, b.LN1Bias)
		q := v.linear(b.Q, b.QBias, h, n)
		k := v.linear(b.K, b.KBias, h, n)
		vv := v.linear(b.V, b.VBias, h, n)
		ref.AddInPlace(x, v.linear(b.O, b.OBias, ref.Attention(q, k, vv, att), n))
		h = ln(x, b.LN2, b.LN2Bias)
		ref.AddInPlace(x, v.linear(b.Down, b.DownBias, ref.GELU(v.linear(b.Up, b.UpBias, h, n)), n))
		if v.err != nil {
			return nil, fmt.Errorf("vision: block %d: %w", i, v.err)
		}
	}
	x = ln(x, t.PostLN, t.PostLNBias)
	return x, v.err
}

// projectCPU is the projector: the Merge × Merge average pool over the
// patch grid, the RMSNorm and the projection to TextHidden.
func (t *Tower) projectCPU(hidden []float32) ([]float32, error) {
	c := t.Config
	side, d := c.Side(), c.Hidden
	chw := ref.Transpose(hidden, c.Patches(), d)
	pooled := ref.Transpose(ref.AvgPool2D(chw, d, side, side, c.Merge, c.Merge), d, c.Tokens())
	v := &vectors{}
	normed := ref.RMSNorm(pooled, v.f32(t.SoftNorm), ref.NormArgs{Rows: c.Tokens(), Dim: d, Eps: c.Eps})
	proj, err := t.ProjectionRows()
	if err != nil {
		return nil, err
	}
	if v.err != nil {
		return nil, v.err
	}
	return ref.MatMul(gguf.TypeF32, c.TextHidden, d, gpu.F32Bytes(proj), normed, c.Tokens())
}

// ProjectionRows is the projection as TextHidden rows of Hidden, the
// layout of every other product (the file's matrix transposed).
func (t *Tower) ProjectionRows() ([]float32, error) {
	w, err := t.Projection.F32()
	if err != nil {
		return nil, err
	}
	return ref.Transpose(w, t.Projection.Rows, t.Projection.Cols), nil
}

// vectors decodes weights for the reference, keeping the first error so
// the block reads straight.
type vectors struct{ err error }

// f32 is w decoded (nil after an error, or for no weight).
func (v *vectors) f32(w *Weight) []float32 {
	if v.err != nil || w == nil {
		return nil
	}
	out, err := w.F32()
	v.err = err
	return out
}

// linear is x·Wᵀ + b for n rows of x.
func (v *vectors) linear(w, b *Weight, x []float32, n int) []float32 {
	if v.err != nil {
		return make([]float32, n*w.Rows)
	}
	y, err := ref.MatMul(w.Type, w.Rows, w.Cols, w.Data, x, n)
	if err != nil {
		v.err = fmt.Errorf("%s: %w", w.Name, err)
		return make([]float32, n*w.Rows)
	}
	if bias := v.f32(b); bias != nil {
		ref.AddBias(y, bias)
	}
	return y
}
