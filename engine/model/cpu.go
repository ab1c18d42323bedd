package model

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/gguf"
)

// CPU is the reference forward pass: f32 activations, weights dequantized a
// row at a time straight from the file, matrix products spread over every
// core, the other steps by engine/ops/ref (the same references the GPU
// kernels are tested against). It is the oracle for the GPU path and the
// backend when no adapter exists.
type CPU struct {
	ownership
	m    *Model
	ctx  int
	k, v [][]float32 // per layer: [ctx, KVHeads, HeadDim]
	vec  map[*Weight][]float32
	// factors are the RoPE factors for this context (Model.RopeFactorsFor).
	factors []float32
	// loras are the adapters SetAdapters set; nil runs the base alone.
	loras []LoRA
}

// NewCPU allocates a ctx-position KV cache for m on the host.
func NewCPU(m *Model, ctx int) (*CPU, error) {
	c := &m.Config
	if ctx <= 0 {
		return nil, fmt.Errorf("model: context %d must be positive", ctx)
	}
	r := &CPU{m: m, ctx: ctx, vec: map[*Weight][]float32{}, factors: m.RopeFactorsFor(ctx)}
	for range c.Layers {
		r.k = append(r.k, make([]float32, ctx*c.KVDim()))
		r.v = append(r.v, make([]float32, ctx*c.KVDim()))
	}
	// Norm gains and biases are small; dequantize them once.
	for i := range m.Layers {
		l := &m.Layers[i]
		for _, w := range []*Weight{l.AttnNorm, l.PostAttnNorm, l.FFNNorm, l.PostFFNNorm, l.QBias, l.KBias, l.VBias, l.QNorm, l.KNorm} {
			if err := r.dequantize(w); err != nil {
				return nil, err
			}
		}
	}
	if err := r.dequantize(m.OutNorm); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *CPU) dequantize(w *Weight) error {
	if w == nil {
		return nil
	}
	v, err := w.F32()
	r.vec[w] = v
	return err
}

// Context implements Runner.
func (r *CPU) Context() int { return r.ctx }

// Model implements Runner.
func (r *CPU) Model() *Model { return r.m }

// Close implements Runner.
func (r *CPU) Close() { r.k, r.v = nil, nil }

// Forward implements Runner: embedding → for each layer: norm, q/k/v, RoPE,
// attention over the cache, output projection, residual, norm, gated
// feed-forward, residual → final norm → logits.
func (r *CPU) Forward(tokens []int32, pos int, out Output) (Result, error) {
	m, c := r.m, &r.m.Config
	if err := checkForward(m, r.ctx, tokens, pos, out); err != nil {
		return Result{}, err
	}
	if r.k == nil {
		return Result{}, fmt.Errorf("model: CPU runner is closed")
	}
	n, d, kvd := len(tokens), c.Hidden, c.KVDim()

	// x = embedding rows, scaled (Gemma: sqrt(d_model)).
	x := make([]float32, n*d)
	for t, id := range tokens {
		row := x[t*d : (t+1)*d]
		rb := m.Embed.RowBytes()
		if err := gguf.Dequantize(m.Embed.Type, m.Embed.Data[int(id)*rb:(int(id)+1)*rb], row); err != nil {
			return Result{}, fmt.Errorf("model: %s row %d: %w", m.Embed.Name, id, err)
		}
		loraEmbed(loraParts(r.loras, m.Embed), int(id), row)
		if c.EmbedScale != 0 {
			for j := range row {
				row[j] *= c.EmbedScale
			}
		}
	}

	norm := func(x []float32, w *Weight, rows, dim int) []float32 {
		return ref.RMSNorm(x, r.vec[w], ref.NormArgs{Rows: rows, Dim: dim, Eps: c.Eps})
	}
	var err error
	mul := func(w *Weight, x []float32) []float32 {
		if err != nil {
			return nil
		}
		var y []float32
		y, err = matmul(w, x, len(x)/w.Cols)
		if err == nil {
			applyLoRA(loraParts(r.loras, w), x, y, len(x)/w.Cols)
		}
		return y
	}

	for i := range m.Layers {
		l := &m.Layers[i]
		// Attention: x += O · attention(rope(q), rope(k), v), q, k, v
		// projections of norm(x).
		xn := norm(x, l.AttnNorm, n, d)
		q, k, v := mul(l.Q, xn), mul(l.K, xn), mul(l.V, xn)
		if err != nil {
			return Result{}, err
		}
		if l.QBias != nil {
			ref.AddBias(q, r.vec[l.QBias])
			ref.AddBias(k, r.vec[l.KBias])
			ref.AddBias(v, r.vec[l.VBias])
		}
		if l.QNorm != nil {
			q = norm(q, l.QNorm, n*c.Heads, c.HeadDim)
			k = norm(k, l.KNorm, n*c.KVHeads, c.HeadDim)
		}
		base, scale := c.Rope(i)
		rope := ref.RoPEArgs{Tokens: n, HeadDim: c.HeadDim, RopeDims: c.RopeDims, NeoX: c.NeoX, Base: base, FreqScale: scale, Pos0: pos, AttnFactor: c.RopeAttnFactor}
		rope.Heads = c.Heads
		q = ref.RoPE(q, r.factors, nil, rope)
		rope.Heads = c.KVHeads
		k = ref.RoPE(k, r.factors, nil, rope)
		copy(r.k[i][pos*kvd:], k)
		copy(r.v[i][pos*kvd:], v)
		att := attention(q, r.k[i], r.v[i], ref.AttentionArgs{
			HeadDim: c.HeadDim, Heads: c.Heads, KVHeads: c.KVHeads, Tokens: n, Pos0: pos, KVLen: pos + n,
			Scale: c.AttnScale, Window: c.Window(i), Softcap: c.AttnSoftcap,
		})
		o := mul(l.O, att)
		if err != nil {
			return Result{}, err
		}
		if l.PostAttnNorm != nil {
			o = norm(o, l.PostAttnNorm, n, d)
		}
		ref.AddInPlace(x, o)

		// Feed-forward: x += Down · (act(Gate · norm(x)) * (Up · norm(x))).
		xn = norm(x, l.FFNNorm, n, d)
		g, u := mul(l.Gate, xn), mul(l.Up, xn)
		if err != nil {
			return Result{}, err
		}
		var h []float32
		if c.GELU {
			h = ref.GeGLU(g, u)
		} else {
			h = ref.SwiGLU(g, u)
		}
		f := mul(l.Down, h)
		if err != nil {
			return Result{}, err
		}
		if l.PostFFNNorm != nil {
			f = norm(f, l.PostFFNNorm, n, d)
		}
		ref.AddInPlace(x, f)
	}

	// Logits: Output · norm(x), soft-capped (Gemma 2), for the last token or
	// every one.
	rows := n
	if !out.All {
		x, rows = x[(n-1)*d:], 1
	}
	logits := mul(m.Output, norm(x, m.OutNorm, rows, d))
	if err != nil {
		return Result{}, err
	}
	if c.FinalSoftcap > 0 {
		logits = ref.Softcap(logits, c.FinalSoftcap)
	}
	return finish(logits, out), nil
}

// attention is ref.Attention with the queries spread over the cores: each
// query's output depends only on the cache, so runs of tokens are
// independent calls.
func attention(q, k, v []float32, a ref.AttentionArgs) []float32 {
	workers := min(runtime.GOMAXPROCS(0), a.Tokens)
	if workers <= 1 {
		return ref.Attention(q, k, v, a)
	}
	width := a.Heads * a.HeadDim
	out := make([]float32, a.Tokens*width)
	per := (a.Tokens + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < a.Tokens; lo += per {
		hi := min(lo+per, a.Tokens)
		part := a
		part.Tokens, part.Pos0 = hi-lo, a.Pos0+lo
		wg.Go(func() {
			copy(out[lo*width:], ref.Attention(q[lo*width:hi*width], k, v, part))
		})
	}
	wg.Wait()
	return out
}

// finish applies the penalty and top-k selection of out to the last row of
// logits on the host, as the GPU path does in its kernels.
func finish(logits []float32, out Output) Result {
	if p := out.Penalty; p != nil {
		sample.Penalize(logits, p.IDs, p.Counts, p.Repeat, p.Frequency, p.Presence)
	}
	if out.TopK == 0 {
		return Result{Logits: logits}
	}
	ids, vals := ref.TopK(logits, out.TopK)
	return Result{IDs: ids, Values: vals}
}

// matmulChunk is how many rows of W a goroutine takes at a time: small
// enough that the cores finish together when another process slows one of
// them (the dev machine shares its 2 cores), large enough that the shared
// counter is touched once per several microseconds of work.
const matmulChunk = 16

// matmul returns Y[m×rows] = X[m×cols]·Wᵀ. Each row of W is dequantized
// once into its goroutine's buffer and dotted with every activation row
// while it is in cache; for one activation row (decode) the types with a
// fused kernel skip the buffer. The rows are handed out in chunks to
// GOMAXPROCS goroutines, the calling one included.
func matmul(w *Weight, x []float32, m int) ([]float32, error) {
	if len(x) != m*w.Cols {
		return nil, fmt.Errorf("model: %s: %d activations are not %d rows of %d", w.Name, len(x), m, w.Cols)
	}
	decode, err := gguf.Dequantizer(w.Type, w.Cols)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", w.Name, err)
	}
	y := make([]float32, m*w.Rows)
	rb, chunks := w.RowBytes(), (w.Rows+matmulChunk-1)/matmulChunk
	fused := gguf.FusedDot(w.Type)
	if m != 1 {
		fused = nil // prefill: a dequantized row serves every token
	}
	var next atomic.Int64
	work := func() {
		var row []float32
		if fused == nil {
			row = make([]float32, w.Cols)
		}
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			for r := c * matmulChunk; r < min((c+1)*matmulChunk, w.Rows); r++ {
				if fused != nil {
					y[r] = fused(w.Data[r*rb:(r+1)*rb], x)
					continue
				}
				decode(w.Data[r*rb:(r+1)*rb], row)
				dotRows(row, x, y[r:], w.Rows)
			}
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), chunks) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return y, nil
}

// dotGo is the portable f32 dot product: four independent sums, so the
// adds pipeline, combined pairwise as a GPU's tree of partials is.
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// SetAdapters implements Runner.
func (r *CPU) SetAdapters(loras []LoRA) error {
	if err := r.m.CheckLoRA(loras); err != nil {
		return err
	}
	r.loras = append([]LoRA(nil), loras...)
	r.setOwner(nil)
	return nil
}
