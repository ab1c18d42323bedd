package training

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/parallel"
	"github.com/hearthstudio/hearth/training/data"
)

// Example is one independent run of tokens: Targets[t] is the token to
// predict after Tokens[0..t], or -1 for no loss. Its positions are 0, 1, …
// and its attention stays within it.
type Example struct {
	Tokens, Targets []int32
}

// Examples cuts sequences into the examples a step trains on: each packed
// sample on its own (its attention within it and its positions from 0, as
// data.Sequence.Positions describes), the padding after the last dropped
// (its targets are all -1 and, attention being causal, it changes nothing
// before it).
func Examples(seqs []*data.Sequence) []Example {
	var out []Example
	for _, s := range seqs {
		for i := 0; i+1 < len(s.Bounds); i++ {
			lo, hi := s.Bounds[i], s.Bounds[i+1]
			if hi > lo {
				out = append(out, Example{Tokens: s.Tokens[lo:hi], Targets: s.Targets[lo:hi]})
			}
		}
	}
	return out
}

// Trained counts the positions of examples that have a loss.
func Trained(examples []Example) int {
	n := 0
	for _, e := range examples {
		for _, t := range e.Targets {
			if t >= 0 {
				n++
			}
		}
	}
	return n
}

// CPU is the reference training step: the frozen base dequantized to f32
// once, activations in f32 between ops, every op from engine/ops/ref (which
// sum in float64 and round each output to f32) and matrix products summed
// in float64. It follows model.CPU's Forward op for op and is the oracle of
// the GPU step. Activations are checkpointed per layer: the forward keeps
// each layer's input only, the backward runs the layer forward again to
// get what its backward needs, so memory grows with layers × tokens ×
// width, not with the intermediate widths.
type CPU struct {
	m       *model.Model
	c       *model.Config
	layers  []frozenLayer
	outNorm []float32
	output  linear    // the LM head (token_embd when tied)
	pleNorm []float32 // the per-layer embeddings' projection norm (Gemma 3n, 4); nil without
	unembd  []linear  // Gemma 3n's altup_unembd_proj; nil without
	// dropoutStep is the dropout counter of the next Backward.
	dropoutStep uint64
}

// SetDropoutStep sets the dropout counter the next Backward draws its
// masks with (LoRAConfig.Dropout); each Backward then counts it up by one,
// so successive micro-batches get new masks. A resumed run sets it to
// where it stopped; a comparison of two steps sets both alike.
func (r *CPU) SetDropoutStep(step uint64) { r.dropoutStep = step }

// DropoutStep is the dropout counter the next Backward will use.
func (r *CPU) DropoutStep() uint64 { return r.dropoutStep }

// dropouts chooses the dropout masks of one pass: in a training step with
// a rate above 0, each pair's mask at the pass's counter, token0 the place
// of the example's first token in its micro-batch.
type dropouts struct {
	on         bool
	seed, step uint64
	p          float32
	token0     int
}

// dropout is one pair's input mask in one pass; nil applies none.
type dropout struct {
	mask   ref.DropoutMask
	token0 int
}

func (d dropouts) of(k int) *dropout {
	if !d.on {
		return nil
	}
	return &dropout{ref.NewDropoutMask(ref.DropoutKey(d.seed, d.step, uint32(k)), d.p), d.token0}
}

// apply returns x (m rows of cols) masked; x itself when d is nil.
func (d *dropout) apply(x []float32, m, cols int) []float32 {
	if d == nil {
		return x
	}
	return ref.Dropout(x, m, cols, d.token0, d.mask)
}

// frozenLayer is one block's base weights in f32.
type frozenLayer struct {
	model.LayerVectors
	proj [numTargets]linear
	// pleGate and pleProj are the per-layer-embedding gate and projection
	// (Gemma 3n, 4), laurelL and laurelR Gemma 3n's LAuReL, whose
	// backwards the block's runs through.
	pleGate, pleProj, laurelL, laurelR linear
	// moe is the layer's mixture of experts, nil in a dense model.
	moe *frozenMoE
}

// frozenMoE is a mixture of experts' router and each expert's gate, up
// and down in f32, with the per-expert scale of the weights (nil without)
// and Gemma 4's norms around the experts and router gain.
type frozenMoE struct {
	router                              linear
	gate, up, down                      []linear
	scale                               []float32
	preNorm, postNorm1, postNorm2, gain []float32
}

// linear is a frozen rows × cols weight in f32.
type linear struct {
	name       string
	w          []float32
	rows, cols int
}

// NewCPU dequantizes m's weights for the reference step; an architecture
// the step does not cover is refused by name.
func NewCPU(m *model.Model) (*CPU, error) {
	if err := supported(&m.Config); err != nil {
		return nil, err
	}
	r := &CPU{m: m, c: &m.Config, layers: make([]frozenLayer, len(m.Layers))}
	var err error
	vec := func(w *model.Weight) []float32 {
		if w == nil || err != nil {
			return nil
		}
		var v []float32
		v, err = w.F32()
		return v
	}
	lin := func(w *model.Weight) linear {
		return linear{name: w.Name, w: vec(w), rows: w.Rows, cols: w.Cols}
	}
	for i := range m.Layers {
		l, f := &m.Layers[i], &r.layers[i]
		if err == nil {
			f.LayerVectors, err = l.Vectors()
		}
		for t, w := range l.Projections() {
			if w != nil { // a layer reading another's cache has no k, v
				f.proj[t] = lin(w)
			}
		}
		if l.PLEGate != nil {
			f.pleGate, f.pleProj = lin(l.PLEGate), lin(l.PLEProj)
		}
		if l.LaurelL != nil {
			f.laurelL, f.laurelR = lin(l.LaurelL), lin(l.LaurelR)
		}
		if e := l.MoE; e != nil {
			fm := &frozenMoE{router: lin(e.Router), scale: vec(e.DownScale),
				preNorm: vec(e.PreNorm), postNorm1: vec(e.PostNorm1), postNorm2: vec(e.PostNorm2)}
			for k := range e.Down.Stack {
				if e.GateUp != nil {
					// Each expert's gate rows, then its up rows.
					gu := lin(e.GateUp.Matrix(k))
					half := gu.rows / 2 * gu.cols
					fm.gate = append(fm.gate, linear{name: gu.name + "[gate]", w: gu.w[:half], rows: gu.rows / 2, cols: gu.cols})
					fm.up = append(fm.up, linear{name: gu.name + "[up]", w: gu.w[half:], rows: gu.rows / 2, cols: gu.cols})
				} else {
					fm.gate = append(fm.gate, lin(e.Gate.Matrix(k)))
					fm.up = append(fm.up, lin(e.Up.Matrix(k)))
				}
				fm.down = append(fm.down, lin(e.Down.Matrix(k)))
			}
			if e.RouterScale != nil && err == nil {
				fm.gain, err = model.RouterGain(e, m.Config.Hidden)
			}
			f.moe = fm
		}
	}
	r.outNorm = vec(m.OutNorm)
	r.pleNorm = vec(m.PLEProjNorm)
	for _, w := range m.AltUpUnembd {
		r.unembd = append(r.unembd, lin(w))
	}
	r.output = lin(m.Output)
	if err != nil {
		return nil, fmt.Errorf("training: %w", err)
	}
	return r, nil
}

// checkExamples validates token ids, targets and lengths against the model.
func checkExamples(c *model.Config, examples []Example) error {
	for i, e := range examples {
		if len(e.Tokens) == 0 || len(e.Targets) != len(e.Tokens) {
			return fmt.Errorf("training: example %d: %d tokens and %d targets", i, len(e.Tokens), len(e.Targets))
		}
		if len(e.Tokens) > c.Context {
			return fmt.Errorf("training: example %d: %d tokens exceed the model's context of %d", i, len(e.Tokens), c.Context)
		}
		for t := range e.Tokens {
			if id := e.Tokens[t]; id < 0 || int(id) >= c.Vocab {
				return fmt.Errorf("training: example %d: token %d at %d is outside the vocabulary of %d", i, id, t, c.Vocab)
			}
			if id := e.Targets[t]; int(id) >= c.Vocab {
				return fmt.Errorf("training: example %d: target %d at %d is outside the vocabulary of %d", i, id, t, c.Vocab)
			}
		}
	}
	return nil
}

// Loss returns the summed cross-entropy of examples under the base with
// lora applied, and the number of positions with a target; the mean loss
// is sum/count.
func (r *CPU) Loss(lora *LoRA, examples []Example) (sum float64, count int, err error) {
	return r.run(lora, examples, nil)
}

// Backward returns Loss's sum and count and adds the gradient of the sum
// with respect to every A and B of lora to g. The gradient of the mean is
// g/count; leaving the division to the optimizer (GradScale) lets
// micro-batches accumulate sums: over several calls g holds the gradient
// of the whole batch's summed loss.
func (r *CPU) Backward(lora *LoRA, examples []Example, g *Grads) (sum float64, count int, err error) {
	if g == nil {
		return 0, 0, fmt.Errorf("training: Backward needs gradients to add to")
	}
	return r.run(lora, examples, g)
}

func (r *CPU) run(lora *LoRA, examples []Example, g *Grads) (sum float64, count int, err error) {
	if len(lora.index) != len(r.layers) {
		return 0, 0, fmt.Errorf("training: the adapter has %d layers, the model %d", len(lora.index), len(r.layers))
	}
	if err := checkExamples(r.c, examples); err != nil {
		return 0, 0, err
	}
	drop := dropouts{on: g != nil && lora.Config.Dropout > 0, seed: lora.Config.DropoutSeed, step: r.dropoutStep, p: lora.Config.Dropout}
	for _, e := range examples {
		s, n, err := r.example(lora, e, g, drop)
		if err != nil {
			return 0, 0, err
		}
		sum += s
		count += n
		drop.token0 += len(e.Tokens)
	}
	if g != nil {
		r.dropoutStep++
	}
	return sum, count, nil
}

// example runs one example forward, and backward when g is not nil.
func (r *CPU) example(lora *LoRA, e Example, g *Grads, drop dropouts) (float64, int, error) {
	c, m := r.c, r.m
	n, d := len(e.Tokens), c.Hidden

	// x = embedding rows plus the embedding pair's scale·B[id]·A, then
	// scaled (Gemma: sqrt(d_model)), as model.CPU. The pair adapts the
	// embedding module's output and Gemma scales after it
	// (transformers' GemmaModel: inputs_embeds = embed_tokens(ids), then
	// hidden_states = inputs_embeds * normalizer), which is also where
	// llama.cpp adds it (build_inp_embd). Gemma 3 scales inside the
	// module (Gemma3TextScaledWordEmbedding), and peft since
	// huggingface/peft#2825 scales the pair's delta with it: the same
	// function (see engine/adapter's PEFT notes).
	x := make([]float32, n*d)
	rb := m.Embed.RowBytes()
	var ep *Pair
	if lora.embed >= 0 {
		ep = lora.Pairs[lora.embed]
	}
	for t, id := range e.Tokens {
		row := x[t*d : (t+1)*d]
		if err := gguf.Dequantize(m.Embed.Type, m.Embed.Data[int(id)*rb:(int(id)+1)*rb], row); err != nil {
			return 0, 0, fmt.Errorf("training: %s row %d: %w", m.Embed.Name, id, err)
		}
		if ep != nil {
			loraEmbedRow(ep, lora.Config.Scale(), int(id), row)
		}
		if c.EmbedScale != 0 {
			for j := range row {
				row[j] *= c.EmbedScale
			}
		}
	}

	// Gemma 4's per-layer embeddings: inputs of every layer, from the
	// tokens and their scaled embeddings (which no pair adapts here:
	// supportedTargets).
	var ple *model.PLEInputs
	if m.PLE != nil {
		var err error
		if ple, err = m.PLEInputsCPU(e.Tokens, x, r.pleNorm); err != nil {
			return 0, 0, fmt.Errorf("training: %w", err)
		}
	}

	// Gemma 3n's streams, from the scaled embeddings.
	if c.AltUp > 0 {
		var err error
		if x, err = m.AltUpStreamsCPU(x, n); err != nil {
			return 0, 0, fmt.Errorf("training: %w", err)
		}
	}

	// The layers, keeping each one's input (the checkpoint), and the keys
	// and values of those whose cache later layers read (Gemma 3n's and
	// 4's KV sharing).
	inputs := make([][]float32, len(r.layers))
	kv := make([]sharedKV, len(r.layers))
	for i := range r.layers {
		inputs[i] = x
		a, err := r.layer(i, lora, x, n, drop, ple, kv)
		if err != nil {
			return 0, 0, err
		}
		if c.OwnKV(i) {
			kv[i] = sharedKV{k: a.K, v: a.V}
		}
		x = a.out
	}

	// Gemma 3n's streams merged into one row a token.
	var unembedded []float32
	if c.AltUp > 0 {
		var err error
		if unembedded, err = m.AltUpUnembedCPU(x, n); err != nil {
			return 0, 0, fmt.Errorf("training: %w", err)
		}
		x = ref.AltUpMerge(unembedded, model.AltUpArgs(c, n))
	}

	// Logits = Output · norm(x); the loss is the cross-entropy of the
	// soft-capped logits (Gemma 2), the cap applied inside CrossEntropy.
	normArgs := ref.NormArgs{Rows: n, Dim: d, Eps: c.Eps}
	xn := ref.RMSNorm(x, r.outNorm, normArgs)
	logits := matmul(r.output, xn, n)
	// The head's pair, its input dropped out as a layer pair's.
	var hp *Pair
	var hd *dropout
	var xnd, hh []float32
	if lora.head >= 0 {
		hp, hd = lora.Pairs[lora.head], drop.of(lora.head)
		xnd = hd.apply(xn, n, d)
		hh = loraForward(hp, slot{k: lora.head, rows: hp.Rows}, lora.Config.Scale(), xnd, logits, n)
	}
	targets := e.Targets
	count := 0
	for _, t := range targets {
		if t >= 0 {
			count++
		}
	}
	loss, dlogits := ref.CrossEntropyBackward(logits, targets, n, c.Vocab, 1, c.FinalSoftcap)
	sum := 0.0
	for _, v := range loss {
		sum += float64(v)
	}
	if g == nil || count == 0 {
		return sum, count, nil
	}

	// Backward: head, final norm, then the layers in reverse, each run
	// forward again from its checkpoint.
	dxn := matmulBackward(r.output, dlogits, n)
	if hp != nil {
		k := lora.head
		dl := make([]float32, n*d)
		loraBackward(hp, slot{k: k, rows: hp.Rows}, lora.Config.Scale(), xnd, hh, dlogits, dl, g.A[k], g.B[k], n)
		ref.AddInPlace(dxn, hd.apply(dl, n, d))
	}
	dx := ref.RMSNormBackward(x, r.outNorm, dxn, normArgs)
	if c.AltUp > 0 {
		// Back through the merge and the unembedding projections.
		du := ref.AltUpMergeBackward(unembedded, dx, model.AltUpArgs(c, n))
		rows := n * d
		dx = du[:rows:rows]
		for k, w := range r.unembd {
			dx = append(dx, matmulBackward(w, du[(k+1)*rows:(k+2)*rows], n)...)
		}
	}
	for i := len(r.layers) - 1; i >= 0; i-- {
		a, err := r.layer(i, lora, inputs[i], n, drop, ple, kv)
		if err != nil {
			return 0, 0, err
		}
		dx = r.layerBackward(i, lora, a, dx, g, kv)
	}
	if ep != nil {
		embedBackward(ep, lora.Config.Scale()*embedScale(c), e.Tokens, dx, g.A[lora.embed], g.B[lora.embed])
	}
	return sum, count, nil
}

// embedScale is the factor on the embedding rows: EmbedScale, or 1.
func embedScale(c *model.Config) float32 {
	if c.EmbedScale != 0 {
		return c.EmbedScale
	}
	return 1
}

// loraEmbedRow adds scale·B[id]·A to row: the embedding pair's correction
// of token id (A rank × hidden, B vocab × rank; PEFT's lora_embedding_A is
// Bᵀ, lora_embedding_B Aᵀ), summed in float64.
func loraEmbedRow(p *Pair, scale float32, id int, row []float32) {
	b := p.B[id*p.Rank : (id+1)*p.Rank]
	for j := range row {
		s := 0.0
		for k, v := range b {
			s += float64(v) * float64(p.A[k*p.Cols+j])
		}
		row[j] += scale * float32(s)
	}
}

// embedBackward adds the embedding pair's gradients for dx, the gradient
// of the rows e = f·(W[id] + s·B[id]·A) of ids, with fs = f·s:
//
//	dA += fs·Hᵀ·dx      H[t] = B[id_t] (n × rank)
//	dB[id_t] += fs·dx[t]·Aᵀ, summed over the t of each id
//
// only the rows of B of the ids in the batch get a gradient.
func embedBackward(p *Pair, fs float32, ids []int32, dx, dA, dB []float32) {
	n := len(ids)
	h := make([]float32, n*p.Rank)
	for t, id := range ids {
		copy(h[t*p.Rank:(t+1)*p.Rank], p.B[int(id)*p.Rank:(int(id)+1)*p.Rank])
	}
	addTo(dA, ref.MatMulTN(h, dx, n, p.Rank, p.Cols, fs))
	dh := matmul(linear{w: p.A, rows: p.Rank, cols: p.Cols}, dx, n)
	ref.ScatterAddRows(dB, dh, ids, p.Rank, fs)
}

// sharedKV is a layer's keys (rotated) and values (normed) as later
// layers past Gemma 4's KV-sharing boundary read them, and the gradients
// those layers send back to them.
type sharedKV struct {
	k, v   []float32
	dk, dv []float32
}

// activations are what one layer's backward needs of its forward: the
// block's intermediates (model.ForwardLayerCPU records them) and its LoRA
// pairs' own.
type activations struct {
	model.LayerActivations
	// keys and values are those the attention read: the layer's own, or
	// the cache of the layer it shares.
	keys, values []float32
	// out is the layer's output: the block's (LayerActivations.Out), or
	// Gemma 3n's corrected streams.
	out  []float32
	n    int
	ha   [numTargets][]float32 // A·drop(x) of each adapted projection
	xd   [numTargets][]float32 // drop(x), its input after dropout
	drop [numTargets]*dropout  // its mask, nil for none
}

// layer is block i's forward over n tokens, model.ForwardLayerCPU with
// every projection summed in float64 and gaining its LoRA correction.
func (r *CPU) layer(i int, lora *LoRA, x []float32, n int, drop dropouts, ple *model.PLEInputs, kv []sharedKV) (*activations, error) {
	l := &r.layers[i]
	a := &activations{n: n}
	cl := model.CPULayer{Vectors: &l.LayerVectors, Factors: r.m.RopeFactors, PLE: ple}
	if j := r.c.Shape(i).KVLayer; j != i {
		// The tokens' keys and values in the producer's layer, as a
		// cache of n positions the layer reads from position 0.
		cl.K, cl.V = kv[j].k, kv[j].v
	}
	// mul is W·x plus the LoRA correction scale·B·(A·drop(x)), keeping
	// A·drop(x) and drop(x) (x itself without dropout; a fused pair's
	// slices share one mask, that of their pair).
	mul := func(p model.Proj, x []float32, n int) ([]float32, error) {
		t := int(p)
		y := matmul(l.proj[t], x, n)
		if p, s := lora.pair(i, t); p != nil {
			a.drop[t] = drop.of(s.k)
			a.xd[t] = a.drop[t].apply(x, n, p.Cols)
			a.ha[t] = loraForward(p, s, lora.Config.Scale(), a.xd[t], y, n)
		}
		return y, nil
	}
	cl.Mul = mul
	var err error
	if a.out, err = r.m.ForwardLayerCPU(i, x, n, cl, &a.LayerActivations); err != nil {
		return nil, fmt.Errorf("training: %w", err)
	}
	a.keys, a.values = a.K, a.V
	if cl.K != nil {
		a.keys, a.values = cl.K, cl.V
	}
	return a, nil
}

// layerBackward takes the gradient of block i's output to that of its
// input, adding the gradients of its LoRA pairs to g. The frozen weights,
// norms and biases get none.
//
// A layer that reads another's cache sends the gradients of those keys and
// values back to it through kv (the later layer's backward runs first); a
// layer whose cache others read adds theirs to its own.
func (r *CPU) layerBackward(i int, lora *LoRA, a *activations, dout []float32, g *Grads, kv []sharedKV) []float32 {
	if r.c.AltUp > 0 {
		return r.altUpBackward(i, lora, a, dout, g, kv)
	}
	return r.blockBackward(i, lora, a, dout, g, kv)
}

// altUpBackward is layerBackward for a Gemma 3n layer: dout and the result
// are its streams' gradients. Back through the per-layer embedding's add
// to streams 1.., the correction (to the predictions and the block's
// output), the block, and the prediction (to the streams).
func (r *CPU) altUpBackward(i int, lora *LoRA, a *activations, dout []float32, g *Grads, kv []sharedKV) []float32 {
	c, l := r.c, &r.layers[i]
	n, d := a.n, c.Hidden
	args := model.AltUpArgs(c, n)
	rows := n * d
	added := make([]float32, rows)
	for k := 1; k < c.AltUp; k++ {
		ref.AddInPlace(added, dout[k*rows:(k+1)*rows])
	}
	dy := ref.RMSNormBackward(a.PLEY, l.PLENorm, added, ref.NormArgs{Rows: n, Dim: d, Eps: c.Eps})
	dgate, _ := ref.GeGLUBackward(a.PLEG, a.PLE, matmulBackward(l.pleProj, dy, n))
	dfirst := matmulBackward(l.pleGate, dgate, n)
	dpred, dblock := ref.AltUpCorrectBackward(a.Pred, a.Out, l.AltUpRouterNorm, l.AltUpRouter, l.AltUpCorrect, l.AltUpScale, dout, dfirst, args)
	dactive := r.blockBackward(i, lora, a, dblock, g, kv)
	return ref.AltUpPredictBackward(a.Streams, l.AltUpRouterNorm, l.AltUpRouter, l.AltUpPredict, dpred, dactive, args)
}

// blockBackward is layerBackward on one stream: the block's own.
func (r *CPU) blockBackward(i int, lora *LoRA, a *activations, dout []float32, g *Grads, kv []sharedKV) []float32 {
	c, l := r.c, &r.layers[i]
	n, d := a.n, c.Hidden
	sh, own := c.Shape(i), c.OwnKV(i)
	hd := sh.HeadDim
	normBack := func(x, w, dy []float32, rows, dim int) []float32 {
		return ref.RMSNormBackward(x, w, dy, ref.NormArgs{Rows: rows, Dim: dim, Eps: c.Eps})
	}
	// mulBack is the gradient of mul's input for the gradient dy of its
	// output: dy·W, plus the LoRA pair's Aᵀ·dh, its own gradients added to
	// g.
	mulBack := func(t int, x, dy []float32) []float32 {
		dx := matmulBackward(l.proj[t], dy, n)
		if p, s := lora.pair(i, t); p != nil {
			dl := dx
			if a.drop[t] != nil {
				dl = make([]float32, len(dx))
			}
			loraBackward(p, s, lora.Config.Scale(), a.xd[t], a.ha[t], dy, dl, g.A[s.k], p.rowsB(g.B[s.k], s), n)
			if a.drop[t] != nil {
				// The mask's backward is the mask.
				ref.AddInPlace(dx, a.drop[t].apply(dl, n, p.Cols))
			}
		}
		return dx
	}

	// Gemma 4's tail: out = (f1 + norm(P·(gelu(G·f1)·ple)))·scale, f1 the
	// feed-forward's output.
	if s := r.m.Layers[i].OutScale; s != 0 {
		dout = ref.Scale(dout, s)
	}
	if a.PLEIn != nil {
		dy := normBack(a.PLEY, l.PLENorm, dout, n, d)
		dh := matmulBackward(l.pleProj, dy, n)
		dg, _ := ref.GeGLUBackward(a.PLEG, a.PLE, dh)
		dout = ref.Add(dout, matmulBackward(l.pleGate, dg, n))
	}

	// Feed-forward: out = x2 + post(f).
	dx2 := append([]float32(nil), dout...)
	df := dout
	if l.PostFFNNorm != nil {
		df = normBack(a.F, l.PostFFNNorm, df, n, d)
	}
	var dxn2 []float32
	if fm := l.moe; fm != nil && !c.MoE.Dense {
		dIn, dRouter := r.moeBackward(fm, a, df)
		dxn2 = ref.Add(dIn, dRouter)
	} else {
		if fm != nil {
			// Gemma 4: f = norm1(dense) + norm2(experts(pre_norm_2(x2))),
			// the router on x2's own norm.
			mo := a.MoE
			dSum := normBack(mo.Sum, fm.postNorm2, df, n, d)
			df = normBack(mo.Dense, fm.postNorm1, df, n, d)
			dIn, dRouter := r.moeBackward(fm, a, dSum)
			ref.AddInPlace(dx2, normBack(a.X2, fm.preNorm, dIn, n, d))
			ref.AddInPlace(dx2, normBack(a.X2, fm.gain, dRouter, n, d))
		}
		dh := mulBack(tDown, a.H, df)
		var dgate, dup []float32
		if c.GELU {
			dgate, dup = ref.GeGLUBackward(a.Gate, a.Up, dh)
		} else {
			dgate, dup = ref.SwiGLUBackward(a.Gate, a.Up, dh)
		}
		if a.GateIn != nil {
			// Gemma 3n's sparsity of the gate.
			dgate = ref.GaussianTopKBackward(a.GateIn, dgate, n, sh.FF, sh.FF, sh.Sparsity)
		}
		dxn2 = mulBack(tGate, a.XN2, dgate)
		ref.AddInPlace(dxn2, mulBack(tUp, a.XN2, dup))
	}
	ref.AddInPlace(dx2, normBack(a.X2, l.FFNNorm, dxn2, n, d))

	// Attention: x2 = x + post(O·att); with Gemma 3n's LAuReL, x2 = (x +
	// post(O·att) + xn + norm(R·L·xn))/√2.
	if a.LaurelT != nil {
		dx2 = ref.Scale(dx2, float32(math.Sqrt(0.5)))
	}
	do := dx2
	if l.PostAttnNorm != nil {
		do = normBack(a.O, l.PostAttnNorm, do, n, d)
	}
	datt := mulBack(tO, a.Att, do)
	dq, dk, dv := ref.AttentionBackward(a.Q, a.keys, a.values, datt, a.Attention)
	factors := r.m.RopeFactors
	if !sh.RopeFactors {
		factors = nil
	}
	dq = ref.RoPEBackward(dq, factors, nil, a.RopeQ)
	if l.QNorm != nil {
		dq = normBack(a.QIn, l.QNorm, dq, n*c.Heads, hd)
	}
	dxn := mulBack(tQ, a.XN, dq)
	if own {
		if p := &kv[i]; p.dk != nil {
			ref.AddInPlace(dk, p.dk)
			ref.AddInPlace(dv, p.dv)
		}
		dk = ref.RoPEBackward(dk, factors, nil, a.RopeK)
		if l.QNorm != nil {
			dk = normBack(a.KIn, l.KNorm, dk, n*sh.KVHeads, hd)
		}
		if a.VIn != nil {
			dv = normBack(a.VIn, nil, dv, n*sh.KVHeads, hd)
		}
		ref.AddInPlace(dxn, mulBack(tK, a.XN, dk))
		ref.AddInPlace(dxn, mulBack(tV, a.XN, dv))
	} else {
		p := &kv[sh.KVLayer]
		if p.dk == nil {
			p.dk, p.dv = make([]float32, len(dk)), make([]float32, len(dv))
		}
		ref.AddInPlace(p.dk, dk)
		ref.AddInPlace(p.dv, dv)
	}
	if a.LaurelT != nil {
		ref.AddInPlace(dxn, dx2)
		dr := normBack(a.LaurelR, l.LaurelNorm, dx2, n, d)
		ref.AddInPlace(dxn, matmulBackward(l.laurelL, matmulBackward(l.laurelR, dr, n), n))
	}
	dx := normBack(a.X, l.AttnNorm, dxn, n, d)
	ref.AddInPlace(dx, dx2)
	return dx
}

// moeBackward is the gradient of a mixture of experts' inputs for the
// gradient df of its weighted sum, the experts' choice held fixed: back
// through the combine to each slot's output and router weight, through
// each slot's expert (down, its GLU, gate and up) to the token's row of
// the experts' input (dIn), and through the router to its input
// (dRouter; the same rows as the experts' but in Gemma 4). Neither router
// nor experts are LoRA targets.
func (r *CPU) moeBackward(f *frozenMoE, a *activations, df []float32) (dIn, dRouter []float32) {
	c := r.c
	e, mo, n, d := c.MoE, a.MoE, a.n, c.Hidden
	ff, k := e.FF, e.Used
	dY, dW := ref.MoECombineBackward(mo.Y, mo.Weights, df, n, k, d, e.Scale)
	dl := ref.MoERouteBackward(mo.Logits, f.scale, mo.IDs, dW, ref.MoERouteArgs{Tokens: n, Experts: e.Experts, TopK: k, Sigmoid: e.Sigmoid, Renorm: e.Renorm})
	dRouter = matmulBackward(f.router, dl, n)
	dxn := make([]float32, n*d)
	for s, ex := range mo.IDs {
		dh := matmulBackward(f.down[ex], dY[s*d:(s+1)*d], 1)
		g, u := mo.Gate[s*ff:(s+1)*ff], mo.Up[s*ff:(s+1)*ff]
		var dg, du []float32
		switch {
		case e.OAI:
			dg, du = ref.SwiGLUOAIBackward(g, u, dh)
		case c.GELU:
			dg, du = ref.GeGLUBackward(g, u, dh)
		default:
			dg, du = ref.SwiGLUBackward(g, u, dh)
		}
		row := dxn[(s/k)*d : (s/k+1)*d]
		ref.AddInPlace(row, matmulBackward(f.gate[ex], dg, 1))
		ref.AddInPlace(row, matmulBackward(f.up[ex], du, 1))
	}
	return dxn, dRouter
}

// loraForward adds scale·B·(A·x) to y for m rows, B cut to slot s's rows,
// and returns A·x (m × rank), rounded to f32 as model.CPU's applyLoRA
// rounds it. The slices of a fused pair each compute A·x again: a rank-wide
// product, cheap next to W·x.
func loraForward(p *Pair, s slot, scale float32, x, y []float32, m int) []float32 {
	h := matmul(linear{w: p.A, rows: p.Rank, cols: p.Cols}, x, m)
	by := matmul(linear{w: p.rowsB(p.B, s), rows: s.rows, cols: p.Rank}, h, m)
	for j, v := range by {
		y[j] += scale * v
	}
	return h
}

// loraBackward is the pair's part of the backward of y = W·x + s·B·(A·x)
// over m rows, for the gradient dy of y, with h = A·x:
//
//	dh = s·dy·B        (m × rank)
//	dB += s·dyᵀ·h      (rows × rank)
//	dA += dhᵀ·x        (rank × cols)
//	dx += dh·A         (m × cols)
//
// For a slice of a fused pair, B and dB are the slice's rows; the slices'
// terms of dA sum to the fused tensor's, the map being linear in each.
func loraBackward(p *Pair, s slot, scale float32, x, h, dy, dx, dA, dB []float32, m int) {
	dh := matmulBackward(linear{w: p.rowsB(p.B, s), rows: s.rows, cols: p.Rank}, dy, m)
	for j := range dh {
		dh[j] *= scale
	}
	addTo(dB, ref.MatMulTN(dy, h, m, s.rows, p.Rank, scale))
	addTo(dA, ref.MatMulTN(dh, x, m, p.Rank, p.Cols, 1))
	ref.AddInPlace(dx, matmulBackward(linear{w: p.A, rows: p.Rank, cols: p.Cols}, dh, m))
}

func addTo(dst, src []float32) {
	for j, v := range src {
		dst[j] += v
	}
}

// parallelMin is the fewest rows a core is given: below 16 the product
// runs on one goroutine.
const parallelMin = 8

// matmul returns Y[m × rows] = X[m × cols]·Wᵀ, each product summed in
// float64 and rounded once; W's rows are spread over the cores.
func matmul(w linear, x []float32, m int) []float32 {
	y := make([]float32, m*w.rows)
	parallel.For(w.rows, parallelMin, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			wr := w.w[r*w.cols : (r+1)*w.cols]
			for t := range m {
				xt := x[t*w.cols : (t+1)*w.cols]
				s := 0.0
				for j, v := range wr {
					s += float64(v) * float64(xt[j])
				}
				y[t*w.rows+r] = float32(s)
			}
		}
	})
	return y
}

// matmulBackward returns dX[m × cols] = dY[m × rows]·W, the gradient of
// matmul's input, summed in float64; the m rows are spread over the cores.
func matmulBackward(w linear, dy []float32, m int) []float32 {
	dx := make([]float32, m*w.cols)
	parallel.For(m, parallelMin, func(lo, hi int) {
		acc := make([]float64, w.cols)
		for t := lo; t < hi; t++ {
			clear(acc)
			for r, g := range dy[t*w.rows : (t+1)*w.rows] {
				if g == 0 {
					continue
				}
				gf := float64(g)
				for j, v := range w.w[r*w.cols : (r+1)*w.cols] {
					acc[j] += gf * float64(v)
				}
			}
			for j, v := range acc {
				dx[t*w.cols+j] = float32(v)
			}
		}
	})
	return dx
}

// meanLoss is sum/count, NaN when nothing is trained.
func meanLoss(sum float64, count int) float64 {
	if count == 0 {
		return math.NaN()
	}
	return sum / float64(count)
}
