package training

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// GPU is the training step on the device, the CPU step's graph through
// engine/ops kernels: the frozen weights uploaded as stored by
// model.UploadWeights (quantized blocks, read by the matmul and
// matmul-backward kernels), each layer's forward recorded by
// model.GPUWeights.RecordLayer with its activations kept, the LoRA pairs,
// their gradients and AdamW moments in device buffers. One chain (one
// submit) runs a micro-batch: per example the forward, keeping each
// layer's input, the LM head tiled under the binding limit with the
// cross-entropy backward, then per layer, last first, the layer's forward
// again from its checkpoint and its backward; the pairs' gradients
// accumulate in place, and only the per-token losses come back. Another
// chain runs the optimizer step (global norm, clip, AdamW) with no
// readback but the norm.
type GPU struct {
	dev  *gpu.Device
	m    *model.Model
	c    *model.Config
	lora *LoRA

	maxTokens, batchTokens int // the longest example; tokens of a micro-batch
	tile                   int // logit rows per head tile

	w     *model.GPUWeights // the unmerged layout
	pairs []gpuPair

	// Inputs of a micro-batch: embedding rows, targets, per-token losses.
	emb, targets, loss *gpu.Buffer
	// ck[i] is layer i's input (ck[Layers] the last output).
	ck []*gpu.Buffer
	// The activations of one layer, and the gradients of its backward.
	xn, q, k, v, qIn, kIn, att, o, x2, xn2, gate, up, h, f    *gpu.Buffer
	ha                                                        [numTargets]*gpu.Buffer
	hs, dh                                                    *gpu.Buffer // scaled A·x; a pair's dH
	dres, dtmp, dff, dgate, dup, dxn, datt, dq, dk, dv, stats *gpu.Buffer
	attScratch, htile, logits, partials, norm                 *gpu.Buffer
	partials2                                                 *gpu.Buffer // GradNorm's
	// spare receives the output of a layer recomputed before its backward,
	// which reads only the intermediates.
	spare *gpu.Buffer
	// The embedding pair's: token ids, B's rows of them (H), dL/dH, and
	// the plan of dB's scatter-add. The head pair's A·x of a tile.
	ids, hEmb, dhEmb, plan, hHead *gpu.Buffer
	// Dropout's: a pair's input after the mask, and dH·A before it.
	xd, dl *gpu.Buffer

	// Gemma 4. vIn is v before its norm. kc and vc are the keys and
	// values of the layers whose cache later layers read (nil for the
	// others, which use k and v), and dkc, dvc the gradients those layers
	// send back; kvSent marks, in the backward being recorded, the
	// producers that received a first one (written, then added to).
	vIn              *gpu.Buffer
	kc, vc, dkc, dvc []*gpu.Buffer
	kvSent           []bool
	// The per-layer embeddings: the micro-batch's table rows (from the
	// host), one example's projection of its embeddings and its rows, the
	// layer's gate, gated slice, projection and input; the backward's
	// dL/d(gated slice) and dL/d(gate) and a scratch.
	pleRows, pleProj, pleTok, pleG, pleH, pleY, pleIn *gpu.Buffer
	dPLEH, dPLEG, dPLEScratch                         *gpu.Buffer

	// Gemma 3n: the checkpoints and spare hold a layer's streams. The
	// forward's active prediction (the block's input), predictions,
	// block output, corrected active stream, LAuReL's products and the
	// gate before its sparsity; the merge's unembedded streams and output.
	// The backward's gradients of the streams (two, swapped a layer), of
	// the predictions, of the first prediction, a row sum and LAuReL's
	// rank-wide product.
	active, pred, blockOut, first, laurelT, laurelR    *gpu.Buffer
	gateIn, unembedded, merged                         *gpu.Buffer
	dstreams, dstreams2, dpred, dfirst, dsum, dlaurelT *gpu.Buffer

	// A mixture of experts (nil without): the forward's router scores,
	// choices, groups and the slots' rows; the backward's gradients of the
	// slots' outputs and weights, of their activated rows, of their
	// [gate | up] rows, of their inputs (a row a slot) and of the router's
	// scores.
	moe                                    *model.GPUMoEActivations
	dMoEY, dMoEW, dMoEH, dMoEGateUp, dMoEX *gpu.Buffer
	dMoELogits                             *gpu.Buffer
	// Gemma 4's: the gradients of the experts' weighted sum, of the dense
	// feed-forward's output, of the experts' and of the router's inputs.
	dMoESum, dMoEF1, dMoEIn, dMoERouter *gpu.Buffer

	// dropoutStep is the dropout counter of the next Backward; drop and
	// token0 are the pass being recorded's: dropout on, and the place of
	// its example's first token in the micro-batch.
	dropoutStep uint64
	drop        bool
	token0      int

	// cut, when positive, splits a micro-batch's chain into submits of cut
	// passes (a layer's forward, its backward, the head), each waited for
	// and told to onPass: a step that runs for minutes on a CPU adapter
	// then shows movement. ch is the chain being recorded; passes and
	// passTotal count the micro-batch's passes.
	cut               int
	onPass            func(done, total int)
	ch                *gpu.Chain
	label             string
	passes, passTotal int

	tensors []*gpu.Tensor
	buffers []*gpu.Buffer
}

// gpuPair is one LoRA pair on the device: A and B as F32 tensors (what
// ops.MatMul multiplies by), their gradients and AdamW moments. B is held
// in pieces, one per projection it feeds: the whole of B, or each slice of
// a fused tensor's (Phi-3's q, k, v rows of attn_qkv) as a tensor of its
// own, so that ops.MatMul writes each projection's output. AdamW is
// elementwise and the clipping norm global, so stepping the pieces is
// stepping B.
type gpuPair struct {
	a          *gpu.Tensor
	dA, mA, vA *gpu.Buffer
	pieces     []gpuPiece
}

type gpuPiece struct {
	row0, rows int
	b          *gpu.Tensor
	dB, mB, vB *gpu.Buffer
}

// piece returns the piece of pair k that slot s reads.
func (g *GPU) piece(s slot) *gpuPiece {
	p := &g.pairs[s.k]
	for i := range p.pieces {
		if p.pieces[i].row0 == s.row0 {
			return &p.pieces[i]
		}
	}
	panic(fmt.Sprintf("training: pair %d has no piece at row %d", s.k, s.row0))
}

// NewGPU uploads m's weights as stored and lora's pairs to dev, and sizes
// the buffers for examples of at most maxTokens tokens and micro-batches
// of at most batchTokens.
func NewGPU(dev *gpu.Device, m *model.Model, lora *LoRA, maxTokens, batchTokens int) (*GPU, error) {
	return newGPU(dev, m, lora, maxTokens, batchTokens, nil)
}

// newGPU is NewGPU telling uploaded, if not nil, the bytes of weights and
// pairs on the device so far and their total after each tensor.
func newGPU(dev *gpu.Device, m *model.Model, lora *LoRA, maxTokens, batchTokens int, uploaded func(done, total int64)) (*GPU, error) {
	c := &m.Config
	if err := supported(c); err != nil {
		return nil, err
	}
	if maxTokens <= 0 || batchTokens < maxTokens || maxTokens > c.Context {
		return nil, fmt.Errorf("training: GPU step for examples of %d tokens in batches of %d (context %d)", maxTokens, batchTokens, c.Context)
	}
	if len(lora.index) != len(m.Layers) {
		return nil, fmt.Errorf("training: the adapter has %d layers, the model %d", len(lora.index), len(m.Layers))
	}
	limit := dev.Limits.MaxStorageBufferBindingSize
	if w := uint64(maxTokens) * uint64(max(c.FF, c.QDim(), c.Hidden, c.Layers*c.PerLayerInput)) * 4; w > limit {
		return nil, fmt.Errorf("training: %d tokens of activations (%d bytes) are over the device's %d-byte storage binding limit", maxTokens, w, limit)
	}
	g := &GPU{dev: dev, m: m, c: c, lora: lora, maxTokens: maxTokens, batchTokens: batchTokens}
	// The LM head's T×V logits pass the binding limit for a big vocabulary
	// (262144 × 4 bytes a row: 128 rows under lavapipe's 128 MiB), so the
	// head runs in tiles of rows.
	g.tile = int(min(uint64(maxTokens), limit/(4*uint64(c.Vocab))))
	if g.tile < 1 {
		return nil, fmt.Errorf("training: one row of %d logits is over the device's %d-byte storage binding limit", c.Vocab, limit)
	}
	if err := g.upload(uploaded); err != nil {
		g.Close()
		return nil, err
	}
	if err := g.allocate(); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func (g *GPU) buffer(label string, floats int) (*gpu.Buffer, error) {
	b, err := g.dev.NewBuffer(label, uint64(max(floats, 1))*4)
	if err == nil {
		g.buffers = append(g.buffers, b)
	}
	return b, err
}

func (g *GPU) tensor(name string, typ gguf.Type, rows, cols int, data []byte) (*gpu.Tensor, error) {
	t, err := g.dev.NewTensor(name, typ, rows, cols, data, 0)
	if err == nil {
		g.tensors = append(g.tensors, t)
	}
	return t, err
}

// uploadBytes is what upload puts on the device, in the measure its
// progress counts: the weights as model.Memory counts them and the pairs'
// f32 bytes.
func (g *GPU) uploadBytes() int64 {
	n := g.m.Memory(1, 1).Weights
	for _, p := range g.lora.Pairs {
		n += 4 * int64(len(p.A)+len(p.B))
	}
	return n
}

func (g *GPU) upload(uploaded func(done, total int64)) error {
	m := g.m
	var err error
	var done, total int64
	if uploaded != nil {
		total = g.uploadBytes()
		uploaded(0, total)
	}
	sent := func(n int64) {
		if done += n; uploaded != nil && err == nil {
			uploaded(done, total)
		}
	}
	g.w, err = model.UploadWeights(g.dev, m, model.GPUWeightOptions{Factors: m.RopeFactors, Sent: sent})
	if err != nil {
		return fmt.Errorf("training: %w", err)
	}
	state := func(label string, n int, dst ...**gpu.Buffer) error {
		for _, d := range dst {
			var err error
			if *d, err = g.buffer(label, n); err != nil {
				return err
			}
		}
		return nil
	}
	for k, p := range g.lora.Pairs {
		var gp gpuPair
		if gp.a, err = g.tensor(p.Name+".lora_a", gguf.TypeF32, p.Rank, p.Cols, gpu.F32Bytes(p.A)); err != nil {
			return err
		}
		if err := state(p.Name+".lora_a state", len(p.A), &gp.dA, &gp.mA, &gp.vA); err != nil {
			return err
		}
		for _, s := range g.lora.slots(k) {
			pc := gpuPiece{row0: s.row0, rows: s.rows}
			name := fmt.Sprintf("%s.lora_b[%d:%d]", p.Name, s.row0, s.row0+s.rows)
			if pc.b, err = g.tensor(name, gguf.TypeF32, s.rows, p.Rank, gpu.F32Bytes(p.rowsB(p.B, s))); err != nil {
				return err
			}
			if err := state(name+" state", s.rows*p.Rank, &pc.dB, &pc.mB, &pc.vB); err != nil {
				return err
			}
			gp.pieces = append(gp.pieces, pc)
		}
		g.pairs = append(g.pairs, gp)
		sent(4 * int64(len(p.A)+len(p.B)))
	}
	return nil
}

func (g *GPU) allocate() error {
	c := g.c
	T, d, qd, kvd, ff := g.maxTokens, c.Hidden, c.QDim(), c.KVDim(), c.FF
	var err error
	alloc := func(label string, floats int) *gpu.Buffer {
		if err != nil {
			return nil
		}
		var b *gpu.Buffer
		b, err = g.buffer(label, floats)
		return b
	}
	g.emb = alloc("embeddings", g.batchTokens*d)
	g.targets = alloc("targets", g.batchTokens)
	g.loss = alloc("loss", g.batchTokens)
	// A checkpoint is a layer's input: its streams with Gemma 3n's AltUp.
	streams := max(c.AltUp, 1)
	for i := range c.Layers + 1 {
		g.ck = append(g.ck, alloc(fmt.Sprintf("checkpoint %d", i), streams*T*d))
	}
	for _, b := range []struct {
		dst   **gpu.Buffer
		label string
		n     int
	}{
		{&g.xn, "xn", T * d}, {&g.q, "q", T * qd}, {&g.k, "k", T * kvd}, {&g.v, "v", T * kvd},
		{&g.qIn, "q in", T * qd}, {&g.kIn, "k in", T * kvd}, {&g.att, "att", T * qd},
		{&g.o, "o", T * d}, {&g.x2, "x2", T * d}, {&g.xn2, "xn2", T * d},
		{&g.gate, "gate", T * ff}, {&g.up, "up", T * ff}, {&g.h, "h", T * ff}, {&g.f, "f", T * d}, {&g.spare, "recomputed output", streams * T * d},
		{&g.hs, "lora h scaled", T * g.lora.Config.Rank}, {&g.dh, "lora dh", T * g.lora.Config.Rank},
		{&g.dres, "d residual", T * d}, {&g.dtmp, "d tmp", T * d}, {&g.dff, "d ff", T * ff},
		{&g.dgate, "d gate", T * ff}, {&g.dup, "d up", T * ff}, {&g.dxn, "d xn", T * d},
		{&g.datt, "d att", T * qd}, {&g.dq, "d q", T * qd}, {&g.dk, "d k", T * kvd}, {&g.dv, "d v", T * kvd},
		{&g.stats, "attention stats", ops.AttentionStatsFloats(ops.AttentionArgs{Tokens: T, Heads: c.Heads})},
		// A 4-byte scratch selects attention's single-pass kernel: training
		// has every query of the sequence, no split is needed.
		{&g.attScratch, "attention scratch", 1},
		{&g.htile, "head tile", g.tile * d}, {&g.logits, "logits", g.tile * c.Vocab},
		{&g.partials, "head partials", 4 * g.tile * d},
		{&g.norm, "grad norm", 2},
	} {
		*b.dst = alloc(b.label, b.n)
	}
	for t := range numTargets {
		g.ha[t] = alloc("lora h "+Targets[t], T*g.lora.Config.Rank)
	}
	if c.VNorm {
		g.vIn = alloc("v in", T*kvd)
	}
	g.kc, g.vc = make([]*gpu.Buffer, c.Layers), make([]*gpu.Buffer, c.Layers)
	g.dkc, g.dvc, g.kvSent = make([]*gpu.Buffer, c.Layers), make([]*gpu.Buffer, c.Layers), make([]bool, c.Layers)
	for i := range c.Layers {
		if j := c.Shape(i).KVLayer; j != i && g.kc[j] == nil {
			kd := T * c.LayerKVDim(j)
			g.kc[j], g.vc[j] = alloc(fmt.Sprintf("shared k %d", j), kd), alloc(fmt.Sprintf("shared v %d", j), kd)
			g.dkc[j], g.dvc[j] = alloc(fmt.Sprintf("d shared k %d", j), kd), alloc(fmt.Sprintf("d shared v %d", j), kd)
		}
	}
	if c.AltUp > 0 {
		all := c.AltUp * T * d
		g.active, g.pred, g.blockOut, g.first = alloc("altup active", T*d), alloc("altup pred", all), alloc("block out", T*d), alloc("altup first", T*d)
		g.laurelT, g.laurelR = alloc("laurel t", T*g.m.Layers[0].LaurelL.Rows), alloc("laurel r", T*d)
		g.gateIn, g.unembedded, g.merged = alloc("gate in", T*ff), alloc("altup unembedded", all), alloc("altup merged", T*d)
		g.dstreams, g.dstreams2, g.dpred = alloc("d streams", all), alloc("d streams 2", all), alloc("d altup pred", all)
		g.dfirst, g.dsum, g.dlaurelT = alloc("d altup first", T*d), alloc("d sum", T*d), alloc("d laurel t", T*g.m.Layers[0].LaurelL.Rows)
	}
	if p := c.PerLayerInput; p > 0 {
		g.pleRows = alloc("ple rows", g.batchTokens*c.Layers*p)
		g.pleProj, g.pleTok = alloc("ple proj", T*c.Layers*p), alloc("ple tok", T*c.Layers*p)
		g.pleG, g.pleH, g.pleIn = alloc("ple gate", T*p), alloc("ple gated", T*p), alloc("ple input", T*p)
		g.pleY = alloc("ple y", T*d)
		g.dPLEH, g.dPLEG, g.dPLEScratch = alloc("d ple gated", T*p), alloc("d ple gate", T*p), alloc("d ple scratch", T*p)
	}
	if e := c.MoE; e != nil {
		g.moe = model.NewGPUMoEActivations(c, T, func(dst **gpu.Buffer, label string, floats int) { *dst = alloc(label, floats) })
		slots := T * e.Used
		g.dMoEY, g.dMoEW, g.dMoEX = alloc("d moe y", slots*d), alloc("d moe weights", slots), alloc("d moe x", slots*d)
		g.dMoEH, g.dMoEGateUp = alloc("d moe h", slots*e.FF), alloc("d moe gate up", 2*slots*e.FF)
		g.dMoELogits = alloc("d moe logits", T*e.Experts)
		if e.Dense {
			g.dMoESum, g.dMoEF1 = alloc("d moe sum", T*d), alloc("d moe dense", T*d)
			g.dMoEIn, g.dMoERouter = alloc("d moe in", T*d), alloc("d moe router in", T*d)
		}
	}
	r, B := g.lora.Config.Rank, g.batchTokens
	if g.lora.embed >= 0 {
		g.ids = alloc("token ids", B)
		g.hEmb = alloc("lora embed h", B*r)
		g.dhEmb = alloc("lora embed dh", B*r)
		g.plan = alloc("lora embed scatter plan", 3*B+1)
	}
	if g.lora.head >= 0 {
		g.hHead = alloc("lora head h", g.tile*r)
	}
	if g.lora.Config.Dropout > 0 {
		g.xd = alloc("lora dropout x", T*max(d, qd, ff))
		g.dl = alloc("lora dropout dx", T*max(d, qd, ff))
	}
	if err != nil {
		return err
	}
	var lengths []int
	for _, gb := range g.gradBuffers() {
		lengths = append(lengths, gb.N)
	}
	g.partials2, err = g.buffer("grad norm partials", ops.GradNormPartials(lengths...))
	return err
}

// gradBuffers lists every gradient buffer: each pair's dA, then its dB
// pieces.
func (g *GPU) gradBuffers() []ops.GradBuffer {
	var out []ops.GradBuffer
	for k, p := range g.lora.Pairs {
		out = append(out, ops.GradBuffer{Buf: g.pairs[k].dA, N: len(p.A)})
		for _, pc := range g.pairs[k].pieces {
			out = append(out, ops.GradBuffer{Buf: pc.dB, N: pc.rows * p.Rank})
		}
	}
	return out
}

// Close releases the device buffers.
func (g *GPU) Close() {
	g.w.Release()
	for _, t := range g.tensors {
		t.Release()
	}
	for _, b := range g.buffers {
		b.Release()
	}
	g.w, g.tensors, g.buffers = nil, nil, nil
}

// ZeroGrads clears the accumulated gradients.
func (g *GPU) ZeroGrads() error {
	ch, err := g.dev.NewChain("zero grads")
	if err != nil {
		return err
	}
	for _, gb := range g.gradBuffers() {
		if err := ch.Clear(gb.Buf, 0, gb.Buf.Size()); err != nil {
			ch.Discard()
			return err
		}
	}
	return ch.Submit()
}

// Backward runs examples (one micro-batch) forward and backward in one
// chain, adds the gradient of their summed loss to the device gradients,
// and returns the summed loss and the number of trained positions, as
// CPU.Backward. With LoRAConfig.Dropout above 0 it draws its masks at the
// dropout counter (SetDropoutStep), then counts it up.
func (g *GPU) Backward(examples []Example) (sum float64, count int, err error) {
	sum, count, err = g.run(examples, true)
	if err == nil {
		g.dropoutStep++
	}
	return sum, count, err
}

// SetDropoutStep sets the dropout counter of the next Backward, as
// CPU.SetDropoutStep: the same counter on both draws the same masks.
func (g *GPU) SetDropoutStep(step uint64) { g.dropoutStep = step }

// DropoutStep is the dropout counter the next Backward will use (for a
// checkpoint).
func (g *GPU) DropoutStep() uint64 { return g.dropoutStep }

// mask is pair k's dropout mask in the pass being recorded.
func (g *GPU) mask(k int) ref.DropoutMask {
	c := g.lora.Config
	return ref.NewDropoutMask(ref.DropoutKey(c.DropoutSeed, g.dropoutStep, uint32(k)), c.Dropout)
}

// dropout appends y (+)= mask_k(x) for rows × cols, x's row 0 at token
// g.token0+row0 of the micro-batch, y's at float yOff.
func (g *GPU) dropout(ch *gpu.Chain, k int, x, y *gpu.Buffer, rows, cols, row0, yOff int, acc bool) error {
	m := g.mask(k)
	return ops.Dropout(ch, x, y, ops.DropoutArgs{
		Rows: rows, Cols: cols, Token0: g.token0 + row0, Key: m.Key, Threshold: m.Threshold, Scale: m.Scale,
		YOffset: yOff, Accumulate: acc,
	})
}

// Loss runs examples forward only, in one chain, and returns their summed
// loss and trained positions, as CPU.Loss: the validation loss. The
// gradients are left as they are.
func (g *GPU) Loss(examples []Example) (sum float64, count int, err error) {
	return g.run(examples, false)
}

// SetPassCut makes the next micro-batches submit their chain every cut
// passes (a layer's forward, a layer's backward, the LM head) rather than
// once, wait for it and tell onPass the passes of the micro-batch done and
// its total, the last report at its end; cut 0 records a micro-batch in one
// chain again, as fast GPUs want. The steps compute the same either way:
// the same dispatches run in the same order.
func (g *GPU) SetPassCut(cut int, onPass func(done, total int)) {
	g.cut, g.onPass = cut, onPass
}

// examplePasses is the passes of one example: each layer forward, the
// head, and with backward each layer's recomputation and backward.
func (g *GPU) examplePasses(backward bool) int {
	if backward {
		return 2*len(g.w.Layers) + 1
	}
	return len(g.w.Layers) + 1
}

// pass ends one pass of the micro-batch being recorded; every cut passes,
// but for the last (whose chain also reads the losses back), it submits
// the chain, waits for it, reports and opens the next.
func (g *GPU) pass() error {
	g.passes++
	if g.cut <= 0 || g.passes%g.cut != 0 || g.passes == g.passTotal {
		return nil
	}
	if err := g.ch.Submit(); err != nil {
		return err
	}
	if err := g.dev.Wait(); err != nil {
		return err
	}
	if g.onPass != nil {
		g.onPass(g.passes, g.passTotal)
	}
	ch, err := g.dev.NewChain(g.label)
	if err != nil {
		return err
	}
	g.ch = ch
	return nil
}

func (g *GPU) run(examples []Example, backward bool) (sum float64, count int, err error) {
	c := g.c
	d := c.Hidden
	total := 0
	for i, e := range examples {
		if len(e.Tokens) == 0 || len(e.Targets) != len(e.Tokens) {
			return 0, 0, fmt.Errorf("training: example %d: %d tokens and %d targets", i, len(e.Tokens), len(e.Targets))
		}
		if len(e.Tokens) > g.maxTokens {
			return 0, 0, fmt.Errorf("training: example %d: %d tokens, the GPU step was sized for %d", i, len(e.Tokens), g.maxTokens)
		}
		total += len(e.Tokens)
	}
	if total > g.batchTokens {
		return 0, 0, fmt.Errorf("training: a micro-batch of %d tokens, the GPU step was sized for %d", total, g.batchTokens)
	}
	if err := checkExamples(c, examples); err != nil {
		return 0, 0, err
	}

	// Inputs: the embedding rows on the host (as model.GPU does: a few rows
	// of any storage type, no table on the device), and the targets.
	emb := make([]float32, total*d)
	targets := make([]int32, 0, total)
	rb := g.m.Embed.RowBytes()
	off := 0
	for _, e := range examples {
		for _, id := range e.Tokens {
			row := emb[off*d : (off+1)*d]
			if err := gguf.Dequantize(g.m.Embed.Type, g.m.Embed.Data[int(id)*rb:(int(id)+1)*rb], row); err != nil {
				return 0, 0, fmt.Errorf("training: %s row %d: %w", g.m.Embed.Name, id, err)
			}
			if c.EmbedScale != 0 {
				for j := range row {
					row[j] *= c.EmbedScale
				}
			}
			off++
		}
		targets = append(targets, e.Targets...)
	}
	if err := g.emb.WriteF32(0, emb); err != nil {
		return 0, 0, err
	}
	if g.m.PLE != nil {
		// The per-layer table's rows of every token, looked up on the
		// host as the serving runner does.
		var tokens []int32
		for _, e := range examples {
			tokens = append(tokens, e.Tokens...)
		}
		rows, err := g.m.PLERows(tokens)
		if err != nil {
			return 0, 0, fmt.Errorf("training: %w", err)
		}
		if err := g.pleRows.WriteF32(0, rows); err != nil {
			return 0, 0, err
		}
	}
	if err := g.targets.Write(0, gpu.U32Bytes(int32s(targets))); err != nil {
		return 0, 0, err
	}
	g.drop = backward && g.lora.Config.Dropout > 0
	var ids []int32
	segments := 0
	if g.lora.embed >= 0 {
		for _, e := range examples {
			ids = append(ids, e.Tokens...)
		}
		if err := g.ids.Write(0, gpu.U32Bytes(int32s(ids))); err != nil {
			return 0, 0, err
		}
		if backward {
			var plan []uint32
			plan, segments = ops.ScatterPlan(ids)
			if err := g.plan.Write(0, gpu.U32Bytes(plan)); err != nil {
				return 0, 0, err
			}
		}
	}

	g.label = "training step"
	if !backward {
		g.label = "training loss"
	}
	g.passes, g.passTotal = 0, len(examples)*g.examplePasses(backward)
	if g.ch, err = g.dev.NewChain(g.label); err != nil {
		return 0, 0, err
	}
	defer func() {
		if !g.ch.Done() {
			g.ch.Discard()
		}
	}()
	if err := g.embedForward(g.ch, total); err != nil {
		return 0, 0, err
	}
	off = 0
	for _, e := range examples {
		if err := g.example(len(e.Tokens), off, backward); err != nil {
			return 0, 0, err
		}
		off += len(e.Tokens)
	}
	if backward && g.lora.embed >= 0 {
		// dB[id] += f·s·Σ dH[t] over the tokens t of each id.
		pc := &g.pairs[g.lora.embed].pieces[0]
		fs := g.lora.Config.Scale() * embedScale(c)
		if err := ops.ScatterAddRows(g.ch, g.dhEmb, g.plan, pc.dB, total, c.Vocab, g.lora.Config.Rank, segments, fs); err != nil {
			return 0, 0, err
		}
	}
	rbk, err := g.ch.ReadBack(g.loss, 0, uint64(total)*4)
	if err != nil {
		return 0, 0, err
	}
	if err := g.ch.Submit(); err != nil {
		return 0, 0, err
	}
	raw, err := rbk.Bytes()
	if err != nil {
		return 0, 0, err
	}
	if g.cut > 0 && g.onPass != nil {
		g.onPass(g.passTotal, g.passTotal)
	}
	for i, l := range gpu.F32From(raw) {
		if targets[i] >= 0 {
			sum += float64(l)
			count++
		}
	}
	return sum, count, nil
}

// embedForward appends the embedding pair's correction to the micro-batch's
// total embedding rows: H = B's rows of the ids (ops.Embed gathers them
// from the f32 B), then emb += f·s·H·A, f the embedding scale the host
// has already applied to the base rows (see CPU.example).
func (g *GPU) embedForward(ch *gpu.Chain, total int) error {
	if g.lora.embed < 0 {
		return nil
	}
	gp := &g.pairs[g.lora.embed]
	if err := ops.Embed(ch, gp.pieces[0].b, g.ids, total, g.hEmb); err != nil {
		return err
	}
	fs := g.lora.Config.Scale() * embedScale(g.c)
	return ops.MatMulBackwardInputWith(ch, gp.a, g.hEmb, g.emb, total, ops.MatmulBackwardOptions{Scale: fs, Accumulate: true})
}

// embedBackward appends the embedding pair's gradients for one example of
// n tokens at offset off, g.dres holding dL/d(its embedding rows), as
// embedBackward on the CPU: dA += f·s·Hᵀ·dres, and dL/dH = dres·Aᵀ kept
// in g.dhEmb for the micro-batch's scatter-add into dB.
func (g *GPU) embedBackward(ch *gpu.Chain, n, off int) error {
	if g.lora.embed < 0 {
		return nil
	}
	gp, p := &g.pairs[g.lora.embed], g.lora.Pairs[g.lora.embed]
	fs := g.lora.Config.Scale() * embedScale(g.c)
	if err := ops.MatMulTN(ch, g.hEmb, g.dres, gp.dA, n, p.Rank, p.Cols, ops.MatMulTNOptions{AOffset: off * p.Rank, Accumulate: true, Alpha: fs}); err != nil {
		return err
	}
	return ops.MatMulWith(ch, gp.a, g.dres, g.dhEmb, n, ops.MatmulOptions{YOffset: off * p.Rank})
}

// headForward appends the head pair's correction to a tile of tn logit
// rows from x (the tile's normed rows, at row r0 of the example): logits
// += s·B·(A·drop(x)), A·drop(x) kept in g.hHead. It returns what A saw:
// x, or g.xd with dropout.
func (g *GPU) headForward(ch *gpu.Chain, x *gpu.Buffer, tn, r0 int) (*gpu.Buffer, error) {
	k := g.lora.head
	if k < 0 {
		return nil, nil
	}
	gp, r := &g.pairs[k], g.lora.Config.Rank
	if g.drop {
		if err := g.dropout(ch, k, x, g.xd, tn, g.c.Hidden, r0, 0, false); err != nil {
			return nil, err
		}
		x = g.xd
	}
	if err := ops.MatMul(ch, gp.a, x, g.hHead, tn); err != nil {
		return nil, err
	}
	if err := ops.Scale(ch, g.hHead, g.hs, tn*r, g.lora.Config.Scale()); err != nil {
		return nil, err
	}
	return x, ops.MatMulWith(ch, gp.pieces[0].b, g.hs, g.logits, tn, ops.MatmulOptions{Accumulate: true})
}

// headBackward appends the head pair's part of a tile's backward, g.logits
// holding dL/dlogits and x what A saw: dB += s·dlogitsᵀ·h, dH =
// s·dlogits·B, dA += dHᵀ·x, dxn[tile] += mask(dH·A).
func (g *GPU) headBackward(ch *gpu.Chain, x *gpu.Buffer, tn, r0 int) error {
	k := g.lora.head
	if k < 0 {
		return nil
	}
	gp, pc, r, d, s := &g.pairs[k], &g.pairs[k].pieces[0], g.lora.Config.Rank, g.c.Hidden, g.lora.Config.Scale()
	if err := ops.MatMulTN(ch, g.logits, g.hHead, pc.dB, tn, g.c.Vocab, r, ops.MatMulTNOptions{Accumulate: true, Alpha: s}); err != nil {
		return err
	}
	// dH sums over the vocabulary into tn × rank values: the row split
	// keeps a 262144-row B from running on a handful of workgroups.
	if err := ops.MatMulBackwardInputWith(ch, pc.b, g.logits, g.dh, tn, ops.MatmulBackwardOptions{Scale: s, Partials: g.partials}); err != nil {
		return err
	}
	if err := ops.MatMulTN(ch, g.dh, x, gp.dA, tn, r, d, ops.MatMulTNOptions{Accumulate: true}); err != nil {
		return err
	}
	if !g.drop {
		return ops.MatMulBackwardInputWith(ch, gp.a, g.dh, g.dxn, tn, ops.MatmulBackwardOptions{DXOffset: r0 * d, Accumulate: true})
	}
	if err := ops.MatMulBackwardInput(ch, gp.a, g.dh, g.dl, tn); err != nil {
		return err
	}
	return g.dropout(ch, k, g.dl, g.dxn, tn, d, r0, r0*d, true)
}

func int32s(v []int32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = uint32(x)
	}
	return out
}

// example records one example of n tokens whose embedding rows, targets
// and losses sit at token offset off of the micro-batch: its forward and
// loss, and with backward its gradients.
func (g *GPU) example(n, off int, backward bool) error {
	c := g.c
	d, V := c.Hidden, c.Vocab
	g.token0 = off
	var err error
	try := func(e error) {
		if err == nil {
			err = e
		}
	}
	if c.AltUp > 0 {
		// Gemma 3n's streams from the embeddings (stream 0 their copy).
		try(ops.CopyF32(g.ch, g.emb, off*d, g.merged, 0, n*d))
		g.w.RecordAltUpStreams(g.ch, g.merged, g.ck[0], n, try)
	} else {
		try(ops.CopyF32(g.ch, g.emb, off*d, g.ck[0], 0, n*d))
	}
	if err != nil {
		return err
	}
	if g.m.PLE != nil {
		// The example's per-layer inputs: its table rows and the
		// projection of its embeddings.
		lp := c.Layers * c.PerLayerInput
		if err := ops.CopyF32(g.ch, g.pleRows, off*lp, g.pleTok, 0, n*lp); err != nil {
			return err
		}
		if err := ops.MatMul(g.ch, g.w.PLEModelProj, g.ck[0], g.pleProj, n); err != nil {
			return err
		}
	}
	clear(g.kvSent)
	for i := range g.w.Layers {
		if err := g.layer(g.ch, i, n, g.ck[i], g.ck[i+1]); err != nil {
			return fmt.Errorf("training: layer %d: %w", i, err)
		}
		if err := g.pass(); err != nil {
			return err
		}
	}
	ch := g.ch

	// The head, in row tiles: logits = Output · norm(x); the cross-entropy
	// backward leaves dLoss/dlogits in place (the soft-cap's derivative
	// included), and dxn[tile] = dlogits · Output. Gemma 3n's streams are
	// merged first.
	last := g.ck[len(g.w.Layers)]
	if c.AltUp > 0 {
		g.w.RecordAltUpMerge(ch, last, g.dsum, g.unembedded, g.merged, n, try)
		if err != nil {
			return err
		}
		last = g.merged
	}
	norm := ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}
	if err := ops.RMSNorm(ch, last, g.w.OutNorm, g.xn, norm); err != nil {
		return err
	}
	for r0 := 0; r0 < n; r0 += g.tile {
		tn := min(g.tile, n-r0)
		src := g.xn
		if r0 > 0 {
			// ops.MatMul reads x from its start: copy the tile out.
			if err := ops.CopyF32(ch, g.xn, r0*d, g.htile, 0, tn*d); err != nil {
				return err
			}
			src = g.htile
		}
		if err := ops.MatMul(ch, g.w.Output, src, g.logits, tn); err != nil {
			return err
		}
		hx, err := g.headForward(ch, src, tn, r0)
		if err != nil {
			return err
		}
		o := ops.CrossEntropyOptions{Scale: 1, Softcap: c.FinalSoftcap, TargetOffset: off + r0, LossOffset: off + r0}
		if !backward {
			if err := ops.CrossEntropy(ch, g.logits, g.targets, g.loss, tn, V, o); err != nil {
				return err
			}
			continue
		}
		if err := ops.CrossEntropyBackward(ch, g.logits, g.targets, g.loss, tn, V, o); err != nil {
			return err
		}
		if err := ops.MatMulBackwardInputWith(ch, g.w.Output, g.logits, g.dxn, tn, ops.MatmulBackwardOptions{DXOffset: r0 * d, Partials: g.partials}); err != nil {
			return err
		}
		if err := g.headBackward(ch, hx, tn, r0); err != nil {
			return err
		}
	}
	if backward {
		if err := ops.RMSNormBackward(ch, last, g.w.OutNorm, g.dxn, g.dres, ops.NormBackwardArgs{NormArgs: norm}); err != nil {
			return err
		}
	}
	if err := g.pass(); err != nil {
		return err
	}
	if !backward {
		return nil
	}
	if c.AltUp > 0 {
		// Back through the merge and the unembedding projections.
		rows := n * d
		args := model.OpsAltUpArgs(c, n)
		// (g.ch: the pass after the head may have opened a new chain.)
		try(ops.AltUpMergeBackward(g.ch, g.unembedded, g.dres, g.dpred, args))
		try(ops.CopyF32(g.ch, g.dpred, 0, g.dstreams, 0, rows))
		for k, t := range g.w.AltUpUnembd {
			try(ops.CopyF32(g.ch, g.dpred, (k+1)*rows, g.dsum, 0, rows))
			try(ops.MatMulBackwardInputWith(g.ch, t, g.dsum, g.dstreams, n, ops.MatmulBackwardOptions{DXOffset: (k + 1) * rows}))
		}
		if err != nil {
			return err
		}
	}
	for i := len(g.w.Layers) - 1; i >= 0; i-- {
		if err := g.layer(g.ch, i, n, g.ck[i], g.spare); err != nil {
			return fmt.Errorf("training: layer %d (recomputed): %w", i, err)
		}
		var err error
		if c.AltUp > 0 {
			err = g.altUpBackward(g.ch, i, n)
		} else {
			err = g.layerBackward(g.ch, i, n, g.ck[i])
		}
		if err != nil {
			return fmt.Errorf("training: layer %d backward: %w", i, err)
		}
		if err := g.pass(); err != nil {
			return err
		}
	}
	return g.embedBackward(g.ch, n, off)
}

// layer records block i's forward from x into out, as CPU.layer: the
// model's own recorder with every activation kept in g's buffers and the
// pairs' terms added by loraForward.
func (g *GPU) layer(ch *gpu.Chain, i, n int, x, out *gpu.Buffer) error {
	a := model.GPUActivations{Keep: true, X: x, X2: g.x2, Out: out, XN: g.xn, XN2: g.xn2,
		Q: g.q, QIn: g.qIn, KIn: g.kIn, VIn: g.vIn, Att: g.att, AttScratch: g.attScratch,
		O: g.o, F: g.f, Gate: g.gate, Up: g.up, H: g.h,
		PLEProj: g.pleProj, PLETok: g.pleTok, PLEG: g.pleG, PLEH: g.pleH, PLEY: g.pleY, MoE: g.moe}
	a.K, a.V = g.layerKV(i)
	if g.c.AltUp > 0 {
		// The block runs on the active prediction; the streams go from x
		// to out.
		a.X, a.Out, a.Streams, a.StreamsOut = g.active, g.blockOut, x, out
		a.Pred, a.First, a.Laurel, a.LaurelR = g.pred, g.first, g.laurelT, g.laurelR
		if g.c.Shape(i).Sparse {
			a.GateIn = g.gateIn
		}
	}
	_, err := g.w.RecordLayer(ch, i, &a, model.GPULayerArgs{
		N: n,
		LoRA: func(ch *gpu.Chain, p model.Proj, x, y *gpu.Buffer, n int, o ops.MatmulOptions) error {
			return g.loraForward(ch, i, int(p), x, y, n, o)
		},
		Adapted: func(p model.Proj) bool {
			pp, _ := g.lora.pair(i, int(p))
			return pp != nil
		},
	})
	return err
}

// layerKV are the keys and values layer i attends over: those of the
// layer whose cache it reads when that is another (Gemma 3n, 4), kept in
// their own buffers; else its own, in k and v.
func (g *GPU) layerKV(i int) (k, v *gpu.Buffer) {
	if j := g.c.Shape(i).KVLayer; g.kc[j] != nil {
		return g.kc[j], g.vc[j]
	}
	return g.k, g.v
}

// loraForward appends y += s·B·(A·drop(x)) for layer i's pair of target t
// (B the projection's piece), y placed by o, A·drop(x) kept in g.ha[t] for
// the backward; without dropout drop(x) is x, with it g.xd.
func (g *GPU) loraForward(ch *gpu.Chain, i, t int, x, y *gpu.Buffer, n int, o ops.MatmulOptions) error {
	pp, sl := g.lora.pair(i, t)
	if pp == nil {
		return nil
	}
	r, s := pp.Rank, g.lora.Config.Scale()
	if g.drop {
		if err := g.dropout(ch, sl.k, x, g.xd, n, pp.Cols, 0, 0, false); err != nil {
			return err
		}
		x = g.xd
	}
	if err := ops.MatMul(ch, g.pairs[sl.k].a, x, g.ha[t], n); err != nil {
		return err
	}
	if err := ops.Scale(ch, g.ha[t], g.hs, n*r, s); err != nil {
		return err
	}
	o.Accumulate = true
	return ops.MatMulWith(ch, g.piece(sl).b, g.hs, y, n, o)
}

// mulBackward appends dx (= or +=, acc) dy·W for layer i's projection of
// target t, and its pair's part: dB += s·dyᵀ·h, dH = s·dy·B, dA += dHᵀ·x,
// dx += dH·A (see loraBackward).
func (g *GPU) mulBackward(ch *gpu.Chain, i, t int, x, dy, dx *gpu.Buffer, n int, acc bool) error {
	if err := ops.MatMulBackwardInputWith(ch, g.w.Layers[i].Proj(model.Proj(t)), dy, dx, n, ops.MatmulBackwardOptions{Accumulate: acc}); err != nil {
		return err
	}
	pp, sl := g.lora.pair(i, t)
	if pp == nil {
		return nil
	}
	p, pc, r, s := &g.pairs[sl.k], g.piece(sl), pp.Rank, g.lora.Config.Scale()
	if err := ops.MatMulTN(ch, dy, g.ha[t], pc.dB, n, sl.rows, r, ops.MatMulTNOptions{Accumulate: true, Alpha: s}); err != nil {
		return err
	}
	if err := ops.MatMulBackwardInputWith(ch, pc.b, dy, g.dh, n, ops.MatmulBackwardOptions{Scale: s}); err != nil {
		return err
	}
	xa := x
	if g.drop {
		// The forward's drop(x) again: same key, same mask.
		if err := g.dropout(ch, sl.k, x, g.xd, n, pp.Cols, 0, 0, false); err != nil {
			return err
		}
		xa = g.xd
	}
	if err := ops.MatMulTN(ch, g.dh, xa, p.dA, n, r, pp.Cols, ops.MatMulTNOptions{Accumulate: true}); err != nil {
		return err
	}
	if !g.drop {
		return ops.MatMulBackwardInputWith(ch, p.a, g.dh, dx, n, ops.MatmulBackwardOptions{Accumulate: true})
	}
	// dx += mask(dH·A): the mask's backward is the mask.
	if err := ops.MatMulBackwardInput(ch, p.a, g.dh, g.dl, n); err != nil {
		return err
	}
	return g.dropout(ch, sl.k, g.dl, dx, n, pp.Cols, 0, 0, true)
}

// altUpBackward records Gemma 3n's layer i's backward, as
// CPU.altUpBackward: g.dstreams holds the gradient of its output streams
// and gets that of its input streams. Back through the per-layer
// embedding's add to streams 1.., the correction, the block (on g.dres)
// and the prediction.
func (g *GPU) altUpBackward(ch *gpu.Chain, i, n int) error {
	c, l := g.c, &g.w.Layers[i]
	d := c.Hidden
	rows := n * d
	args := model.OpsAltUpArgs(c, n)
	var err error
	try := func(e error) {
		if err == nil {
			err = e
		}
	}
	try(ops.CopyF32(ch, g.dstreams, rows, g.dsum, 0, rows))
	for k := 2; k < c.AltUp; k++ {
		try(ops.CopyF32(ch, g.dstreams, k*rows, g.dtmp, 0, rows))
		try(ops.AddInPlace(ch, g.dsum, g.dtmp, rows))
	}
	try(ops.RMSNormBackward(ch, g.pleY, l.PLENorm, g.dsum, g.dtmp, ops.NormBackwardArgs{NormArgs: ops.NormArgs{Rows: n, Dim: d, Eps: c.Eps}}))
	try(ops.MatMulBackwardInput(ch, l.PLEProj, g.dtmp, g.dPLEH, n))
	try(ops.PLEInput(ch, g.pleProj, g.pleTok, g.w.PLEProjNorm, g.pleIn, model.PLEArgs(c, n, i)))
	try(ops.GeGLUBackward(ch, g.pleG, g.pleIn, g.dPLEH, g.dPLEG, g.dPLEScratch, n*c.PerLayerInput))
	try(ops.MatMulBackwardInput(ch, l.PLEGate, g.dPLEG, g.dfirst, n))
	try(ops.AltUpCorrectBackward(ch, g.pred, g.blockOut, l.AltUp.Weights, g.dstreams, g.dfirst, g.dpred, g.dres, args))
	if err != nil {
		return err
	}
	if err := g.layerBackward(ch, i, n, g.active); err != nil {
		return err
	}
	if err := ops.AltUpPredictBackward(ch, g.ck[i], l.AltUp.Weights, g.dpred, g.dres, g.dstreams2, args); err != nil {
		return err
	}
	g.dstreams, g.dstreams2 = g.dstreams2, g.dstreams
	return nil
}

// layerBackward records block i's backward, as CPU.layerBackward: g.dres
// holds the gradient of the layer's output and gets that of its input x.
//
// A layer that reads another's cache sends the gradients of those keys and
// values to that layer's dkc and dvc (the first such layer of the backward
// writes them, the others add), which the producer adds to its own.
func (g *GPU) layerBackward(ch *gpu.Chain, i, n int, x *gpu.Buffer) error {
	c, l := g.c, &g.w.Layers[i]
	sh, own := c.Shape(i), c.OwnKV(i)
	d, ff, hd := c.Hidden, sh.FF, sh.HeadDim
	var err error
	try := func(e error) {
		if err == nil {
			err = e
		}
	}
	normBack := func(x, w, dy, dx *gpu.Buffer, rows, dim int, acc bool) {
		try(ops.RMSNormBackward(ch, x, w, dy, dx, ops.NormBackwardArgs{NormArgs: ops.NormArgs{Rows: rows, Dim: dim, Eps: c.Eps}, Accumulate: acc}))
	}

	// Gemma 4's tail: out = (f1 + norm(P·(gelu(G·f1)·ple)))·scale.
	if s := l.OutScale; s != 0 {
		try(ops.Scale(ch, g.dres, g.dres, n*d, s))
	}
	if l.PLEGate != nil && c.AltUp == 0 { // Gemma 3n's: altUpBackward
		p := c.PerLayerInput
		normBack(g.pleY, l.PLENorm, g.dres, g.dtmp, n, d, false)
		try(ops.MatMulBackwardInput(ch, l.PLEProj, g.dtmp, g.dPLEH, n))
		try(ops.PLEInput(ch, g.pleProj, g.pleTok, g.w.PLEProjNorm, g.pleIn, model.PLEArgs(c, n, i)))
		try(ops.GeGLUBackward(ch, g.pleG, g.pleIn, g.dPLEH, g.dPLEG, g.dPLEScratch, n*p))
		try(ops.MatMulBackwardInputWith(ch, l.PLEGate, g.dPLEG, g.dres, n, ops.MatmulBackwardOptions{Accumulate: true}))
	}

	// Feed-forward: out = x2 + post(f).
	dense := l.MoE != nil && c.MoE.Dense // Gemma 4's experts beside the feed-forward
	df := g.dres
	if l.PostFFNNorm != nil {
		f := g.f
		if dense {
			f = g.moe.Dense
		}
		normBack(f, l.PostFFNNorm, g.dres, g.dtmp, n, d, false)
		df = g.dtmp
	}
	if dense {
		// f = norm1(f1) + norm2(experts(pre_norm_2(x2))), the router on
		// x2's own norm: both inputs' gradients go into dres (= dx2), f1's
		// on to the dense feed-forward below.
		m := l.MoE
		normBack(g.moe.Sum, m.PostNorm2, df, g.dMoESum, n, d, false)
		g.moeBackward(ch, i, n, g.dMoESum, g.dMoEIn, g.dMoERouter, try)
		normBack(g.x2, m.PreNorm, g.dMoEIn, g.dres, n, d, true)
		normBack(g.x2, m.RouterGain, g.dMoERouter, g.dres, n, d, true)
		normBack(g.f, m.PostNorm1, df, g.dMoEF1, n, d, false)
		df = g.dMoEF1
	}
	if l.MoE != nil && !dense {
		g.moeBackward(ch, i, n, df, g.dxn, g.dxn, try)
	} else {
		try(g.mulBackward(ch, i, tDown, g.h, df, g.dff, n, false))
		if c.GELU {
			try(ops.GeGLUBackward(ch, g.gate, g.up, g.dff, g.dgate, g.dup, n*ff))
		} else {
			try(ops.SwiGLUBackward(ch, g.gate, g.up, g.dff, g.dgate, g.dup, n*ff))
		}
		if sh.Sparse {
			// Gemma 3n's sparsity of the gate, from the gate before it.
			try(ops.GaussianTopKBackward(ch, g.gateIn, g.dgate, g.dgate, n, ff, ff, sh.Sparsity))
		}
		try(g.mulBackward(ch, i, tGate, g.xn2, g.dgate, g.dxn, n, false))
		try(g.mulBackward(ch, i, tUp, g.xn2, g.dup, g.dxn, n, true))
	}
	normBack(g.x2, l.FFNNorm, g.dxn, g.dres, n, d, true) // dres = dx2
	// Gemma 3n's LAuReL: x2 = (x + post(O·att) + xn + norm(R·L·xn))/√2;
	// laurel adds its part to dxn before the attention norm's backward.
	laurel := func() {}
	if l.LaurelL != nil {
		try(ops.Scale(ch, g.dres, g.dres, n*d, float32(math.Sqrt(0.5))))
		laurel = func() {
			try(ops.AddInPlace(ch, g.dxn, g.dres, n*d))
			normBack(g.laurelR, l.LaurelNorm, g.dres, g.dtmp, n, d, false)
			try(ops.MatMulBackwardInput(ch, l.LaurelR, g.dtmp, g.dlaurelT, n))
			try(ops.MatMulBackwardInputWith(ch, l.LaurelL, g.dlaurelT, g.dxn, n, ops.MatmulBackwardOptions{Accumulate: true}))
		}
	}

	// Attention: x2 = x + post(O·att).
	do := g.dres
	if l.PostAttnNorm != nil {
		normBack(g.o, l.PostAttnNorm, g.dres, g.dtmp, n, d, false)
		do = g.dtmp
	}
	try(g.mulBackward(ch, i, tO, g.att, do, g.datt, n, false))
	k, v := g.layerKV(i)
	try(ops.AttentionBackward(ch, g.q, k, v, g.datt, g.stats, g.dq, g.dk, g.dv, g.w.AttentionArgs(i, n, 0)))
	rq, rk := model.RoPEArgs(c, i, n, 0)
	factors := g.w.Factors
	if !sh.RopeFactors {
		factors = nil
	}
	try(ops.RoPEBackward(ch, g.dq, factors, nil, rq))
	if l.QNorm != nil {
		normBack(g.qIn, l.QNorm, g.dq, g.dq, n*c.Heads, hd, false)
	}
	try(g.mulBackward(ch, i, tQ, g.xn, g.dq, g.dxn, n, false))
	kvd := n * c.LayerKVDim(i)
	if !own {
		j := sh.KVLayer
		if g.kvSent[j] {
			try(ops.AddInPlace(ch, g.dkc[j], g.dk, kvd))
			try(ops.AddInPlace(ch, g.dvc[j], g.dv, kvd))
		} else {
			try(ops.CopyF32(ch, g.dk, 0, g.dkc[j], 0, kvd))
			try(ops.CopyF32(ch, g.dv, 0, g.dvc[j], 0, kvd))
			g.kvSent[j] = true
		}
		laurel()
		normBack(x, l.AttnNorm, g.dxn, g.dres, n, d, true) // dres = dx
		return err
	}
	if g.kvSent[i] {
		try(ops.AddInPlace(ch, g.dk, g.dkc[i], kvd))
		try(ops.AddInPlace(ch, g.dv, g.dvc[i], kvd))
	}
	try(ops.RoPEBackward(ch, g.dk, factors, nil, rk))
	if l.QNorm != nil {
		normBack(g.kIn, l.KNorm, g.dk, g.dk, n*sh.KVHeads, hd, false)
	}
	if c.VNorm {
		normBack(g.vIn, nil, g.dv, g.dv, n*sh.KVHeads, hd, false)
	}
	try(g.mulBackward(ch, i, tK, g.xn, g.dk, g.dxn, n, true))
	try(g.mulBackward(ch, i, tV, g.xn, g.dv, g.dxn, n, true))
	laurel()
	normBack(x, l.AttnNorm, g.dxn, g.dres, n, d, true) // dres = dx
	return err
}

// moeBackward records a mixture of experts' backward, as CPU.moeBackward:
// from df, the gradient of its weighted sum, into dIn, that of the
// experts' input (n rows), and dRouter, that of the router's (added to
// dIn when they are one buffer, as for a family whose router reads the
// experts' input), through the combine, each slot's expert (down, the GLU,
// gate and up, grouped by expert as the forward was) and the router, the
// choice held fixed. The forward left the scores, choices, groups and the
// slots' rows in g.moe.
func (g *GPU) moeBackward(ch *gpu.Chain, i, n int, df, dIn, dRouter *gpu.Buffer, try func(error)) {
	c, l, a := g.c, g.w.Layers[i].MoE, g.moe
	e, d := c.MoE, c.Hidden
	ff, slots := e.FF, n*e.Used
	try(ops.MoECombineBackward(ch, a.Y, a.Weights, df, g.dMoEY, g.dMoEW, ops.MoECombineArgs{Tokens: n, Used: e.Used, Dim: d, Scale: e.Scale}))
	try(ops.MoEMatMulBackwardInput(ch, l.Down, g.dMoEY, a.Groups, g.dMoEH, ops.MoEArgs{Slots: slots}))
	switch {
	case e.OAI:
		try(ops.SwiGLUOAIFusedBackward(ch, a.GateUp, g.dMoEH, g.dMoEGateUp, slots, ff))
	case c.GELU:
		try(ops.GeGLUFusedBackward(ch, a.GateUp, g.dMoEH, g.dMoEGateUp, slots, ff))
	default:
		try(ops.SwiGLUFusedBackward(ch, a.GateUp, g.dMoEH, g.dMoEGateUp, slots, ff))
	}
	if l.GateUp != nil {
		// Each expert's gate rows then its up rows: the slots' [dgate |
		// dup] rows in one product.
		try(ops.MoEMatMulBackwardInput(ch, l.GateUp, g.dMoEGateUp, a.Groups, g.dMoEX, ops.MoEArgs{Slots: slots}))
	} else {
		gate := ops.MoEArgs{Slots: slots, Options: ops.MatmulOptions{YStride: 2 * ff}}
		try(ops.MoEMatMulBackwardInput(ch, l.Gate, g.dMoEGateUp, a.Groups, g.dMoEX, gate))
		up := gate
		up.Options.YOffset, up.Options.Accumulate = ff, true
		try(ops.MoEMatMulBackwardInput(ch, l.Up, g.dMoEGateUp, a.Groups, g.dMoEX, up))
	}
	try(ops.MoECombine(ch, g.dMoEX, nil, dIn, ops.MoECombineArgs{Tokens: n, Used: e.Used, Dim: d, Unweighted: true}))
	try(ops.MoERouteBackward(ch, a.Logits, l.DownScale, a.IDs, g.dMoEW, g.dMoELogits, ops.MoERouteArgs{Tokens: n, Experts: e.Experts, TopK: e.Used, Sigmoid: e.Sigmoid, Renorm: e.Renorm}))
	try(ops.MatMulBackwardInputWith(ch, l.Router, g.dMoELogits, dRouter, n, ops.MatmulBackwardOptions{Accumulate: dRouter == dIn}))
}

// Grads reads the accumulated gradients back.
func (g *GPU) Grads() (*Grads, error) {
	out := NewGrads(g.lora)
	for k, p := range g.pairs {
		if err := read(p.dA, out.A[k]); err != nil {
			return nil, err
		}
		if err := g.readB(k, func(pc *gpuPiece) *gpu.Buffer { return pc.dB }, out.B[k]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// read fills dst from b.
func read(b *gpu.Buffer, dst []float32) error {
	v, err := b.ReadF32(0, len(dst))
	copy(dst, v)
	return err
}

// readB fills dst, a B-shaped tensor of pair k, from the buffer which
// picks of each piece.
func (g *GPU) readB(k int, which func(*gpuPiece) *gpu.Buffer, dst []float32) error {
	r := g.lora.Pairs[k].Rank
	for i := range g.pairs[k].pieces {
		pc := &g.pairs[k].pieces[i]
		if err := read(which(pc), dst[pc.row0*r:(pc.row0+pc.rows)*r]); err != nil {
			return err
		}
	}
	return nil
}

// Step runs one optimizer step on the device from the accumulated
// gradients of count trained positions, as Optimizer.Step: the mean
// gradient's global norm and clip factor (ops.GradNorm), then ops.AdamW on
// every A and B with the clip applied in the same chain. step counts from
// 1. It returns the norm before clipping. Unlike Optimizer.Step, which
// checks the norm first, the device has already stepped when a NaN or
// infinite norm comes back as an error: the caller resumes from its last
// checkpoint.
func (g *GPU) Step(c AdamWConfig, step, count int, lr float64) (float64, error) {
	if count <= 0 {
		return 0, fmt.Errorf("training: optimizer step over %d trained positions", count)
	}
	ch, err := g.dev.NewChain("optimizer step")
	if err != nil {
		return 0, err
	}
	fail := func(err error) (float64, error) {
		ch.Discard()
		return 0, err
	}
	scale := 1 / float64(count)
	if err := ops.GradNorm(ch, g.gradBuffers(), g.partials2, g.norm, ops.GradNormArgs{Scale: float32(scale), MaxNorm: c.MaxGradNorm}); err != nil {
		return fail(err)
	}
	args := ops.AdamWArgs{LR: lr, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Step: step, GradScale: scale}
	for k, p := range g.lora.Pairs {
		gp := &g.pairs[k]
		args.N = len(p.A)
		if err := ops.AdamW(ch, gp.a.Chunks[0].Buf, gp.dA, gp.mA, gp.vA, g.norm, args); err != nil {
			return fail(err)
		}
		for _, pc := range gp.pieces {
			args.N = pc.rows * p.Rank
			if err := ops.AdamW(ch, pc.b.Chunks[0].Buf, pc.dB, pc.mB, pc.vB, g.norm, args); err != nil {
				return fail(err)
			}
		}
	}
	rb, err := ch.ReadBack(g.norm, 0, 8)
	if err != nil {
		return fail(err)
	}
	if err := ch.Submit(); err != nil {
		return 0, err
	}
	raw, err := rb.Bytes()
	if err != nil {
		return 0, err
	}
	norm := float64(gpu.F32From(raw)[0])
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("training: the gradient norm is %v", norm)
	}
	return norm, nil
}

// Download copies the device's A and B into the LoRA's pairs (after
// optimizer steps, for a checkpoint or an export).
func (g *GPU) Download() error {
	for k, p := range g.lora.Pairs {
		if err := read(g.pairs[k].a.Chunks[0].Buf, p.A); err != nil {
			return err
		}
		if err := g.readB(k, func(pc *gpuPiece) *gpu.Buffer { return pc.b.Chunks[0].Buf }, p.B); err != nil {
			return err
		}
	}
	return nil
}

// Moments reads the device's AdamW moments into o, for a checkpoint.
func (g *GPU) Moments(o *Optimizer) error {
	return g.moments(o, false)
}

// SetMoments writes o's moments to the device, for a resumed run.
func (g *GPU) SetMoments(o *Optimizer) error {
	return g.moments(o, true)
}

// moments copies the moments between o, in Grads' order (A then B of each
// pair), and the device, whose B moments are held in pieces.
func (g *GPU) moments(o *Optimizer, upload bool) error {
	if len(o.M) != 2*len(g.lora.Pairs) || len(o.V) != len(o.M) {
		return fmt.Errorf("training: an optimizer of %d tensors for %d pairs", len(o.M), len(g.lora.Pairs))
	}
	copyF32 := func(b *gpu.Buffer, v []float32) error {
		if upload {
			return b.WriteF32(0, v)
		}
		return read(b, v)
	}
	for k, p := range g.lora.Pairs {
		gp := &g.pairs[k]
		mA, vA, mB, vB := o.M[2*k], o.V[2*k], o.M[2*k+1], o.V[2*k+1]
		if len(mA) != len(p.A) || len(vA) != len(p.A) || len(mB) != len(p.B) || len(vB) != len(p.B) {
			return fmt.Errorf("training: optimizer moments of pair %s do not match its shape", p.Name)
		}
		if err := copyF32(gp.mA, mA); err != nil {
			return err
		}
		if err := copyF32(gp.vA, vA); err != nil {
			return err
		}
		for i := range gp.pieces {
			pc := &gp.pieces[i]
			lo, hi := pc.row0*p.Rank, (pc.row0+pc.rows)*p.Rank
			if err := copyF32(pc.mB, mB[lo:hi]); err != nil {
				return err
			}
			if err := copyF32(pc.vB, vB[lo:hi]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Memory is the bytes the step holds on the device: the frozen weights,
// the pairs with their gradients and moments, and the activations.
func (g *GPU) Memory() uint64 {
	n := g.w.Bytes()
	for _, t := range g.tensors {
		n += uint64(t.Bytes())
	}
	for _, b := range g.buffers {
		n += b.Size()
	}
	return n
}
