package training

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/engine/model"
)

// Targets are the projections LoRA may adapt, in the order a layer's
// forward pass reaches them; LoRAConfig.Targets names a subset, and no
// names means all of them.
var Targets = []string{"q", "k", "v", "o", "gate", "up", "down"}

// ModelTargets are the targets outside the layers, adapted only when
// LoRAConfig.Targets names them: "embed", the token embeddings
// (token_embd.weight, PEFT's lora.Embedding on embed_tokens), and
// "output", the LM head (output.weight, PEFT's lora.Linear on lm_head).
//
// A model that ties its head to its embeddings has one tensor for both,
// token_embd.weight, and so one pair: naming either target adapts both
// uses, the lookup and the head, as llama.cpp and engine/model run a
// token_embd.weight pair on such a model and as merging it into the file
// would. (PEFT would give a tied lm_head a pair of its own; llama.cpp has
// no tensor to hang it on, and convert_lora_to_gguf.py refuses one.)
var ModelTargets = []string{"embed", "output"}

// targetTensor is each target's GGUF tensor in block N: blk.N.<name>.weight.
var targetTensor = [...]string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}

// The targets as indices into a layer's projections, model.Proj's order.
const (
	tQ         = int(model.ProjQ)
	tK         = int(model.ProjK)
	tV         = int(model.ProjV)
	tO         = int(model.ProjO)
	tGate      = int(model.ProjGate)
	tUp        = int(model.ProjUp)
	tDown      = int(model.ProjDown)
	numTargets = int(model.NumProj)
)

// LoRAConfig chooses the adapter: y = W·x + Alpha/Rank·B·(A·x) on each
// targeted projection W of every layer, PEFT's lora_alpha/r scaling.
type LoRAConfig struct {
	Rank  int
	Alpha float32
	// Dropout is PEFT's lora_dropout, 0 ≤ Dropout < 1: in a training
	// step (Backward), the input x of each pair's A·x is multiplied by a
	// dropout mask scaled by 1/(1−Dropout) (torch.nn.Dropout's training
	// mode), W·x and the embedding pair (PEFT's lora.Embedding has none)
	// untouched; never in Loss or at inference. The mask is a hash of
	// (DropoutSeed, the step's dropout counter, the pair, the token's
	// place in its micro-batch, the column) — ref.DropoutMask — so the
	// recomputation before a layer's backward, the CPU and the GPU steps
	// all draw the same one; see CPU.SetDropoutStep and GPU.SetDropoutStep.
	Dropout float32
	// DropoutSeed seeds the dropout masks of a run.
	DropoutSeed uint64
	// Targets are names from Targets and ModelTargets; empty means all of
	// Targets.
	Targets []string
}

// Scale is the factor on B·A: Alpha/Rank.
func (c LoRAConfig) Scale() float32 { return c.Alpha / float32(c.Rank) }

// targets returns the chosen targets as a set of indices.
func (c LoRAConfig) targets() ([numTargets]bool, error) {
	var on [numTargets]bool
	if len(c.Targets) == 0 {
		for i := range on {
			on[i] = true
		}
		return on, nil
	}
	for _, name := range c.Targets {
		i := slices.Index(Targets, name)
		if i < 0 && !slices.Contains(ModelTargets, name) {
			return on, fmt.Errorf("training: LoRA target %q is not one of %s", name, strings.Join(append(slices.Clone(Targets), ModelTargets...), ", "))
		}
		if i >= 0 {
			on[i] = true
		}
	}
	return on, nil
}

// modelTargets reports whether the embeddings and the head are named.
func (c LoRAConfig) modelTargets() (embed, output bool) {
	return slices.Contains(c.Targets, "embed"), slices.Contains(c.Targets, "output")
}

func (c LoRAConfig) validate() error {
	if c.Rank <= 0 {
		return fmt.Errorf("training: LoRA rank %d must be positive", c.Rank)
	}
	if !(c.Alpha > 0) || math.IsInf(float64(c.Alpha), 0) {
		return fmt.Errorf("training: LoRA alpha %v must be a positive number", c.Alpha)
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		return fmt.Errorf("training: LoRA dropout %v must be in [0, 1)", c.Dropout)
	}
	_, err := c.targets()
	return err
}

// Pair is the trainable pair of one targeted projection W (Rows × Cols,
// output × input): A (Rank × Cols) and B (Rows × Rank), row-major, in the
// shapes PEFT and llama.cpp's GGUF LoRA use.
type Pair struct {
	Name       string // the base tensor: blk.N.attn_q.weight
	Layer      int
	Target     string // "q", …, "down"; a fused pair's joined: "q+k+v", "gate+up"
	Rank       int
	Rows, Cols int
	A, B       []float32
}

// LoRA is an adapter being trained: its configuration and one pair per
// layer and targeted weight, layer by layer in the order of Targets.
//
// A projection cut from a fused tensor (Phi-3's q, k and v from attn_qkv,
// its gate and up from ffn_up) is adapted as PEFT and llama.cpp adapt it:
// one pair for the whole fused tensor (qkv_proj, gate_up_proj), whose B
// rows split among the projections. Naming any of them in Targets adapts
// the whole fused tensor.
type LoRA struct {
	Config LoRAConfig
	Pairs  []*Pair
	// index[layer][target] is where that projection's correction comes
	// from; k is -1 for none.
	index [][numTargets]slot
	// embed and head are the pairs of the token embeddings and the LM
	// head, -1 for none; one pair when the head is tied (token_embd).
	embed, head int
}

// slot places one projection in a pair: B's rows [row0, row0+rows) give
// its output (all of B unless the pair's weight is fused).
type slot struct{ k, row0, rows int }

// NewLoRA makes an adapter for m as PEFT initializes one
// (LoraLayer.reset_lora_parameters with init_lora_weights=True): A by
// kaiming_uniform_(a=sqrt(5)), which for fan_in = Cols is U(−1/√Cols,
// 1/√Cols) (gain √(2/(1+5)) times √3/√fan_in), and B zeros, so the adapted
// model starts as the base. The draw is seeded and goes pair by pair in
// Pairs' order.
func NewLoRA(m *model.Model, c LoRAConfig, seed uint64) (*LoRA, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := supported(&m.Config); err != nil {
		return nil, err
	}
	on, _ := c.targets()
	if e := m.Config.MoE; e != nil && !e.Dense && len(c.Targets) > 0 {
		// Named feed-forward targets on a mixture of experts: its stacked
		// experts are not adapted (the default, every target, adapts the
		// attention projections of such a model). Gemma 4's experts run
		// beside a dense feed-forward, whose gate, up and down are.
		for _, t := range []int{tGate, tUp, tDown} {
			if on[t] {
				return nil, fmt.Errorf("training: LoRA target %q: %s's feed-forward is a mixture of %d experts (blk.N.ffn_%s_exps.weight), which LoRA does not adapt; the attention targets (q, k, v, o) are", Targets[t], m.Config.Arch, e.Experts, Targets[t])
			}
		}
	}
	l := &LoRA{Config: c, index: make([][numTargets]slot, len(m.Layers)), embed: -1, head: -1}
	rng := rand.New(rand.NewPCG(seed, 0x4c6f5241)) // "LoRA"
	for i := range m.Layers {
		ws := m.Layers[i].Projections()
		// A fused tensor is adapted when any of its projections is
		// named.
		fusedOn := map[string]bool{}
		for t, w := range ws {
			if w == nil {
				continue
			}
			if f := fusedName(w); f != "" && on[t] {
				fusedOn[f] = true
			}
		}
		rows := map[string]int{} // a fused tensor's rows so far
		for t := range numTargets {
			l.index[i][t] = slot{k: -1}
			w := ws[t]
			if w == nil || (t == tK || t == tV) && ws[tV] == ws[tK] {
				// A Gemma 4 layer reading another's cache has no k or v
				// (nor does transformers' model a module to adapt); one
				// whose values are k's projection (attention_k_eq_v)
				// has no v_proj, and a k adapter would have to reach the
				// values too.
				continue
			}
			name, fused := fmt.Sprintf("blk.%d.%s.weight", i, targetTensor[t]), fusedName(w)
			if fused != "" {
				name = fused
			}
			if !on[t] && !fusedOn[fused] {
				continue
			}
			if fused != "" && rows[fused] > 0 {
				// A later slice of a pair made at the first.
				k := len(l.Pairs) - 1
				p := l.Pairs[k]
				l.index[i][t] = slot{k: k, row0: rows[fused], rows: w.Rows}
				rows[fused] += w.Rows
				p.Rows, p.Target = rows[fused], p.Target+"+"+Targets[t]
				continue
			}
			p := &Pair{Name: name, Layer: i, Target: Targets[t], Rank: c.Rank, Rows: w.Rows, Cols: w.Cols}
			l.index[i][t] = slot{k: len(l.Pairs), rows: w.Rows}
			rows[fused] = w.Rows
			l.Pairs = append(l.Pairs, p)
		}
	}
	// The embeddings and the head, after the layers (so that the layers'
	// draws do not depend on them).
	embed, output := c.modelTargets()
	if m.PLE != nil && (embed || output && m.Output == m.Embed) {
		// Their per-layer inputs project the embeddings too, a path the
		// step's backward does not take.
		return nil, fmt.Errorf("training: LoRA on %s (the \"embed\" target, or \"output\" where the head is that tensor) is not supported on %s: its per-layer embeddings read the token embeddings too; the layer targets (%s) are", m.Embed.Name, m.Config.Arch, strings.Join(Targets, ", "))
	}
	tied := m.Output == m.Embed
	if embed || output && tied {
		l.embed = len(l.Pairs)
		target := "embed"
		if tied {
			l.head, target = l.embed, "embed+output"
		}
		l.Pairs = append(l.Pairs, &Pair{Name: m.Embed.Name, Layer: -1, Target: target, Rank: c.Rank, Rows: m.Embed.Rows, Cols: m.Embed.Cols})
	}
	if output && !tied {
		l.head = len(l.Pairs)
		l.Pairs = append(l.Pairs, &Pair{Name: m.Output.Name, Layer: -1, Target: "output", Rank: c.Rank, Rows: m.Output.Rows, Cols: m.Output.Cols})
	}
	for k, p := range l.Pairs {
		p.A, p.B = make([]float32, p.Rank*p.Cols), make([]float32, p.Rows*p.Rank)
		if k == l.embed && embed {
			// PEFT's Embedding: lora_embedding_A (r × vocab, our Bᵀ)
			// zeros, lora_embedding_B (hidden × r, our Aᵀ) N(0, 1).
			for j := range p.A {
				p.A[j] = float32(rng.NormFloat64())
			}
			continue
		}
		bound := 1 / math.Sqrt(float64(p.Cols))
		for j := range p.A {
			p.A[j] = float32((2*rng.Float64() - 1) * bound)
		}
	}
	return l, nil
}

// FromAdapter makes a LoRA that continues training a (a PEFT folder or a
// GGUF LoRA read by engine/adapter, a checkpoint): the same targets on
// every layer of m (and the embeddings or the head when a has their
// pairs), one rank, A and B copied. An adapter that NewLoRA could not have
// made for m (a target on some layers only, ranks that differ) is refused,
// naming the tensor.
func FromAdapter(m *model.Model, a *adapter.Adapter) (*LoRA, error) {
	if err := a.Check(m); err != nil {
		return nil, err
	}
	rank, err := a.Rank()
	if err != nil {
		return nil, err
	}
	c := LoRAConfig{Rank: rank, Alpha: a.Alpha}
	if c.Alpha == 0 {
		c.Alpha = float32(rank) // llama.cpp's alpha 0: factor 1
	}
	seen := map[string]bool{}
	for _, name := range a.Names() {
		if t, ok := map[string]string{m.Embed.Name: "embed", m.Output.Name: "output"}[name]; ok {
			c.Targets = append(c.Targets, t)
			continue
		}
		var layer int
		var tensor string
		var proj *arch.Tensor
		if _, err := fmt.Sscanf(strings.ReplaceAll(name, ".", " "), "blk %d %s weight", &layer, &tensor); err == nil {
			proj = layerTensor(&m.Config, tensor+".weight")
		}
		if proj == nil || len(proj.LoRA) == 0 {
			return nil, fmt.Errorf("training: adapter tensor %q is not a layer projection training adapts", name)
		}
		// A fused tensor (Phi-3's attn_qkv, its gate-and-up ffn_up) is
		// adapted by each of its projections' targets.
		for _, t := range proj.LoRA {
			if !seen[t] {
				seen[t] = true
				c.Targets = append(c.Targets, t)
			}
		}
	}
	l, err := NewLoRA(m, c, 0)
	if err != nil {
		return nil, err
	}
	if len(l.Pairs) != len(a.Pairs) {
		return nil, fmt.Errorf("training: the adapter has %d pairs; its targets (%s) on every layer make %d", len(a.Pairs), strings.Join(c.Targets, ", "), len(l.Pairs))
	}
	for _, p := range l.Pairs {
		q, ok := a.Pairs[p.Name]
		if !ok {
			return nil, fmt.Errorf("training: the adapter has no pair for %q: its targets must cover every layer", p.Name)
		}
		copy(p.A, q.A)
		copy(p.B, q.B)
	}
	return l, nil
}

// fusedName is the file tensor a projection was cut from
// ("blk.0.attn_qkv.weight" for "blk.0.attn_qkv.weight[q]"), "" when it is
// a tensor of its own.
func fusedName(w *model.Weight) string {
	if i := strings.LastIndexByte(w.Name, '['); i > 0 && strings.HasSuffix(w.Name, "]") {
		return w.Name[:i]
	}
	return ""
}

// pair returns layer i's pair for target t with its slot, nil when the
// projection is not adapted.
func (l *LoRA) pair(i, t int) (*Pair, slot) {
	s := l.index[i][t]
	if s.k < 0 {
		return nil, s
	}
	return l.Pairs[s.k], s
}

// slots lists pair k's projections in row order: one, or a fused
// tensor's slices.
func (l *LoRA) slots(k int) []slot {
	p := l.Pairs[k]
	if p.Layer < 0 {
		return []slot{{k: k, rows: p.Rows}} // the embeddings' or the head's
	}
	var out []slot
	for t := range numTargets {
		if s := l.index[p.Layer][t]; s.k == k {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b slot) int { return a.row0 - b.row0 })
	return out
}

// rowsB is B's rows for slot s: the projection's part of a fused pair.
func (p *Pair) rowsB(b []float32, s slot) []float32 {
	return b[s.row0*p.Rank : (s.row0+s.rows)*p.Rank]
}

// Runtime is the adapter as a runner applies it (model.CPU, model.GPU
// SetAdapters). It shares A and B with l.
func (l *LoRA) Runtime() model.LoRA {
	r := model.LoRA{Scale: l.Config.Scale(), Weights: map[string]model.LoRAWeight{}}
	for _, p := range l.Pairs {
		r.Weights[p.Name] = model.LoRAWeight{Rank: p.Rank, A: p.A, B: p.B}
	}
	return r
}

// Adapter is the adapter for export (engine/adapter writes GGUF LoRA
// files and PEFT folders) for a base of architecture arch. It copies A and
// B.
func (l *LoRA) Adapter(arch string) *adapter.Adapter {
	a := &adapter.Adapter{Arch: arch, Alpha: l.Config.Alpha, Dropout: l.Config.Dropout, Pairs: map[string]*adapter.Pair{}}
	for _, p := range l.Pairs {
		a.Pairs[p.Name] = &adapter.Pair{Rank: p.Rank, Rows: p.Rows, Cols: p.Cols, A: slices.Clone(p.A), B: slices.Clone(p.B)}
	}
	return a
}

// Grads holds a gradient for every pair of a LoRA, in Pairs' order: A[k]
// and B[k] have the shapes of Pairs[k].A and .B.
type Grads struct {
	A, B [][]float32
}

// NewGrads returns zero gradients shaped as l's pairs.
func NewGrads(l *LoRA) *Grads {
	g := &Grads{}
	for _, p := range l.Pairs {
		g.A = append(g.A, make([]float32, len(p.A)))
		g.B = append(g.B, make([]float32, len(p.B)))
	}
	return g
}

// Zero clears g for the next accumulation.
func (g *Grads) Zero() {
	for k := range g.A {
		clear(g.A[k])
		clear(g.B[k])
	}
}

// Add adds h to g: accumulation over micro-batches.
func (g *Grads) Add(h *Grads) {
	for k := range g.A {
		for j, v := range h.A[k] {
			g.A[k][j] += v
		}
		for j, v := range h.B[k] {
			g.B[k][j] += v
		}
	}
}

// tensors lists every gradient tensor, A then B of each pair.
func (g *Grads) tensors() [][]float32 {
	out := make([][]float32, 0, 2*len(g.A))
	for k := range g.A {
		out = append(out, g.A[k], g.B[k])
	}
	return out
}

// layerTensor is the tensor map's entry of a layer tensor of c's
// architecture, nil when it has none.
func layerTensor(c *model.Config, name string) *arch.Tensor {
	a, ok := arch.Lookup(c.Arch)
	if !ok {
		return nil
	}
	t, _ := a.Tensor(name)
	return t
}

// supported refuses, by name, the architectures whose record says the
// training step does not cover them.
func supported(c *model.Config) error {
	if a, ok := arch.Lookup(c.Arch); ok && a.Trainable {
		return nil
	}
	var names []string
	for _, a := range arch.All() {
		if a.Trainable {
			names = append(names, a.Name)
		}
	}
	return fmt.Errorf("training: LoRA training of architecture %q is not supported (%s are)", c.Arch, strings.Join(names, ", "))
}
