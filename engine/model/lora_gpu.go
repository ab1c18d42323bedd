package model

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/gguf"
)

// SetAdapters implements Runner: the pairs go to the device as f32
// tensors, and the chains recorded from now on add two matmuls after each
// targeted projection. Without adapters nothing is allocated and the chain
// is the base model's.
func (r *GPU) SetAdapters(loras []LoRA) error {
	if r.x == nil {
		return fmt.Errorf("model: GPU runner is closed")
	}
	if err := r.m.CheckLoRA(loras); err != nil {
		return err
	}
	// A chain recorded ahead reads the old tensors: drop it, and let the
	// submitted ones finish before their buffers go.
	if r.next != nil {
		r.next.ch.Discard()
		r.next = nil
	}
	if err := r.dev.Wait(); err != nil {
		return err
	}
	r.releaseLoRA()
	r.forget()
	if len(loras) == 0 {
		return nil
	}
	r.loras = append([]LoRA(nil), loras...)
	if err := r.uploadLoRA(); err != nil {
		r.releaseLoRA()
		return err
	}
	return nil
}

func (r *GPU) uploadLoRA() error {
	m := r.m
	rank := 0
	up := func(w *Weight) (*gpuLoRA, error) {
		l, err := r.stackLoRA(w)
		if l != nil {
			rank = max(rank, l.rank)
		}
		return l, err
	}
	var err error
	if r.loraOutput, err = up(m.Output); err != nil {
		return err
	}
	r.loraLayers = make([][NumProj]*gpuLoRA, len(m.Layers))
	for i := range m.Layers {
		for p, w := range m.Layers[i].Projections() {
			if r.loraLayers[i][p], err = up(w); err != nil {
				return err
			}
		}
	}
	if rank == 0 {
		return nil // only the embedding is adapted: on the host
	}
	r.loraT, err = r.dev.NewBuffer("lora.t", uint64(r.batch)*uint64(rank)*4)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// stackLoRA uploads the adapters of projection w as one pair: A stacked,
// B side by side with each adapter's scale folded in. nil when no adapter
// targets w.
func (r *GPU) stackLoRA(w *Weight) (*gpuLoRA, error) {
	parts := loraParts(r.loras, w)
	if len(parts) == 0 {
		return nil, nil
	}
	rank := 0
	for _, p := range parts {
		rank += p.rank
	}
	a := make([]float32, 0, rank*w.Cols)
	b := make([]float32, w.Rows*rank)
	off := 0
	for _, p := range parts {
		a = append(a, p.a...)
		for row := range w.Rows {
			for k := range p.rank {
				b[row*rank+off+k] = p.scale * p.b[row*p.rank+k]
			}
		}
		off += p.rank
	}
	ta, err := r.dev.NewTensor(w.Name+".lora_a", gguf.TypeF32, rank, w.Cols, gpu.F32Bytes(a), 0)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	r.loraTensors = append(r.loraTensors, ta)
	tb, err := r.dev.NewTensor(w.Name+".lora_b", gguf.TypeF32, w.Rows, rank, gpu.F32Bytes(b), 0)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	r.loraTensors = append(r.loraTensors, tb)
	return &gpuLoRA{a: ta, b: tb, rank: rank}, nil
}

// releaseLoRA frees the adapters' tensors and forgets them.
func (r *GPU) releaseLoRA() {
	for _, t := range r.loraTensors {
		t.Release()
	}
	r.loraTensors = nil
	r.loraT.Release()
	r.loraT = nil
	r.loras, r.loraOutput, r.loraLayers = nil, nil, nil
}

// lora appends y += B·(A·x) for the n rows of x (the scale is in B), y
// placed by o; nothing when l is nil.
func (r *GPU) lora(ch *gpu.Chain, l *gpuLoRA, x, y *gpu.Buffer, n int, o ops.MatmulOptions) error {
	if l == nil {
		return nil
	}
	if err := ops.MatMul(ch, l.a, x, r.loraT, n); err != nil {
		return err
	}
	o.Accumulate = true
	return ops.MatMulWith(ch, l.b, r.loraT, y, n, o)
}
