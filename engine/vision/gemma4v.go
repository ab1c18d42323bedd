package vision

import (
	"fmt"
	"math"
	"slices"

	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// Gemma 4's vision tower (projector type "gemma4v", llama.cpp's
// convert_hf_to_gguf.py --mmproj of a Gemma4ForConditionalGeneration):
// images of any aspect ratio, resized to whole 48-pixel cells within a token
// budget; a bias-free patch embedding of the pixels mapped to [-1, 1]; x and
// y position tables; blocks of RMSNorms around attention with q/k/v norms,
// 2D rotary positions and a scale of 1, and a tanh-GELU GLU; an average pool
// over 3×3 patches, × sqrt(width), an optional standardisation, and a
// weightless RMSNorm before the projection. transformers' modeling_gemma4.py
// is the reference (testdata/gemma4); llama.cpp's fork and Ollama differ from
// it in the MLP's activation (QuickGELU) and in normalising after the
// projection, and the file has no key that says which.

const (
	projGemma4 = "gemma4v"
	// gemma4Theta is the 2D RoPE's frequency base, which the file does not
	// store (transformers' vision rope_parameters default, llama.cpp's
	// hard-coded 100).
	gemma4Theta = 100
	// gemma4Merge is the pool's side when clip.vision.projector.scale_factor
	// is absent (pooling_kernel_size; the converter does not write it).
	gemma4Merge = 3
	// Gemma4Tokens is the default image token budget (transformers'
	// max_soft_tokens): an image becomes at most this many tokens.
	Gemma4Tokens = 280
)

// Gemma4Budgets are the token budgets transformers' Gemma 4 processor takes.
var Gemma4Budgets = []int{70, 140, 280, 560, 1120}

// Linear is a product of Gemma 4's tower with its clamps: y = clamp(W ·
// clamp(x, In[0], In[1]), Out[0], Out[1]). A bound the file leaves out is
// ±math.MaxFloat32 (llama.cpp's default), which no finite value crosses.
type Linear struct {
	W       *Weight
	In, Out [2]float32
}

// clamped says whether any bound is set.
func (l *Linear) clamped() bool { return l.In != unbounded || l.Out != unbounded }

var unbounded = [2]float32{-math.MaxFloat32, math.MaxFloat32}

// Block4 is one of Gemma 4's encoder blocks: plain-gain RMSNorms before
// and after attention and the MLP, q and k norms over each head.
type Block4 struct {
	LN1, AttnPost, LN2, FFNPost *Weight
	QNorm, KNorm                *Weight
	Q, K, V, O, Gate, Up, Down  Linear
}

// loadGemma4 reads the Gemma 4 tensors into t.
func loadGemma4(ld *loader, t *Tower) {
	c := &t.Config
	d, hd := c.Hidden, c.HeadDim()
	p := uint64(c.PatchSize)
	if t.Patch = ld.get("v.patch_embd.weight", p, p, 3, uint64(d)); t.Patch != nil {
		t.Patch.Rows, t.Patch.Cols = d, c.PatchWidth()
	}
	// The position tables: [2][PositionSize][Hidden], x's plane first.
	if pt, ok := ld.f.Tensor("v.position_embd.weight"); ok && len(pt.Shape) == 3 {
		c.PositionSize = int(pt.Shape[1])
	}
	t.Position = ld.tensor("v.position_embd.weight", 2, c.PositionSize, d)
	lin := func(name string, rows, cols int) Linear {
		l := Linear{W: ld.tensor(name+".weight", rows, cols), In: unbounded, Out: unbounded}
		for _, b := range []struct {
			key string
			v   *float32
		}{{"input_min", &l.In[0]}, {"input_max", &l.In[1]}, {"output_min", &l.Out[0]}, {"output_max", &l.Out[1]}} {
			ld.scalar(name+"."+b.key, b.v)
		}
		if ld.err == nil && (l.In[0] > l.In[1] || l.Out[0] > l.Out[1]) {
			ld.err = fmt.Errorf("%s: clamps [%v, %v] and [%v, %v] are not intervals", name, l.In[0], l.In[1], l.Out[0], l.Out[1])
		}
		return l
	}
	for i := range c.Layers {
		n := func(s string) string { return fmt.Sprintf("v.blk.%d.%s", i, s) }
		t.Blocks4 = append(t.Blocks4, Block4{
			LN1: ld.tensor(n("ln1.weight"), d), AttnPost: ld.tensor(n("attn_post_norm.weight"), d),
			LN2: ld.tensor(n("ln2.weight"), d), FFNPost: ld.tensor(n("ffn_post_norm.weight"), d),
			QNorm: ld.tensor(n("attn_q_norm.weight"), hd), KNorm: ld.tensor(n("attn_k_norm.weight"), hd),
			Q: lin(n("attn_q"), d, d), K: lin(n("attn_k"), d, d), V: lin(n("attn_v"), d, d), O: lin(n("attn_out"), d, d),
			Gate: lin(n("ffn_gate"), c.FF, d), Up: lin(n("ffn_up"), c.FF, d), Down: lin(n("ffn_down"), d, c.FF),
		})
	}
	if _, ok := ld.f.Tensor("v.clamp_data"); ok && ld.err == nil {
		ld.err = fmt.Errorf("tensor \"v.clamp_data\" (the clamps packed as Ollama's converter writes them) is not supported: use llama.cpp's mmproj file for this model")
	}
	// The standardisation of the 26B and 31B models; both or neither.
	_, hasBias := ld.f.Tensor("v.std_bias")
	_, hasScale := ld.f.Tensor("v.std_scale")
	if hasBias || hasScale {
		t.StdBias, t.StdScale = ld.tensor("v.std_bias", d), ld.tensor("v.std_scale", d)
	}
	// Rows of the vision width, the layout of every product (unlike Gemma
	// 3's transposed matrix).
	if pt, ok := ld.f.Tensor(projectionTensor); ok && len(pt.Shape) == 2 {
		c.TextHidden = int(pt.Shape[1])
	}
	t.Projection = ld.tensor(projectionTensor, c.TextHidden, d)
}

// SetBudget sets the most tokens an image becomes (MaxTokens), one of
// Gemma4Budgets: transformers' max_soft_tokens, which a checkpoint's
// processor config sets (280 in Google's) and a user may raise for small
// print. Only Gemma 4's tower takes one; set it before NewGPUTower, which
// sizes the activations by it.
func (t *Tower) SetBudget(tokens int) error {
	switch {
	case t.Config.Projector != projGemma4:
		return fmt.Errorf("vision: %s: a %s projector makes %d tokens of every image; only Gemma 4's take a token budget", t.Path, t.Config.Projector, t.Config.Tokens())
	case !slices.Contains(Gemma4Budgets, tokens):
		return fmt.Errorf("vision: an image token budget of %d: Gemma 4 takes %v", tokens, Gemma4Budgets)
	}
	t.Config.MaxTokens = tokens
	return nil
}

// scalar reads an optional one-value F32 tensor into v.
func (ld *loader) scalar(name string, v *float32) {
	if ld.err != nil {
		return
	}
	if _, ok := ld.f.Tensor(name); !ok {
		return
	}
	w := ld.get(name, 1)
	if w == nil {
		return
	}
	f, err := w.F32()
	switch {
	case err != nil:
		ld.err = err
	case f[0] != f[0]:
		ld.err = fmt.Errorf("tensor %q is NaN", name)
	default:
		*v = f[0]
	}
}

// gemma4Config checks the keys of a Gemma 4 projector read into c.
func gemma4Config(f *gguf.File, c *Config) error {
	var err error
	if c.Merge, err = f.IntOr("clip.vision.projector.scale_factor", gemma4Merge); err != nil {
		return err
	}
	switch {
	case c.Merge <= 0:
		return fmt.Errorf("clip.vision.projector.scale_factor is %d, want a positive pool side", c.Merge)
	case c.PatchSize > MaxSize:
		return fmt.Errorf("clip.vision.patch_size is %d, over the %d Hearth preprocesses", c.PatchSize, MaxSize)
	case c.Hidden%c.Heads != 0 || c.HeadDim()%4 != 0:
		// The 2D rotation turns a quarter-head pair by x and one by y.
		return fmt.Errorf("width %d in %d heads: each head must be a multiple of 4 wide for the 2D rotary positions", c.Hidden, c.Heads)
	}
	c.MaxTokens = Gemma4Tokens
	return nil
}

// hiddenGemma4CPU is Gemma 4's encoder: g.Patches() rows of Hidden before
// the pool.
func (t *Tower) hiddenGemma4CPU(pixels []float32, g Grid) ([]float32, error) {
	c := t.Config
	n, d, hd := g.Patches(), c.Hidden, c.HeadDim()
	if err := c.checkGrid(g); err != nil {
		return nil, err
	}
	patches, err := c.PatchRows(pixels, g)
	if err != nil {
		return nil, err
	}
	v := &vectors{}
	x := v.linear(t.Patch, nil, patches, n)
	x = ref.Add(x, t.positionsCPU(v, g))
	rms := func(x []float32, w *Weight, rows, dim int) []float32 {
		var gain []float32
		if w != nil {
			gain = v.f32(w)
		}
		return ref.RMSNorm(x, gain, ref.NormArgs{Rows: rows, Dim: dim, Eps: c.Eps})
	}
	lin := func(l Linear, x []float32) []float32 {
		if l.In != unbounded {
			x = ref.Clamp(x, l.In[0], l.In[1])
		}
		y := v.linear(l.W, nil, x, n)
		if l.Out != unbounded {
			y = ref.Clamp(y, l.Out[0], l.Out[1])
		}
		return y
	}
	rope := c.rope2D(g)
	pos := c.ropePositions(g)
	att := ref.AttentionArgs{HeadDim: hd, Heads: c.Heads, KVHeads: c.Heads, Tokens: n, KVLen: n, Bidirectional: true, Scale: 1}
	for i := range t.Blocks4 {
		b := &t.Blocks4[i]
		h := rms(x, b.LN1, n, d)
		q := ref.RoPE(rms(lin(b.Q, h), b.QNorm, n*c.Heads, hd), nil, pos, rope)
		k := ref.RoPE(rms(lin(b.K, h), b.KNorm, n*c.Heads, hd), nil, pos, rope)
		vv := rms(lin(b.V, h), nil, n*c.Heads, hd)
		o := lin(b.O, ref.Attention(q, k, vv, att))
		ref.AddInPlace(x, rms(o, b.AttnPost, n, d))
		h = rms(x, b.LN2, n, d)
		f := lin(b.Down, ref.GeGLU(lin(b.Gate, h), lin(b.Up, h)))
		ref.AddInPlace(x, rms(f, b.FFNPost, n, d))
		if v.err != nil {
			return nil, fmt.Errorf("vision: block %d: %w", i, v.err)
		}
	}
	return x, v.err
}

// checkGrid refuses a grid the tower cannot take: empty, not whole pools,
// or past the position tables.
func (c Config) checkGrid(g Grid) error {
	switch {
	case g.Rows <= 0 || g.Cols <= 0 || g.Rows%c.Merge != 0 || g.Cols%c.Merge != 0:
		return fmt.Errorf("vision: a %d×%d-patch grid, want positive sides that are multiples of the pool's %d", g.Cols, g.Rows, c.Merge)
	case max(g.Rows, g.Cols) > c.PositionSize:
		return fmt.Errorf("vision: a %d×%d-patch grid is past the tower's %d positions a side", g.Cols, g.Rows, c.PositionSize)
	case c.MaxTokens > 0 && c.TokensFor(g) > c.MaxTokens:
		return fmt.Errorf("vision: a %d×%d-patch grid makes %d tokens, over the budget of %d", g.Cols, g.Rows, c.TokensFor(g), c.MaxTokens)
	}
	return nil
}

// positionsCPU is each patch's position embedding: its column's row of
// the x table plus its row's row of the y table.
func (t *Tower) positionsCPU(v *vectors, g Grid) []float32 {
	c := t.Config
	d := c.Hidden
	table := v.f32(t.Position)
	out := make([]float32, g.Patches()*d)
	if table == nil {
		return out
	}
	for i := range g.Patches() {
		px := table[(i%g.Cols)*d:]
		py := table[(c.PositionSize+i/g.Cols)*d:]
		for j := range d {
			out[i*d+j] = px[j] + py[j]
		}
	}
	return out
}

// rope2D is the 2D rotation as one RoPE over half-heads: viewed as
// [patch][head][half][HeadDim/2], each half-head turns NeoX-style (pairs
// (i, i + HeadDim/4)) at base 100, the first half by the patch's column
// and the second by its row (ropePositions). transformers'
// apply_multidimensional_rope, without a kernel of its own.
func (c Config) rope2D(g Grid) ref.RoPEArgs {
	return ref.RoPEArgs{Tokens: g.Patches() * c.Heads * 2, Heads: 1, HeadDim: c.HeadDim() / 2, NeoX: true, Base: gemma4Theta}
}

// ropePositions are rope2D's positions: column, row for every head of
// every patch.
func (c Config) ropePositions(g Grid) []uint32 {
	pos := make([]uint32, 0, g.Patches()*c.Heads*2)
	for i := range g.Patches() {
		for range c.Heads {
			pos = append(pos, uint32(i%g.Cols), uint32(i/g.Cols))
		}
	}
	return pos
}

// projectGemma4CPU is Gemma 4's pool and projector: the Merge × Merge
// average pool over the grid, × sqrt(Hidden), the standardisation where
// the file has one, a weightless RMSNorm and the projection.
func (t *Tower) projectGemma4CPU(hidden []float32, g Grid) ([]float32, error) {
	c := t.Config
	d, tok := c.Hidden, c.TokensFor(g)
	chw := ref.Transpose(hidden, g.Patches(), d)
	pooled := ref.Transpose(ref.AvgPool2D(chw, d, g.Rows, g.Cols, c.Merge, c.Merge), d, tok)
	pooled = ref.Scale(pooled, c.poolScale())
	v := &vectors{}
	if t.StdBias != nil {
		pooled = ref.ShiftScale(pooled, ref.Scale(v.f32(t.StdBias), -1), v.f32(t.StdScale))
	}
	normed := ref.RMSNorm(pooled, nil, ref.NormArgs{Rows: tok, Dim: d, Eps: c.Eps})
	if v.err != nil {
		return nil, v.err
	}
	return v.linear(t.Projection, nil, normed, tok), v.err
}

// poolScale is sqrt(Hidden) as transformers multiplies by it: a Python
// float, rounded to float32 against the float32 tokens.
func (c Config) poolScale() float32 { return float32(math.Sqrt(float64(c.Hidden))) }
