package model

import (
	"fmt"
	"slices"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
)

// GPUWeights are a model's weights on a device, uploaded once by
// UploadWeights for the serving forward (GPU) and the training step alike:
// the projections as stored (quantized blocks, which the matmul kernels
// decode), the small vectors (norm gains, biases) as f32, and the RoPE
// factors. The token embedding stays on the host: a batch needs a handful
// of its rows.
type GPUWeights struct {
	c       *Config
	Layers  []GPULayer
	Output  *gpu.Tensor
	OutNorm *gpu.Buffer
	Factors *gpu.Buffer // RoPE frequency factors; nil when the model has none
	// PLEModelProj and PLEProjNorm are Gemma 4's projection of the
	// embeddings into the per-layer inputs and its norm gain; nil without
	// per-layer embeddings (whose table stays on the host).
	PLEModelProj *gpu.Tensor
	PLEProjNorm  *gpu.Buffer
	// AltUpProj and AltUpUnembd are Gemma 3n's projections into and out of
	// the streams beside stream 0; nil without AltUp.
	AltUpProj, AltUpUnembd []*gpu.Tensor

	tensors []*gpu.Tensor
	buffers []*gpu.Buffer
}

// GPULayer is one block's weights on the device; nil where the
// architecture has none.
type GPULayer struct {
	AttnNorm, PostAttnNorm, FFNNorm, PostFFNNorm *gpu.Buffer
	// QKV are the q, k and v projections, each placed at its columns of a
	// q|k|v row: merged into as few tensors as their types allow (all three
	// when they share one; Q4_K_M files often keep v in Q6_K), or, unmerged,
	// three tensors in the order q, k, v.
	QKV []PlacedTensor
	// QOnly: the layer reads another's cache and QKV holds q alone.
	QOnly bool
	// Merged, QKVBias is q's, k's and v's bias back to back and QKNorm q's
	// per-head norm gain then k's, as ops.RoPEQKV reads them; unmerged they
	// are QBias, KBias, VBias, QNorm and KNorm.
	QKVBias, QKNorm                   *gpu.Buffer
	QBias, KBias, VBias, QNorm, KNorm *gpu.Buffer
	// OBias is the output projection's bias, Sinks the attention sinks
	// (gpt-oss); nil without.
	OBias, Sinks *gpu.Buffer
	O, Down      *gpu.Tensor
	// GateUp is gate and up as one tensor, gate rows first, when merged and
	// of one type: one matmul instead of two, and the fused GLU after it.
	// Otherwise Gate and Up.
	GateUp, Gate, Up *gpu.Tensor
	// Gemma 4: the per-layer-embedding gate and projection, the
	// projection's norm gain, and the scale of the layer's output (0:
	// none).
	PLEGate, PLEProj *gpu.Tensor
	PLENorm          *gpu.Buffer
	OutScale         float32
	// Gemma 3n: the block's AltUp, and LAuReL's matrices and norm gain;
	// nil without.
	AltUp            *GPUAltUp
	LaurelL, LaurelR *gpu.Tensor
	LaurelNorm       *gpu.Buffer
	// MoE is the layer's mixture of experts, nil in a dense model (which
	// then has Down and GateUp or Gate and Up).
	MoE *GPUMoE
}

// PlacedTensor is a projection whose output rows start at column Col of a
// wider activation row.
type PlacedTensor struct {
	T   *gpu.Tensor
	Col int
}

// Proj is projection p's tensor in the unmerged layout, nil when it was
// merged with a neighbour.
func (l *GPULayer) Proj(p Proj) *gpu.Tensor {
	switch p {
	case ProjQ, ProjK, ProjV:
		switch {
		case len(l.QKV) == 3:
			return l.QKV[p-ProjQ].T
		case l.QOnly && p == ProjQ:
			return l.QKV[0].T
		}
		return nil
	case ProjO:
		return l.O
	case ProjGate:
		return l.Gate
	case ProjUp:
		return l.Up
	case ProjDown:
		return l.Down
	}
	return nil
}

// unmerged says whether every projection is a tensor of its own.
func (l *GPULayer) unmerged() bool { return (len(l.QKV) == 3 || l.QOnly) && l.GateUp == nil }

// GPUWeightOptions choose how UploadWeights lays the weights out.
type GPUWeightOptions struct {
	// Merge concatenates neighbouring projections of one type (q, k and v;
	// gate and up) into one tensor, and the q/k/v biases and QK-norm gains
	// into one vector each, so that one matmul serves several: the serving
	// layout. Without it every projection is a tensor of its own, which the
	// training step's backward multiplies by.
	Merge bool
	// Factors are the RoPE frequency factors (Model.RopeFactorsFor), nil
	// for none.
	Factors []float32
	// Sent, when set, is told the bytes of each weight once it is on the
	// device, in Memory's measure (vectors as f32).
	Sent func(n int64)
}

// UploadWeights puts m's weights on dev. A projection whose type has no GPU
// matmul kernel is refused by name.
func UploadWeights(dev *gpu.Device, m *Model, o GPUWeightOptions) (*GPUWeights, error) {
	w := &GPUWeights{c: &m.Config}
	if err := w.upload(dev, m, o); err != nil {
		w.Release()
		return nil, err
	}
	return w, nil
}

func (w *GPUWeights) upload(dev *gpu.Device, m *Model, o GPUWeightOptions) error {
	sent := func(n int64) {
		if o.Sent != nil {
			o.Sent(n)
		}
	}
	tensor := func(wt *Weight) (*gpu.Tensor, error) {
		if err := gpuMatmul(wt); err != nil {
			return nil, err
		}
		t, err := dev.NewStack(wt.Name, wt.Type, wt.Stack, wt.Rows, wt.Cols, wt.Data, 0)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		w.tensors = append(w.tensors, t)
		sent(wt.Bytes())
		return t, nil
	}
	buffer := func(label string, v []float32) (*gpu.Buffer, error) {
		b, err := dev.NewBufferF32(label, v)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		w.buffers = append(w.buffers, b)
		return b, nil
	}
	// vector uploads the values of ws one after another as one buffer
	// named label, or nothing when all are nil (the model has none).
	vector := func(label string, ws ...*Weight) (*gpu.Buffer, error) {
		var all []float32
		for _, wt := range ws {
			if wt == nil {
				if ws[0] != nil {
					return nil, fmt.Errorf("model: %s: %s is missing", label, ws[0].Name)
				}
				continue
			}
			if ws[0] == nil {
				return nil, fmt.Errorf("model: %s: %s without its companions", label, wt.Name)
			}
			v, err := wt.F32()
			if err != nil {
				return nil, err
			}
			all = append(all, v...)
		}
		if all == nil {
			return nil, nil
		}
		defer sent(int64(len(all)) * 4)
		return buffer(label, all)
	}
	var err error
	if w.Output, err = tensor(m.Output); err != nil {
		return err
	}
	if w.OutNorm, err = vector("output_norm.weight", m.OutNorm); err != nil {
		return err
	}
	if o.Factors != nil {
		if w.Factors, err = buffer("rope_factors", o.Factors); err != nil {
			return err
		}
	}
	if m.PLEModelProj != nil {
		if w.PLEModelProj, err = tensor(m.PLEModelProj); err != nil {
			return err
		}
		if w.PLEProjNorm, err = vector("per_layer_proj_norm.weight", m.PLEProjNorm); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		dst *[]*gpu.Tensor
		ws  []*Weight
	}{{&w.AltUpProj, m.AltUpProj}, {&w.AltUpUnembd, m.AltUpUnembd}} {
		for _, wt := range p.ws {
			t, err := tensor(wt)
			if err != nil {
				return err
			}
			*p.dst = append(*p.dst, t)
		}
	}
	w.Layers = make([]GPULayer, len(m.Layers))
	for i := range m.Layers {
		l, g := &m.Layers[i], &w.Layers[i]
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		type vec struct {
			dst   **gpu.Buffer
			label string
			ws    []*Weight
		}
		vecs := []vec{{&g.AttnNorm, blk("attn_norm.weight"), []*Weight{l.AttnNorm}}, {&g.PostAttnNorm, blk("post_attention_norm.weight"), []*Weight{l.PostAttnNorm}},
			{&g.FFNNorm, blk("ffn_norm.weight"), []*Weight{l.FFNNorm}}, {&g.PostFFNNorm, blk("post_ffw_norm.weight"), []*Weight{l.PostFFNNorm}}}
		vecs = append(vecs, vec{&g.OBias, blk("attn_output.bias"), []*Weight{l.OBias}}, vec{&g.Sinks, blk("attn_sinks.weight"), []*Weight{l.Sinks}})
		vecs = append(vecs, vec{&g.PLENorm, blk("post_norm.weight"), []*Weight{l.PLENorm}},
			vec{&g.LaurelNorm, blk("laurel_post_norm.weight"), []*Weight{l.LaurelNorm}})
		if u := l.AltUp; u != nil {
			// The router norm, router, coefficients and correction scale
			// back to back: ops.PackAltUp's layout.
			g.AltUp = &GPUAltUp{}
			vecs = append(vecs, vec{&g.AltUp.Weights, blk("altup.packed"), []*Weight{u.RouterNorm, u.Router, u.Predict, u.Correct, u.CorrectScale}})
		}
		switch {
		case o.Merge && l.K == nil:
			// A layer reading an earlier layer's cache: only q's.
			vecs = append(vecs, vec{&g.QKVBias, blk("attn_q.bias"), []*Weight{l.QBias}},
				vec{&g.QKNorm, blk("attn_q_norm.weight"), []*Weight{l.QNorm}})
		case o.Merge:
			vecs = append(vecs, vec{&g.QKVBias, blk("attn_qkv.bias"), []*Weight{l.QBias, l.KBias, l.VBias}},
				vec{&g.QKNorm, blk("attn_qk_norm.weight"), []*Weight{l.QNorm, l.KNorm}})
		default:
			vecs = append(vecs, vec{&g.QBias, blk("attn_q.bias"), []*Weight{l.QBias}}, vec{&g.KBias, blk("attn_k.bias"), []*Weight{l.KBias}},
				vec{&g.VBias, blk("attn_v.bias"), []*Weight{l.VBias}}, vec{&g.QNorm, blk("attn_q_norm.weight"), []*Weight{l.QNorm}},
				vec{&g.KNorm, blk("attn_k_norm.weight"), []*Weight{l.KNorm}})
		}
		for _, p := range vecs {
			if *p.dst, err = vector(p.label, p.ws...); err != nil {
				return err
			}
		}
		var qkv []placedWeight
		switch {
		case l.K == nil:
			qkv, g.QOnly = []placedWeight{{l.Q, 0}}, true
		case o.Merge:
			qkv = mergeRows(blk("attn_qkv"), l.Q, l.K, l.V)
		default:
			qkv = []placedWeight{{l.Q, 0}, {l.K, l.Q.Rows}, {l.V, l.Q.Rows + l.K.Rows}}
		}
		for _, p := range qkv {
			t, err := tensor(p.w)
			if err != nil {
				return err
			}
			g.QKV = append(g.QKV, PlacedTensor{t, p.row})
		}
		if g.O, err = tensor(l.O); err != nil {
			return err
		}
		if l.PLEGate != nil {
			if g.PLEGate, err = tensor(l.PLEGate); err != nil {
				return err
			}
			if g.PLEProj, err = tensor(l.PLEProj); err != nil {
				return err
			}
		}
		if l.LaurelL != nil {
			if g.LaurelL, err = tensor(l.LaurelL); err != nil {
				return err
			}
			if g.LaurelR, err = tensor(l.LaurelR); err != nil {
				return err
			}
		}
		g.OutScale = l.OutScale
		if e := l.MoE; e != nil {
			g.MoE = &GPUMoE{}
			type upload struct {
				dst **gpu.Tensor
				w   *Weight
			}
			ts := []upload{{&g.MoE.Router, e.Router}, {&g.MoE.Down, e.Down}}
			switch {
			case e.GateUp != nil:
				ts = append(ts, upload{&g.MoE.GateUp, e.GateUp})
			case o.Merge && e.Gate.Type == e.Up.Type:
				ts = append(ts, upload{&g.MoE.GateUp, mergeExperts(blk("ffn_gate_up_exps.weight"), e.Gate, e.Up)})
			default:
				ts = append(ts, upload{&g.MoE.Gate, e.Gate}, upload{&g.MoE.Up, e.Up})
			}
			for _, p := range ts {
				if *p.dst, err = tensor(p.w); err != nil {
					return err
				}
			}
			for _, p := range []vec{{&g.MoE.DownScale, blk("ffn_down_exps.scale"), []*Weight{e.DownScale}},
				{&g.MoE.PreNorm, blk("pre_ffw_norm_2.weight"), []*Weight{e.PreNorm}},
				{&g.MoE.PostNorm1, blk("post_ffw_norm_1.weight"), []*Weight{e.PostNorm1}},
				{&g.MoE.PostNorm2, blk("post_ffw_norm_2.weight"), []*Weight{e.PostNorm2}}} {
				if *p.dst, err = vector(p.label, p.ws...); err != nil {
					return err
				}
			}
			if e.RouterBias != nil {
				bs := []vec{{&g.MoE.RouterBias, blk("ffn_gate_inp.bias"), []*Weight{e.RouterBias}},
					{&g.MoE.DownBias, blk("ffn_down_exps.bias"), []*Weight{e.DownBias}}}
				if g.MoE.GateUp == nil {
					bs = append(bs, vec{&g.MoE.GateBias, blk("ffn_gate_exps.bias"), []*Weight{e.GateBias}}, vec{&g.MoE.UpBias, blk("ffn_up_exps.bias"), []*Weight{e.UpBias}})
				}
				for _, p := range bs {
					if *p.dst, err = vector(p.label, p.ws...); err != nil {
						return err
					}
				}
			}
			if e.GateBias != nil && g.MoE.GateUp != nil {
				// Each expert's gate bias, then its up bias, as the merged
				// experts' rows.
				gb, err := e.GateBias.F32()
				if err != nil {
					return err
				}
				ub, err := e.UpBias.F32()
				if err != nil {
					return err
				}
				ff := e.GateBias.Cols
				gu := make([]float32, 0, len(gb)+len(ub))
				for x := range e.GateBias.Rows {
					gu = append(append(gu, gb[x*ff:(x+1)*ff]...), ub[x*ff:(x+1)*ff]...)
				}
				if g.MoE.GateUpBias, err = buffer(blk("ffn_gate_up_exps.bias"), gu); err != nil {
					return err
				}
				sent(int64(len(gu)) * 4)
			}
			if e.RouterScale != nil {
				gain, err := RouterGain(e, m.Config.Hidden)
				if err != nil {
					return err
				}
				if g.MoE.RouterGain, err = buffer(blk("ffn_gate_inp.gain"), gain); err != nil {
					return err
				}
				sent(int64(len(gain)) * 4)
			}
			if !m.Config.MoE.Dense {
				continue
			}
		}
		if g.Down, err = tensor(l.Down); err != nil {
			return err
		}
		if o.Merge && l.Gate.Type == l.Up.Type {
			if g.GateUp, err = tensor(mergeRows(blk("ffn_gate_up"), l.Gate, l.Up)[0].w); err != nil {
				return err
			}
			continue
		}
		if g.Gate, err = tensor(l.Gate); err != nil {
			return err
		}
		if g.Up, err = tensor(l.Up); err != nil {
			return err
		}
	}
	return nil
}

// Release frees the device copies.
func (w *GPUWeights) Release() {
	if w == nil {
		return
	}
	for _, t := range w.tensors {
		t.Release()
	}
	for _, b := range w.buffers {
		b.Release()
	}
	w.tensors, w.buffers = nil, nil
}

// Bytes is the device memory the weights take.
func (w *GPUWeights) Bytes() uint64 {
	var n uint64
	for _, t := range w.tensors {
		n += uint64(t.Bytes())
	}
	for _, b := range w.buffers {
		n += b.Size()
	}
	return n
}

// placedWeight is a weight whose rows start at row of the projections it
// was merged from.
type placedWeight struct {
	w   *Weight
	row int
}

// mergeRows concatenates the rows of each run of neighbouring weights of
// one type into one weight named name (or keeps a weight alone), so that one
// matmul computes what several did: quantized rows are independent blocks,
// so the bytes are copied, not converted.
func mergeRows(name string, ws ...*Weight) []placedWeight {
	var out []placedWeight
	row := 0
	for i := 0; i < len(ws); {
		j := i + 1
		for j < len(ws) && ws[j].Type == ws[i].Type && ws[j].Cols == ws[i].Cols {
			j++
		}
		if j == i+1 {
			out = append(out, placedWeight{ws[i], row})
			row += ws[i].Rows
			i = j
			continue
		}
		m := &Weight{Name: name, Type: ws[i].Type, Cols: ws[i].Cols}
		size := 0
		for _, w := range ws[i:j] {
			m.Rows += w.Rows
			size += len(w.Data)
		}
		m.Data = adjacent(ws[i:j], size)
		if m.Data == nil {
			m.Data = make([]byte, 0, size)
			for _, w := range ws[i:j] {
				m.Data = append(m.Data, w.Data...)
			}
		}
		if j-i < len(ws) {
			m.Name = fmt.Sprintf("%s[%d:%d]", name, i, j)
		}
		out = append(out, placedWeight{m, row})
		row += m.Rows
		i = j
	}
	return out
}

// mergeExperts stacks each expert's gate rows and then its up rows, one
// expert after another (ggml's fused ffn_gate_up_exps layout), so one
// product over the experts gives each slot its [gate | up] row.
func mergeExperts(name string, gate, up *Weight) *Weight {
	n := gate.Stack
	gb, ub := len(gate.Data)/n, len(up.Data)/n
	data := make([]byte, 0, len(gate.Data)+len(up.Data))
	for e := range n {
		data = append(data, gate.Data[e*gb:(e+1)*gb]...)
		data = append(data, up.Data[e*ub:(e+1)*ub]...)
	}
	return &Weight{Name: name, Type: gate.Type, Rows: gate.Rows + up.Rows, Cols: gate.Cols, Data: data, Stack: n}
}

// adjacent is the size bytes from ws[0]'s first when the weights' data
// lie back to back in one array (the slices of Phi-3's fused attn_qkv and
// ffn_up), so merging them needs no copy; nil otherwise.
func adjacent(ws []*Weight, size int) []byte {
	first := ws[0].Data
	if len(first) == 0 || cap(first) < size {
		return nil
	}
	all := first[:size]
	off := 0
	for _, w := range ws {
		if len(w.Data) == 0 || &all[off] != &w.Data[0] {
			return nil
		}
		off += len(w.Data)
	}
	return all
}

// gpuMatmul checks that w's type has a GPU matmul kernel.
func gpuMatmul(w *Weight) error {
	if !slices.Contains(ops.MatmulTypes(), w.Type) {
		return fmt.Errorf("model: tensor %q: type %v has no GPU matmul kernel (the CPU backend runs it: --backend cpu)", w.Name, w.Type)
	}
	return nil
}
