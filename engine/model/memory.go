package model

import (
	"fmt"
	"slices"

	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/internal/units"
)

// Memory is an estimate of the device memory a GPU runner takes.
type Memory struct {
	Weights     int64 // every uploaded tensor, as stored
	KV          int64 // the f32 KV cache
	Activations int64 // batch activations, logits and scratch
}

// Slots is the estimate with n KV caches, one per sequence served at once.
func (m Memory) Slots(n int) Memory {
	m.KV *= int64(n)
	return m
}

// Total is the sum of the parts.
func (m Memory) Total() int64 { return m.Weights + m.KV + m.Activations }

func (m Memory) String() string {
	return fmt.Sprintf("weights %s + KV cache %s + activations %s", units.Bytes(uint64(m.Weights)), units.Bytes(uint64(m.KV)), units.Bytes(uint64(m.Activations)))
}

// Memory estimates what NewGPU allocates for a ctx-position cache and
// batches of batch tokens. The token embedding stays on the host (the GPU
// forward looks rows up there) unless the LM head is tied to it.
func (m *Model) Memory(ctx, batch int) Memory {
	c := &m.Config
	var e Memory
	add := func(w *Weight) {
		if w == nil {
			return
		}
		if w.Type.BlockSize() == 1 && w.Rows == 1 {
			e.Weights += int64(w.Cols) * 4 // vectors go up as f32
			return
		}
		e.Weights += w.Bytes()
	}
	add(m.Output)
	add(m.OutNorm)
	add(m.PLEModelProj)
	add(m.PLEProjNorm)
	for _, w := range append(slices.Clone(m.AltUpProj), m.AltUpUnembd...) {
		add(w)
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		ws := []*Weight{l.AttnNorm, l.PostAttnNorm, l.FFNNorm, l.PostFFNNorm, l.Q, l.K, l.V, l.O,
			l.QBias, l.KBias, l.VBias, l.QNorm, l.KNorm, l.Gate, l.Up, l.Down, l.PLEGate, l.PLEProj, l.PLENorm,
			l.LaurelL, l.LaurelR, l.LaurelNorm, l.OBias, l.Sinks}
		if e := l.MoE; e != nil {
			// Every expert: all are on the device, whichever a token
			// chooses.
			ws = append(ws, e.Router, e.Gate, e.Up, e.GateUp, e.Down, e.RouterScale, e.DownScale, e.PreNorm, e.PostNorm1, e.PostNorm2,
				e.RouterBias, e.GateBias, e.UpBias, e.DownBias)
		}
		if u := l.AltUp; u != nil {
			// Uploaded as f32 whatever the file stores.
			for _, w := range []*Weight{u.Router, u.RouterNorm, u.Predict, u.Correct, u.CorrectScale} {
				e.Weights += int64(w.Rows) * int64(w.Cols) * 4
			}
		}
		for _, w := range ws {
			add(w)
		}
	}
	// From the configuration alone (the library estimates a model it has
	// not loaded): a layer reading an earlier layer's cache keeps none
	// (Gemma 4).
	for i := range c.Layers {
		if c.OwnKV(i) {
			e.KV += 2 * int64(ctx) * int64(c.LayerKVDim(i)) * 4
		}
	}
	b := int64(min(batch, ctx))
	// Per token: x, xn, tmp; q, k and v side by side, then q rotated and the
	// attention's output; gate and up fused, and up; the per-layer
	// embeddings' inputs and gate (Gemma 3n, 4); and the logits.
	ple := int64(c.PerLayerInput) * int64(2*c.Layers+2)
	// Gemma 3n: the streams and their predictions and the corrected
	// active stream. (LAuReL's rank-wide product, 64 floats a token, is
	// left out: the configuration alone does not say the rank.)
	altUp := int64(0)
	if c.AltUp > 0 {
		altUp = int64(2*c.AltUp+1) * int64(c.Hidden)
	}
	// A mixture of experts: the router's scores, the slots' experts,
	// weights, grouping, gate and up, activated rows and outputs.
	moe := int64(0)
	if c.MoE != nil {
		logits, slots, groups, gateUp, h, y := moeSizes(c, 1)
		moe = int64(logits + 2*slots + groups + gateUp + h + y)
		if c.MoE.Dense {
			moe += 4 * int64(c.Hidden) // Gemma 4's router and experts' inputs, their sum, the dense output
		}
	}
	// A batch's rows quantized to 8 bits for the integer prompt products,
	// in words (taken where the device has them).
	q8 := int64(ops.Q8RowWords(max(c.Hidden, c.QDim(), c.FF)))
	e.Activations = 4 * (b*(3*int64(c.Hidden)+3*int64(c.QDim())+2*int64(c.KVDim())+3*int64(c.FF)+ple+altUp+moe+q8) + b*int64(c.Vocab))
	return e
}

// DecodeWeightBytes is the weight bytes one decoded token reads on the
// GPU: every weight Memory counts, but of each mixture's stacked experts
// only the share a token runs (Used of Experts). The bandwidth a decode
// reaches is this times its tokens per second.
func (m *Model) DecodeWeightBytes() int64 {
	w := m.Memory(1, 1).Weights
	e := m.Config.MoE
	if e == nil {
		return w
	}
	for i := range m.Layers {
		l := m.Layers[i].MoE
		if l == nil {
			continue
		}
		for _, s := range []*Weight{l.Gate, l.Up, l.GateUp, l.Down} {
			if s != nil {
				w -= s.Bytes() * int64(e.Experts-e.Used) / int64(e.Experts)
			}
		}
	}
	return w
}

// describe names the model in messages.
func (m *Model) describe() string {
	if m.Config.Name != "" {
		return fmt.Sprintf("%s (%s)", m.Config.Name, m.Config.Arch)
	}
	return m.Config.Arch
}
