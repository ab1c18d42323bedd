package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/units"
)

// GPUOptions size a GPU runner.
type GPUOptions struct {
	// Context is the KV cache's length in positions; 0 means the model's
	// own context, at most DefaultContext.
	Context int
	// Slots is how many sequences the runner serves at once, each with its
	// own Context-position KV cache (Runner.Decode); 0 means 1.
	Slots int
	// Batch is the most prompt tokens one chain evaluates; longer prompts
	// are prefilled in batches. 0 means 512, llama.cpp's default ubatch.
	Batch int
	// Budget, when nonzero, is the device memory the runner may use; a model
	// whose estimate exceeds it is refused before anything is allocated.
	Budget uint64
	// Progress, when set, is told the weight bytes uploaded so far and the
	// total, after each tensor.
	Progress func(done, total int64)
	// F32Activations keeps every product on f32 activations. By default a
	// decoded token's products with Q4_K and Q6_K weights, and Q8_0 ones
	// where the device's compiler takes dot4I8Packed (q8DecodeTypes),
	// quantize their input to 8 bits first for ops.MatVecQ8, as llama.cpp
	// does: the same results within the activations' quantization, and an
	// 8B Q4_K_M token 1.6x as fast on an H200 (docs/performance.md); and
	// with dot4I8Packed a prompt's products with Q4_K, Q6_K and Q8_0
	// weights do the same for ops.MatMulQ8 (q8Prefills).
	F32Activations bool
}

// GPU is the forward pass on a WebGPU device: weights uploaded once as
// stored, activations and the KV cache in f32 buffers made once, and every
// Forward one chain (one command encoder, one submit) per batch of tokens,
// so a decoded token costs one submit and creates no buffer or bind group.
type GPU struct {
	ownership
	m     *Model
	dev   *gpu.Device
	ctx   int
	batch int
	// keepFirst, when set, is 1 + the dispatches record keeps
	// (ProfileDecode's prefixes).
	keepFirst int
	// logitRows bounds the rows of an all-positions Forward per chain: the
	// logits buffer must fit one storage binding (128 MiB on lavapipe is
	// 261 rows of a 128256-token vocabulary).
	logitRows int

	w *GPUWeights // merged layout

	x, xn, qkv, q, att, tmp, gate, up *gpu.Buffer
	pleProj, pleTok, pleG, pleH       *gpu.Buffer        // Gemma 4's per-layer embeddings; nil without
	pleRows                           []float32          // host rows of the batch's per-layer table
	streams, pred, first, laurel      *gpu.Buffer        // Gemma 3n's AltUp streams and scratch; nil without
	moe                               *GPUMoEActivations // a mixture of experts' buffers; nil without
	xq                                *gpu.Buffer        // 8-bit activations (a batch's with q8Prefill); nil with F32Activations
	q8Prefill                         bool               // prompts' products run on 8-bit activations where their weights allow
	last, logits                      *gpu.Buffer
	kc, vc                            [][]*gpu.Buffer // per slot, per layer
	rowQKV, rowQ, rowAtt              *gpu.Buffer     // a batched decode's one-token scratch; nil with one slot
	attScratch                        *gpu.Buffer
	sampleScratch, top                *gpu.Buffer
	penIDs, penCounts                 *gpu.Buffer

	owned []*gpu.Buffer
	embed []float32 // host rows of the batch's embeddings

	next    *step // the decode step recorded ahead, if any
	penUsed int   // penalty entries the last step wrote

	// LoRA adapters (SetAdapters): the host copies for the embedding rows,
	// the head's pair, the device tensors and the rank-sized scratch.
	loras       []LoRA
	loraLayers  [][NumProj]*gpuLoRA
	loraOutput  *gpuLoRA
	loraTensors []*gpu.Tensor
	loraT       *gpu.Buffer

	f32Activations   bool
	progress         func(done, total int64)
	uploaded, weight int64 // bytes uploaded and to upload, for progress
}

// gpuLoRA is one projection's adapters on the device: every adapter's A
// stacked (Σrank × cols) and every B side by side, each scaled by its
// adapter's scale (rows × Σrank), so that any number of adapters costs two
// f32 matmuls, x·Aᵀ into the scratch and its product with Bᵀ added to the
// projection's output.
type gpuLoRA struct {
	a, b *gpu.Tensor
	rank int
}

// DefaultContext caps the KV cache when the caller does not choose: the
// model's own context, at most 8192 positions (Llama 3.1's 131072 would take
// 16 GiB of f32 cache on an 8B model).
const DefaultContext = 8192

// MaxPenaltyTokens bounds the distinct tokens a penalty covers on the GPU
// per step (the sampler's repeat window is 64 by default); a session
// samples on the host past it.
const MaxPenaltyTokens = 4096

// NewGPU uploads m to dev and allocates its buffers.
func NewGPU(dev *gpu.Device, m *Model, o GPUOptions) (*GPU, error) {
	c := &m.Config
	ctx := o.Context
	if ctx == 0 {
		ctx = min(c.Context, DefaultContext)
	}
	batch := o.Batch
	if batch == 0 {
		batch = 512
	}
	if m.Config.Bidirectional {
		batch = ctx // an embedding model's input runs in one chain (Forward)
	}
	if ctx <= 0 || batch <= 0 {
		return nil, fmt.Errorf("model: context %d and batch %d must be positive", ctx, batch)
	}
	batch = min(batch, ctx)
	limit := dev.Limits.MaxStorageBufferBindingSize
	// Every activation buffer must fit one storage binding; the widest row
	// is gate and up fused (2·FF floats: 295 KB for Gemma 2 27B, so at most
	// 455 tokens a batch under lavapipe's 128 MiB), or q, k and v side by side.
	widest := uint64(max(2*c.FF, c.QDim()+2*c.KVDim(), c.Hidden)) * 4
	if e := c.MoE; e != nil {
		// A token's experts' gate and up, and their outputs.
		widest = max(widest, uint64(e.Used*max(2*e.FF, c.Hidden))*4)
	}
	if widest > limit {
		return nil, fmt.Errorf("model: one token's activations (%d bytes) are over the device's %d-byte storage binding limit", widest, limit)
	}
	batch = min(batch, int(limit/widest))
	slots := max(o.Slots, 1)
	r := &GPU{ownership: newOwnership(slots), m: m, dev: dev, ctx: ctx, batch: batch, progress: o.Progress, f32Activations: o.F32Activations}
	r.logitRows = int(min(uint64(batch), limit/(4*uint64(c.Vocab))))
	if r.logitRows < 1 {
		return nil, fmt.Errorf("model: one row of %d logits is over the device's %d-byte storage binding limit", c.Vocab, limit)
	}
	if most := min(batch, r.logitRows); slots > most {
		// A decode of every slot is one batch, its logits one binding.
		return nil, fmt.Errorf("model: %d slots decode as one batch, and this device and batch hold at most %d", slots, most)
	}

	est := m.Memory(ctx, batch).Slots(slots)
	if o.Budget > 0 && uint64(est.Total()) > o.Budget {
		return nil, fmt.Errorf("model: %s needs about %s of GPU memory at a %d-token context (%s), over the %s available; choose a smaller context or quantization", m.describe(), units.Bytes(uint64(est.Total())), ctx, est, units.Bytes(o.Budget))
	}
	if kv := uint64(ctx) * uint64(c.KVDim()) * 4; kv > limit {
		return nil, fmt.Errorf("model: a %d-token KV cache is %d bytes per layer, over the device's %d-byte storage binding limit; choose a context of at most %d", ctx, kv, limit, limit/(uint64(c.KVDim())*4))
	}
	if ple := uint64(batch) * uint64(c.Layers*c.PerLayerInput) * 4; ple > limit {
		return nil, fmt.Errorf("model: a batch's per-layer embeddings are %d bytes, over the device's %d-byte storage binding limit; choose a batch of at most %d", ple, limit, limit/(uint64(c.Layers*c.PerLayerInput)*4))
	}

	err := r.upload()
	if err == nil {
		err = r.allocate()
	}
	if err != nil {
		r.Close()
		if errors.Is(err, gpu.ErrOutOfMemory) {
			return nil, fmt.Errorf("model: %s needs about %s of GPU memory at a %d-token context (%s), more than %s has free; choose a smaller context or quantization: %w", m.describe(), units.Bytes(uint64(est.Total())), ctx, est, dev.Info.Label(), err)
		}
		return nil, err
	}
	return r, nil
}

func (r *GPU) upload() error {
	r.weight = r.m.Memory(r.ctx, r.batch).Weights
	var err error
	r.w, err = UploadWeights(r.dev, r.m, GPUWeightOptions{Merge: true, Factors: r.m.RopeFactorsFor(r.ctx), Sent: func(n int64) {
		r.uploaded += n
		if r.progress != nil {
			r.progress(r.uploaded, r.weight)
		}
	}})
	return err
}

func (r *GPU) allocate() error {
	c := &r.m.Config
	b, d := r.batch, c.Hidden
	var err error
	alloc := func(dst **gpu.Buffer, label string, floats int) {
		if err == nil {
			*dst, err = r.scratch(label, floats)
		}
	}
	alloc(&r.x, "x", b*d)
	alloc(&r.xn, "xn", b*d)
	alloc(&r.tmp, "tmp", b*d)
	alloc(&r.qkv, "qkv", b*(c.QDim()+2*c.KVDim()))
	alloc(&r.q, "q", b*c.QDim())
	alloc(&r.att, "att", b*c.QDim())
	alloc(&r.gate, "gate", 2*b*c.FF) // gate, or gate and up fused
	alloc(&r.up, "up", b*c.FF)
	alloc(&r.last, "last", d)
	if !r.f32Activations {
		// A batched decode quantizes a row per token, up to ops.MaxQ8Rows;
		// a prompt's products, every row of the batch.
		rows := min(r.Slots(), ops.MaxQ8Rows)
		r.q8Prefill = q8PrefillOn(r.dev)
		if r.q8Prefill {
			rows = max(rows, b)
		}
		alloc(&r.xq, "xq", int(ops.Q8Bytes(max(d, c.QDim(), c.FF), rows)/4))
	}
	alloc(&r.logits, "logits", r.logitRows*c.Vocab)
	alloc(&r.top, "top", 2*ops.MaxTopK)
	alloc(&r.penIDs, "penalty.ids", MaxPenaltyTokens)
	alloc(&r.penCounts, "penalty.counts", MaxPenaltyTokens)
	if err != nil {
		return err
	}
	r.sampleScratch, err = r.scratchBytes("sample.scratch", max(ops.SampleScratchBytes(c.Vocab, ops.MaxTopK), 4))
	if err != nil {
		return err
	}
	r.attScratch, err = r.scratchBytes("attention.scratch", max(ops.AttentionScratchBytes(r.decodeArgs(r.ctx-1)), 4))
	if err != nil {
		return err
	}
	r.kc, r.vc = make([][]*gpu.Buffer, r.Slots()), make([][]*gpu.Buffer, r.Slots())
	for s := range r.Slots() {
		for i := range c.Layers {
			// A layer past Gemma 4's KV-sharing boundary reads an earlier
			// layer's cache and keeps none.
			var k, v *gpu.Buffer
			if kv := c.Shape(i).KVLayer; kv != i {
				k, v = r.kc[s][kv], r.vc[s][kv]
			} else {
				alloc(&k, fmt.Sprintf("cache.%d.k.%d", s, i), r.ctx*c.LayerKVDim(i))
				alloc(&v, fmt.Sprintf("cache.%d.v.%d", s, i), r.ctx*c.LayerKVDim(i))
			}
			r.kc[s], r.vc[s] = append(r.kc[s], k), append(r.vc[s], v)
		}
	}
	if r.Slots() > 1 {
		alloc(&r.rowQKV, "decode.row.qkv", c.QDim()+2*c.KVDim())
		alloc(&r.rowQ, "decode.row.q", c.QDim())
		alloc(&r.rowAtt, "decode.row.att", c.QDim())
	}
	if p := c.PerLayerInput; p > 0 {
		alloc(&r.pleProj, "ple.proj", b*c.Layers*p)
		alloc(&r.pleTok, "ple.tok", b*c.Layers*p)
		alloc(&r.pleG, "ple.gate", b*p)
		alloc(&r.pleH, "ple.gated", b*p)
		r.pleRows = make([]float32, b*c.Layers*p)
	}
	if c.AltUp > 0 {
		alloc(&r.streams, "altup.streams", c.AltUp*b*d)
		alloc(&r.pred, "altup.pred", c.AltUp*b*d)
		alloc(&r.first, "altup.first", b*d)
		alloc(&r.laurel, "laurel", b*r.m.Layers[0].LaurelL.Rows)
	}
	if c.MoE != nil {
		r.moe = NewGPUMoEActivations(c, b, alloc)
	}
	r.embed = make([]float32, b*d)
	return err
}

func (r *GPU) scratch(label string, floats int) (*gpu.Buffer, error) {
	return r.scratchBytes(label, uint64(floats)*4)
}

func (r *GPU) scratchBytes(label string, n uint64) (*gpu.Buffer, error) {
	b, err := r.dev.NewBuffer(label, n)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	r.owned = append(r.owned, b)
	return b, nil
}

// Context implements Runner.
func (r *GPU) Context() int { return r.ctx }

// Model implements Runner.
func (r *GPU) Model() *Model { return r.m }

// Device is the device the runner computes on.
func (r *GPU) Device() *gpu.Device { return r.dev }

// Close implements Runner: it frees every buffer and tensor.
func (r *GPU) Close() {
	if r.next != nil {
		r.next.ch.Discard()
		r.next = nil
	}
	// Buffers must outlive the work that reads them.
	_ = r.dev.Wait()
	r.w.Release()
	for _, b := range r.owned {
		b.Release()
	}
	r.w, r.owned = nil, nil
	r.releaseLoRA()
	r.x = nil // Forward reports the runner closed
}

// decodeArgs is the attention of one token at pos in a global (unwindowed)
// layer: what the attention scratch is sized for, the most splits any
// layer's decode asks for.
func (r *GPU) decodeArgs(pos int) ops.AttentionArgs {
	c := &r.m.Config
	return ops.AttentionArgs{HeadDim: c.HeadDim, Heads: c.Heads, KVHeads: c.KVHeads, Tokens: 1, Pos0: pos, KVLen: pos + 1,
		Scale: c.AttnScale, Softcap: c.AttnSoftcap}
}

// Forward implements Runner.
func (r *GPU) Forward(tokens []int32, pos int, out Output) (Result, error) {
	return r.ForwardSlot(0, tokens, pos, out)
}

// ForwardSlot implements Runner. Batches of up to Batch tokens (or of as
// many logit rows as one binding holds, with out.All) each run as one
// chain; the last one also computes the logits, penalties and top-k, and
// reads the answer back in the same submit.
func (r *GPU) ForwardSlot(slot int, tokens []int32, pos int, out Output) (Result, error) {
	if err := checkSlot(r, slot); err != nil {
		return Result{}, err
	}
	if err := checkForward(r.m, r.ctx, tokens, pos, out); err != nil {
		return Result{}, err
	}
	batch, err := r.batchFor(out)
	if err != nil {
		return Result{}, err
	}
	if r.m.Config.Bidirectional && len(tokens) > batch {
		// Each token attends to the ones after it: the input runs in one
		// chain or not at all.
		return Result{}, fmt.Errorf("model: %d tokens to embed, over the %d this GPU evaluates at once (its storage binding limit)", len(tokens), batch)
	}
	var res Result
	for lo := 0; lo < len(tokens); lo += batch {
		hi := min(lo+batch, len(tokens))
		part, err := r.evaluate(slot, batchInput{tokens: tokens[lo:hi]}, pos+lo, out, hi == len(tokens))
		if err != nil {
			return Result{}, err
		}
		res.Logits = append(res.Logits, part.Logits...)
		res.Hidden = append(res.Hidden, part.Hidden...)
		res.IDs, res.Values = part.IDs, part.Values
	}
	return res, nil
}

// ForwardEmbeds implements Runner: the rows go through one chain, so they
// must fit one batch.
func (r *GPU) ForwardEmbeds(slot int, rows []float32, pos int, out Output) (Result, error) {
	n, err := checkEmbeds(r, slot, rows, pos, out)
	if err != nil {
		return Result{}, err
	}
	batch, err := r.batchFor(out)
	if err != nil {
		return Result{}, err
	}
	if n > batch {
		return Result{}, fmt.Errorf("model: %d embedding rows (an image's tokens) go in one batch, over the %d this runner evaluates at once (its prompt batch, or the GPU's storage binding limit)", n, batch)
	}
	return r.evaluate(slot, batchInput{rows: rows}, pos, out, true)
}

// batchFor checks that the runner is open and that out's penalty list
// fits, and returns the most tokens one chain evaluates for out.
func (r *GPU) batchFor(out Output) (int, error) {
	if r.x == nil {
		return 0, fmt.Errorf("model: GPU runner is closed")
	}
	if p := out.Penalty; p != nil && len(p.IDs) > MaxPenaltyTokens {
		return 0, fmt.Errorf("model: penalty over %d tokens, at most %d", len(p.IDs), MaxPenaltyTokens)
	}
	if out.All {
		return min(r.batch, r.logitRows), nil
	}
	return r.batch, nil
}

// batchInput is a batch's input: token ids, whose embeddings the host
// looks up, or rows given as they are (ForwardEmbeds).
type batchInput struct {
	tokens []int32
	rows   []float32
}

// DecodeKernels names, in order, the dispatches of one token decoded at
// pos with greedy sampling on the device, as a chat or hearth bench decodes
// it: the chain is recorded, not run. Per-dispatch launch cost is what
// bounds a small model's decode, so this is the count to keep low.
func (r *GPU) DecodeKernels(pos int) ([]string, error) {
	if r.x == nil {
		return nil, fmt.Errorf("model: GPU runner is closed")
	}
	if pos < 0 || pos >= r.ctx {
		return nil, fmt.Errorf("model: position %d is outside the %d-token context", pos, r.ctx)
	}
	s, err := r.record(stepKey{n: 1, pos: pos, topK: 1, logits: true}, nil)
	if err != nil {
		return nil, err
	}
	defer s.ch.Discard()
	return s.ch.Kernels(), nil
}

// stepKey is everything a chain's recording depends on: a chain records no
// token ids (they arrive as the embedding rows, written before submit), so
// the next decode step can be recorded before its token is known.
type stepKey struct {
	slot    int
	n, pos  int
	topK    int
	penalty bool
	pen     ops.PenaltyArgs
	logits  bool // the batch ends in logits: the prompt's last batch, or every batch with all
	all     bool
	hidden  bool // every batch ends in its final hidden states instead
	batch   bool // the causal mask lifted inside the batch (ForwardEmbeds)
}

// step is a recorded chain waiting for its inputs.
type step struct {
	key stepKey
	ch  *gpu.Chain
	rb  *gpu.Readback // nil when the batch returns nothing
}

// evaluate runs one batch: its recorded chain (the one recorded ahead if it
// fits), its inputs, one submit, and the readback.
func (r *GPU) evaluate(slot int, in batchInput, pos int, out Output, final bool) (Result, error) {
	n := len(in.tokens)
	if in.rows != nil {
		n = len(in.rows) / r.m.Config.Hidden
	}
	key := stepKey{slot: slot, n: n, pos: pos, logits: (final || out.All) && !out.Hidden, all: out.All, hidden: out.Hidden, batch: in.rows != nil}
	if final {
		key.topK = out.TopK
		if p := out.Penalty; p != nil {
			key.penalty = true
			key.pen = ops.PenaltyArgs{Vocab: r.m.Config.Vocab, Repeat: p.Repeat, Frequency: p.Frequency, Presence: p.Presence}
		}
	}
	s := r.next
	r.next = nil
	if s == nil || s.key != key || s.ch.Done() {
		if s != nil {
			s.ch.Discard()
		}
		var err error
		if s, err = r.record(key, nil); err != nil {
			return Result{}, err
		}
	}
	if err := r.inputs(in, key, out.Penalty); err != nil {
		s.ch.Discard()
		return Result{}, err
	}
	if err := s.ch.Submit(); err != nil {
		return Result{}, err
	}
	// While the GPU runs this step, record the one a decode loop asks for
	// next: one token at the next position with the same outputs. The
	// recording (about 1.4 ms for a 16-layer model on an H200's host) then
	// overlaps the GPU's work instead of following it. Any other call, or
	// another chain on the device, discards it.
	if key.n == 1 && key.logits && !key.all && pos+1 < r.ctx {
		next := key
		next.pos++
		if ns, err := r.record(next, nil); err == nil {
			ns.ch.Speculate()
			r.next = ns
		}
	}
	if s.rb == nil {
		return Result{}, nil
	}
	raw, err := s.rb.Bytes()
	if err != nil {
		return Result{}, err
	}
	if key.hidden {
		return Result{Hidden: gpu.F32From(raw)}, nil
	}
	k := key.topK
	switch {
	case k == 1:
		return Result{IDs: gpu.U32From(raw), Values: []float32{float32(math.NaN())}}, nil
	case k > 1 && k <= ops.MaxTopK:
		return Result{IDs: gpu.U32From(raw[:4*k]), Values: gpu.F32From(raw[4*k:])}, nil
	}
	logits := gpu.F32From(raw)
	if k > ops.MaxTopK {
		return finish(logits, Output{TopK: k}), nil
	}
	return Result{Logits: logits}, nil
}

// Decode implements Runner: the steps' tokens go through one chain, each
// product once for all of them, while each token's rotation, cache write
// and attention run on its own slot's cache (RecordLayer's Seqs); every
// row's logits come back in the same submit. The products run on 8-bit
// activations as a single token's do (ops.MatVecQ8 takes up to
// ops.MaxQ8Rows rows), so the steps go in groups of that many, a chain
// each. A group of one runs as a Forward of its slot, whose chain is the
// single token's fused one.
func (r *GPU) Decode(steps []Step) ([]Result, error) {
	if err := checkDecode(r, steps); err != nil {
		return nil, err
	}
	if r.x == nil {
		return nil, fmt.Errorf("model: GPU runner is closed")
	}
	// Groups of ops.MaxQ8Rows tokens: the most whose products one 8-bit
	// matvec takes, each weight read once for the group.
	var res []Result
	for lo := 0; lo < len(steps); lo += ops.MaxQ8Rows {
		part, err := r.decode(steps[lo:min(lo+ops.MaxQ8Rows, len(steps))])
		if err != nil {
			return nil, err
		}
		res = append(res, part...)
	}
	return res, nil
}

// decode runs one group of Decode's steps as one chain.
func (r *GPU) decode(steps []Step) ([]Result, error) {
	if len(steps) == 1 {
		st := steps[0]
		res, err := r.ForwardSlot(st.Slot, []int32{st.Token}, st.Pos, Output{})
		return []Result{res}, err
	}
	n, vocab := len(steps), r.m.Config.Vocab
	key := stepKey{n: n, logits: true, all: true}
	s, err := r.record(key, steps)
	if err != nil {
		return nil, err
	}
	tokens := make([]int32, n)
	for t, st := range steps {
		tokens[t] = st.Token
	}
	if err := r.inputs(batchInput{tokens: tokens}, key, nil); err != nil {
		s.ch.Discard()
		return nil, err
	}
	if err := s.ch.Submit(); err != nil {
		return nil, err
	}
	raw, err := s.rb.Bytes()
	if err != nil {
		return nil, err
	}
	logits := gpu.F32From(raw)
	res := make([]Result, n)
	for t := range res {
		res[t] = Result{Logits: logits[t*vocab : (t+1)*vocab : (t+1)*vocab]}
	}
	return res, nil
}

// inputs writes a batch's embedding rows and penalty lists; queue writes land
// before the chain submitted after them, and after the chains before.
func (r *GPU) inputs(in batchInput, key stepKey, pen *Penalty) error {
	m, c := r.m, &r.m.Config
	d := c.Hidden
	tokens := in.tokens
	if in.rows != nil {
		// Given rows (ForwardEmbeds) go in as they are, their per-layer
		// inputs those of token 0.
		if err := r.x.WriteF32(0, in.rows); err != nil {
			return err
		}
		if m.PLE != nil {
			if err := r.writePLE(make([]int32, len(in.rows)/d)); err != nil {
				return err
			}
		}
		return r.penalties(key, pen)
	}
	// The embedding lookup runs on the host, straight from the file: a
	// handful of rows per batch, any storage type, and no copy of the table
	// on the device unless the LM head shares it.
	x := r.embed[:len(tokens)*d]
	erb := m.Embed.RowBytes()
	for t, id := range tokens {
		row := x[t*d : (t+1)*d]
		if err := gguf.Dequantize(m.Embed.Type, m.Embed.Data[int(id)*erb:(int(id)+1)*erb], row); err != nil {
			return fmt.Errorf("model: %s row %d: %w", m.Embed.Name, id, err)
		}
		loraEmbed(loraParts(r.loras, m.Embed), int(id), row)
		if c.EmbedScale != 0 {
			for j := range row {
				row[j] *= c.EmbedScale
			}
		}
	}
	if err := r.x.WriteF32(0, x); err != nil {
		return err
	}
	if m.PLE != nil {
		if err := r.writePLE(tokens); err != nil {
			return err
		}
	}
	return r.penalties(key, pen)
}

// writePLE writes the tokens' rows of the per-layer embedding table.
func (r *GPU) writePLE(tokens []int32) error {
	rows := r.pleRows[:len(tokens)*r.m.PLE.Cols]
	if err := r.m.pleTokRows(tokens, rows); err != nil {
		return err
	}
	return r.pleTok.WriteF32(0, rows)
}

// penalties writes a batch's penalty lists, when its chain has them.
func (r *GPU) penalties(key stepKey, pen *Penalty) error {
	if !key.penalty {
		return nil
	}
	// The penalty dispatch always covers MaxPenaltyTokens entries (so that its
	// recording does not depend on the history); entries past this step's
	// list get count 0, which the kernel skips.
	counts := make([]uint32, max(len(pen.IDs), r.penUsed))
	copy(counts, pen.Counts)
	r.penUsed = len(pen.IDs)
	if len(pen.IDs) > 0 {
		if err := r.penIDs.Write(0, gpu.U32Bytes(pen.IDs)); err != nil {
			return err
		}
	}
	if len(counts) > 0 {
		if err := r.penCounts.Write(0, gpu.U32Bytes(counts)); err != nil {
			return err
		}
	}
	return nil
}

// record records the chain of one batch: key.n tokens of key.slot's
// sequence from key.pos, or, with seqs, one token of each of those
// sequences (a batched decode: key.n is len(seqs) and key.slot unused).
func (r *GPU) record(key stepKey, seqs []Step) (*step, error) {
	c := &r.m.Config
	n, pos, d := key.n, key.pos, c.Hidden
	ch, err := r.dev.NewChain("forward")
	if err != nil {
		return nil, err
	}
	if r.keepFirst > 0 {
		ch.KeepFirst(r.keepFirst - 1)
	}
	s := &step{key: key, ch: ch}
	fail := func(err error) (*step, error) {
		ch.Discard()
		return nil, err
	}
	try := func(e error) {
		if err == nil {
			err = e
		}
	}
	acts := GPUActivations{X: r.x, XN: r.xn, XN2: r.xn, QKV: r.qkv, Q: r.q, Att: r.att, AttScratch: r.attScratch,
		O: r.tmp, F: r.tmp, Gate: r.gate, Up: r.up, H: r.up, XQ: r.xq, Q8Prefill: r.q8Prefill,
		PLEProj: r.pleProj, PLETok: r.pleTok, PLEG: r.pleG, PLEH: r.pleH,
		Streams: r.streams, Pred: r.pred, First: r.first, Laurel: r.laurel, MoE: r.moe,
		RowQKV: r.rowQKV, RowQ: r.rowQ, RowAtt: r.rowAtt}
	if r.w.PLEModelProj != nil {
		// Every layer's per-layer input mixes in this projection of the
		// (scaled) embeddings, made once before layer 0.
		try(ops.MatMul(ch, r.w.PLEModelProj, r.x, r.pleProj, n))
	}
	if c.AltUp > 0 {
		r.w.RecordAltUpStreams(ch, r.x, r.streams, n, try)
	}
	normed := false // xn already holds this layer's attention norm of x
	for i := range r.w.Layers {
		a := acts
		a.K, a.V = r.kc[key.slot][i], r.vc[key.slot][i]
		args := GPULayerArgs{N: n, Pos: pos, Normed: normed, Batch: key.batch}
		if seqs != nil {
			args.Seqs = make([]SeqKV, len(seqs))
			for t, q := range seqs {
				args.Seqs[t] = SeqKV{Pos: q.Pos, K: r.kc[q.Slot][i], V: r.vc[q.Slot][i]}
			}
		}
		if i+1 < len(r.w.Layers) {
			args.Next = r.w.Layers[i+1].AttnNorm
		}
		if r.loraLayers != nil {
			l := &r.loraLayers[i]
			args.Adapted = func(p Proj) bool { return l[p] != nil }
			args.LoRA = func(ch *gpu.Chain, p Proj, x, y *gpu.Buffer, n int, o ops.MatmulOptions) error {
				return r.lora(ch, l[p], x, y, n, o)
			}
		}
		if normed, err = r.w.RecordLayer(ch, i, &a, args); err != nil {
			return fail(err)
		}
	}
	if c.AltUp > 0 {
		r.w.RecordAltUpMerge(ch, r.streams, r.tmp, r.pred, r.x, n, try)
	}
	if key.hidden {
		try(ops.RMSNorm(ch, r.x, r.w.OutNorm, r.xn, ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}))
		if err == nil {
			s.rb, err = ch.ReadBack(r.xn, 0, uint64(n*d)*4)
		}
		if err != nil {
			return fail(err)
		}
		return s, nil
	}
	if !key.logits {
		return s, nil
	}

	// Logits: Output · norm(x), soft-capped, for the last token or all;
	// then the penalties and the top-k of the last row, read back.
	rows, src := n, r.x
	if !key.all && n > 1 {
		// The norm reads rows from a buffer's start: the last row is
		// copied there (a decoded token's x is already that row).
		try(ops.CopyF32(ch, r.x, (n-1)*d, r.last, 0, d))
		rows, src = 1, r.last
	}
	switch {
	case r.xq != nil && rows == 1 && r.loraOutput == nil && q8Decodes(r.dev, r.w.Output):
		try(ops.MatMulQ8Normed(ch, r.w.Output, src, r.w.OutNorm, r.xq, r.logits, ops.NormArgs{Rows: 1, Dim: d, Eps: c.Eps}, ops.MatmulOptions{}))
	case r.xq != nil && rows == 1 && q8Decodes(r.dev, r.w.Output):
		// The head's LoRA reads the normed row: written out, then quantized.
		try(ops.RMSNorm(ch, src, r.w.OutNorm, r.xn, ops.NormArgs{Rows: 1, Dim: d, Eps: c.Eps}))
		try(ops.MatMulQ8Of(ch, r.w.Output, r.xn, r.xq, r.logits, 1, ops.MatmulOptions{}))
	case normFuses(rows, r.loraOutput != nil, r.w.Output):
		try(ops.MatVecNormed(ch, r.w.Output, src, r.w.OutNorm, r.logits, ops.NormArgs{Rows: 1, Dim: d, Eps: c.Eps}, ops.MatmulOptions{}))
	default:
		try(ops.RMSNorm(ch, src, r.w.OutNorm, r.xn, ops.NormArgs{Rows: rows, Dim: d, Eps: c.Eps}))
		try(ops.MatMul(ch, r.w.Output, r.xn, r.logits, rows))
	}
	try(r.lora(ch, r.loraOutput, r.xn, r.logits, rows, ops.MatmulOptions{}))
	nl := rows * c.Vocab
	if c.FinalSoftcap > 0 {
		try(ops.Softcap(ch, r.logits, r.logits, nl, c.FinalSoftcap))
	}
	if key.penalty {
		try(ops.Penalize(ch, r.logits, r.penIDs, r.penCounts, MaxPenaltyTokens, key.pen))
	}
	if err != nil {
		return fail(err)
	}
	switch k := key.topK; {
	case k == 1:
		if err = ops.Argmax(ch, r.logits, r.sampleScratch, r.top, c.Vocab); err == nil {
			s.rb, err = ch.ReadBack(r.top, 0, 4)
		}
	case k > 1 && k <= ops.MaxTopK:
		if err = ops.TopK(ch, r.logits, r.sampleScratch, r.top, c.Vocab, k); err == nil {
			s.rb, err = ch.ReadBack(r.top, 0, uint64(8*k))
		}
	default:
		s.rb, err = ch.ReadBack(r.logits, 0, uint64(nl)*4)
	}
	if err != nil {
		return fail(err)
	}
	return s, nil
}
