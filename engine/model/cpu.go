package model

import (
	"fmt"
	"runtime"
	"slices"
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
	k, v [][][]float32 // per slot, per layer: [ctx, KVHeads, HeadDim]
	// layers and outNorm are the small weights, dequantized once.
	layers  []LayerVectors
	outNorm []float32
	pleNorm []float32 // the per-layer embeddings' projection norm (Gemma 4)
	// factors are the RoPE factors for this context (Model.RopeFactorsFor).
	factors []float32
	// loras are the adapters SetAdapters set; nil runs the base alone.
	loras []LoRA
}

// NewCPU allocates a ctx-position KV cache for m on the host.
func NewCPU(m *Model, ctx int) (*CPU, error) { return NewCPUSlots(m, ctx, 1) }

// NewCPUSlots allocates slots KV caches of ctx positions for m on the host,
// one per sequence served at once.
func NewCPUSlots(m *Model, ctx, slots int) (*CPU, error) {
	c := &m.Config
	if ctx <= 0 || slots <= 0 {
		return nil, fmt.Errorf("model: context %d and slots %d must be positive", ctx, slots)
	}
	r := &CPU{ownership: newOwnership(slots), m: m, ctx: ctx, factors: m.RopeFactorsFor(ctx)}
	r.k, r.v = make([][][]float32, slots), make([][][]float32, slots)
	for s := range slots {
		for i := range m.Layers {
			// A layer past Gemma 4's KV-sharing boundary reads an earlier
			// layer's cache and keeps none.
			var k, v []float32
			if kv := c.Shape(i).KVLayer; kv != i {
				k, v = r.k[s][kv], r.v[s][kv]
			} else {
				k, v = make([]float32, ctx*c.LayerKVDim(i)), make([]float32, ctx*c.LayerKVDim(i))
			}
			r.k[s], r.v[s] = append(r.k[s], k), append(r.v[s], v)
		}
	}
	for i := range m.Layers {
		lv, err := m.Layers[i].Vectors()
		if err != nil {
			return nil, err
		}
		r.layers = append(r.layers, lv)
	}
	var err error
	if r.outNorm, err = m.OutNorm.F32(); err != nil {
		return nil, err
	}
	if m.PLEProjNorm != nil {
		if r.pleNorm, err = m.PLEProjNorm.F32(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Context implements Runner.
func (r *CPU) Context() int { return r.ctx }

// Model implements Runner.
func (r *CPU) Model() *Model { return r.m }

// Close implements Runner.
func (r *CPU) Close() { r.k, r.v = nil, nil }

// Forward implements Runner.
func (r *CPU) Forward(tokens []int32, pos int, out Output) (Result, error) {
	return r.ForwardSlot(0, tokens, pos, out)
}

// Decode implements Runner: each step by itself, the reference a batched
// decode is checked against.
func (r *CPU) Decode(steps []Step) ([]Result, error) {
	if err := checkDecode(r, steps); err != nil {
		return nil, err
	}
	res := make([]Result, len(steps))
	for i, s := range steps {
		var err error
		if res[i], err = r.ForwardSlot(s.Slot, []int32{s.Token}, s.Pos, Output{}); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ForwardSlot implements Runner: embedding → for each layer: norm, q/k/v,
// RoPE, attention over the slot's cache, output projection, residual, norm,
// gated feed-forward, residual → final norm → logits.
func (r *CPU) ForwardSlot(slot int, tokens []int32, pos int, out Output) (Result, error) {
	m, c := r.m, &r.m.Config
	if err := checkSlot(r, slot); err != nil {
		return Result{}, err
	}
	if err := checkForward(m, r.ctx, tokens, pos, out); err != nil {
		return Result{}, err
	}
	if r.k == nil {
		return Result{}, fmt.Errorf("model: CPU runner is closed")
	}
	n, d := len(tokens), c.Hidden

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

	return r.forward(slot, x, tokens, pos, out, false)
}

// ForwardEmbeds implements Runner.
func (r *CPU) ForwardEmbeds(slot int, rows []float32, pos int, out Output) (Result, error) {
	if _, err := checkEmbeds(r, slot, rows, pos, out); err != nil {
		return Result{}, err
	}
	if r.k == nil {
		return Result{}, fmt.Errorf("model: CPU runner is closed")
	}
	var tokens []int32
	if r.m.PLE != nil {
		tokens = make([]int32, len(rows)/r.m.Config.Hidden) // the per-layer inputs' token 0
	}
	return r.forward(slot, slices.Clone(rows), tokens, pos, out, true)
}

// forward runs the blocks and the head over x, the batch's input rows (the
// tokens' embeddings, or rows given as they are with batch set, whose
// tokens are nil).
func (r *CPU) forward(slot int, x []float32, tokens []int32, pos int, out Output, batch bool) (Result, error) {
	m, c := r.m, &r.m.Config
	d := c.Hidden
	n := len(x) / d
	var ple *PLEInputs
	if m.PLE != nil {
		var err error
		if ple, err = m.PLEInputsCPU(tokens, x, r.pleNorm); err != nil {
			return Result{}, err
		}
	}

	if c.AltUp > 0 {
		var err error
		if x, err = m.AltUpStreamsCPU(x, n); err != nil {
			return Result{}, err
		}
	}
	// Every product gains the adapters' corrections.
	mul := func(w *Weight, x []float32) ([]float32, error) {
		y, err := matmul(w, x, len(x)/w.Cols)
		if err != nil {
			return nil, err
		}
		applyLoRA(loraParts(r.loras, w), x, y, len(x)/w.Cols)
		return y, nil
	}
	for i := range m.Layers {
		ws := m.Layers[i].Projections()
		var err error
		x, err = m.ForwardLayerCPU(i, x, n, CPULayer{
			Vectors: &r.layers[i],
			Mul:     func(p Proj, x []float32, _ int) ([]float32, error) { return mul(ws[p], x) },
			Factors: r.factors, Pos: pos, K: r.k[slot][i], V: r.v[slot][i], PLE: ple, Batch: batch,
		}, nil)
		if err != nil {
			return Result{}, err
		}
	}

	if c.AltUp > 0 {
		var err error
		if x, err = m.altUpMergeCPU(x, n); err != nil {
			return Result{}, err
		}
	}
	if out.Hidden {
		return Result{Hidden: ref.RMSNorm(x, r.outNorm, ref.NormArgs{Rows: n, Dim: d, Eps: c.Eps})}, nil
	}
	// Logits: Output · norm(x), soft-capped (Gemma 2), for the last token or
	// every one.
	rows := n
	if !out.All {
		x, rows = x[(n-1)*d:], 1
	}
	logits, err := mul(m.Output, ref.RMSNorm(x, r.outNorm, ref.NormArgs{Rows: rows, Dim: d, Eps: c.Eps}))
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
	if workers <= 1 || a.Batch {
		// A batch mask spans the whole batch: its queries are not cut
		// into runs of their own.
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
	r.forget()
	return nil
}
