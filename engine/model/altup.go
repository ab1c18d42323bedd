package model

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Gemma 3n's AltUp, as transformers' Gemma3nTextModel and its decoder layer
// compute it: the residual is Config.AltUp streams, held stream-major (one
// n × Hidden matrix a stream, so that the projections read and write whole
// streams). Before layer 0 the scaled embedding is stream 0 and each other
// stream k is altup_proj[k-1] of it, brought to its RMS; each layer
// predicts the streams from one another, runs its block on the active
// prediction, corrects the streams by what the block changed and adds its
// per-layer embedding's output to every stream but 0; after the last
// layer, altup_unembd_proj[k-1] maps stream k back, again at stream 0's
// RMS, and the streams are averaged into the one row the head reads.

// laurelScale is 2^-0.5: Gemma 3n's attention output and LAuReL's are
// summed and scaled by it.
var laurelScale = float32(math.Sqrt(0.5))

// AltUpArgs are c's AltUp over n tokens for engine/ops/ref.
func AltUpArgs(c *Config, n int) ref.AltUpArgs {
	return ref.AltUpArgs{Tokens: n, Dim: c.Hidden, Streams: c.AltUp, Active: c.AltUpActive, Eps: c.Eps}
}

// AltUpStreamsCPU makes the streams from the n scaled embeddings x.
func (m *Model) AltUpStreamsCPU(x []float32, n int) ([]float32, error) {
	c := &m.Config
	s := make([]float32, 0, c.AltUp*len(x))
	s = append(s, x...)
	for _, w := range m.AltUpProj {
		y, err := matmul(w, x, n)
		if err != nil {
			return nil, err
		}
		s = append(s, y...)
	}
	ref.AltUpRescale(s, AltUpArgs(c, n))
	return s, nil
}

// altUpMergeCPU averages the streams s of n tokens into one row each.
func (m *Model) altUpMergeCPU(s []float32, n int) ([]float32, error) {
	u, err := m.AltUpUnembedCPU(s, n)
	if err != nil {
		return nil, err
	}
	return ref.AltUpMerge(u, AltUpArgs(&m.Config, n)), nil
}

// AltUpUnembedCPU maps the streams s of n tokens back as the merge reads
// them: stream 0 as it is, each other by its altup_unembd_proj.
func (m *Model) AltUpUnembedCPU(s []float32, n int) ([]float32, error) {
	rows := n * m.Config.Hidden
	u := make([]float32, 0, len(s))
	u = append(u, s[:rows]...)
	for k, w := range m.AltUpUnembd {
		y, err := matmul(w, s[(k+1)*rows:(k+2)*rows], n)
		if err != nil {
			return nil, err
		}
		u = append(u, y...)
	}
	return u, nil
}

// forwardAltUpCPU is ForwardLayerCPU for Gemma 3n: predict the streams,
// run the block on the active prediction, correct the streams by its
// output, and add the per-layer embedding's gate of the corrected active
// stream to every stream but 0.
func (m *Model) forwardAltUpCPU(i int, s []float32, n int, cl CPULayer, acts *LayerActivations) ([]float32, error) {
	c, lv, l := &m.Config, cl.Vectors, &m.Layers[i]
	a := AltUpArgs(c, n)
	if len(s) != c.AltUp*n*c.Hidden {
		return nil, fmt.Errorf("model: layer %d: %d values are not %d streams of %d tokens", i, len(s), c.AltUp, n)
	}
	if cl.PLE == nil {
		return nil, fmt.Errorf("model: layer %d needs the batch's per-layer-embedding inputs", i)
	}
	pred, active := ref.AltUpPredict(s, lv.AltUpRouterNorm, lv.AltUpRouter, lv.AltUpPredict, a)
	out, err := m.forwardBlockCPU(i, active, n, cl, acts)
	if err != nil {
		return nil, err
	}
	corrected, first := ref.AltUpCorrect(pred, out, lv.AltUpRouterNorm, lv.AltUpRouter, lv.AltUpCorrect, lv.AltUpScale, a)
	g, err := matmul(l.PLEGate, first, n)
	if err != nil {
		return nil, err
	}
	h := ref.PLEGate(g, cl.PLE.Proj, cl.PLE.Tok, cl.PLE.Norm, refPLEArgs(c, n, i))
	y, err := matmul(l.PLEProj, h, n)
	if err != nil {
		return nil, err
	}
	if acts != nil {
		acts.Streams, acts.Pred, acts.First = s, pred, first
		acts.PLEG, acts.PLEH, acts.PLEY = g, h, y
		acts.PLE = ref.PLEInput(cl.PLE.Proj, cl.PLE.Tok, cl.PLE.Norm, refPLEArgs(c, n, i))
	}
	ref.AltUpAddNormed(corrected, y, lv.PLENorm, a)
	return corrected, nil
}

// OpsAltUpArgs are c's AltUp over n tokens for the kernels.
func OpsAltUpArgs(c *Config, n int) ops.AltUpArgs { return ops.AltUpArgs(AltUpArgs(c, n)) }

// GPUAltUp is a block's AltUp on the device: its small weights in f32,
// packed in one buffer as the kernels read them (ops.PackAltUp).
type GPUAltUp struct {
	Weights *gpu.Buffer
}

// RecordAltUpStreams appends the streams' set-up: x0 (n scaled embeddings)
// copied to stream 0, altup_proj's products into the others, and those
// brought to its RMS.
func (w *GPUWeights) RecordAltUpStreams(ch *gpu.Chain, x0, s *gpu.Buffer, n int, try func(error)) {
	c := w.c
	rows := n * c.Hidden
	try(ops.CopyF32(ch, x0, 0, s, 0, rows))
	for k, t := range w.AltUpProj {
		try(ops.MatMulWith(ch, t, x0, s, n, ops.MatmulOptions{YOffset: (k + 1) * rows, YStride: c.Hidden}))
	}
	try(ops.AltUpRescale(ch, s, OpsAltUpArgs(c, n)))
}

// RecordAltUpMerge appends the streams' merge into out (n rows): each
// stream but 0 copied out to tmp (n rows) and mapped back by
// altup_unembd_proj into u (laid out as s), then the rescaled mean.
func (w *GPUWeights) RecordAltUpMerge(ch *gpu.Chain, s, tmp, u, out *gpu.Buffer, n int, try func(error)) {
	c := w.c
	rows := n * c.Hidden
	try(ops.CopyF32(ch, s, 0, u, 0, rows))
	for k, t := range w.AltUpUnembd {
		try(ops.CopyF32(ch, s, (k+1)*rows, tmp, 0, rows))
		try(ops.MatMulWith(ch, t, tmp, u, n, ops.MatmulOptions{YOffset: (k + 1) * rows, YStride: c.Hidden}))
	}
	try(ops.AltUpMerge(ch, u, out, OpsAltUpArgs(c, n)))
}

// recordAltUpTail appends the end of a Gemma 3n block: the correction of
// the streams by the block's output x, then the per-layer embedding's gate
// of the corrected active stream, its projection (into a.PLEY when kept,
// else the scratch a.F), and the normed add to every stream but 0. The
// corrected streams go to a.StreamsOut when set, else over a.Streams.
func (w *GPUWeights) recordAltUpTail(ch *gpu.Chain, i int, a *GPUActivations, x *gpu.Buffer, n int, try func(error)) {
	c, l := w.c, &w.Layers[i]
	args := OpsAltUpArgs(c, n)
	out, y := a.Streams, a.F
	if a.StreamsOut != nil {
		out = a.StreamsOut
	}
	if a.PLEY != nil {
		y = a.PLEY
	}
	try(ops.AltUpCorrect(ch, a.Pred, x, l.AltUp.Weights, out, a.First, args))
	try(ops.MatMul(ch, l.PLEGate, a.First, a.PLEG, n))
	try(ops.PLEGate(ch, a.PLEG, a.PLEProj, a.PLETok, w.PLEProjNorm, a.PLEH, PLEArgs(c, n, i)))
	try(ops.MatMul(ch, l.PLEProj, a.PLEH, y, n))
	try(ops.AltUpAddNormed(ch, y, l.PLENorm, out, args))
}
