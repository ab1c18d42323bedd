package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// attentionBackwardParams mirrors Params in
// shaders/attention_backward_common.wgsl.
type attentionBackwardParams struct {
	HeadDim, Heads, KVHeads, Tokens uint32
	Pos0, KVLen, Window, Group      uint32
	Scale, Softcap                  float32
	Flags                           uint32 // attentionSinks
	_                               uint32
}

// attentionBackwardMaxKV is the most key slots AttentionBackward takes: the
// dK/dV pass has one workgroup per slot in the grid's y, which WebGPU caps
// at 65535.
const attentionBackwardMaxKV = 65535

// AttentionStatsFloats is the size, in floats, of AttentionBackward's stats
// scratch for a: a log-sum-exp and a delta per (token, head).
func AttentionStatsFloats(a AttentionArgs) int { return a.Tokens * a.Heads * 2 }

// AttentionBackward appends the gradients of Attention(q, k, v) for the
// upstream gradient dout = dL/d(out), with the same AttentionArgs (causal
// mask, window, soft-cap, scale, GQA, sinks) and layouts:
//
//	dq     [Tokens, Heads, HeadDim]
//	dk, dv [KVLen, KVHeads, HeadDim]   summed over the query heads sharing each KV head
//
// Slots no query sees get zeros. The sinks, if any, are frozen: they get no
// gradient, and enter only the softmax's denominator, which the recomputed
// log-sum-exp includes, so the P the gradients recompute are the forward's.
// The softmax statistics are recomputed (three dispatches: per-row
// log-sum-exp and delta = dout·out into stats, AttentionStatsFloats(a)
// floats, then dq, then dk and dv), so the forward needs to keep nothing but
// its inputs. For training, KVLen = Tokens and
// Pos0 = 0; a longer history (Pos0 > 0) also works, its keys getting the
// gradient of the queries that see them. Every sum runs in a fixed order:
// the same inputs give the same bits. q, k, v, dout and a.Sinks are
// read-only; stats, dq, dk and dv must be four more distinct buffers.
func AttentionBackward(c *gpu.Chain, q, k, v, dout, stats, dq, dk, dv *gpu.Buffer, a AttentionArgs) error {
	const kernel = "attention_backward"
	if err := a.check(); err != nil {
		return fmt.Errorf("%w (backward)", err)
	}
	if a.Bidirectional || a.Batch {
		return fmt.Errorf("ops: %s: bidirectional and batch-masked attention have no backward kernel (the causal one only)", kernel)
	}
	if a.KVLen > attentionBackwardMaxKV {
		return fmt.Errorf("ops: %s: kv_len %d over %d", kernel, a.KVLen, attentionBackwardMaxKV)
	}
	qn := a.Tokens * a.Heads * a.HeadDim
	kvn := a.KVLen * a.KVHeads * a.HeadDim
	bufs := []operand{{"q", q, qn}, {"k", k, kvn}, {"v", v, kvn}, {"dout", dout, qn}}
	if a.Sinks != nil {
		bufs = append(bufs, operand{"sinks", a.Sinks, a.Heads})
	}
	inputs := len(bufs)
	bufs = append(bufs, operand{"stats", stats, AttentionStatsFloats(a)}, operand{"dq", dq, qn}, operand{"dk", dk, kvn}, operand{"dv", dv, kvn})
	for _, b := range bufs {
		if err := needF32(kernel, b.what, b.buf, b.n); err != nil {
			return err
		}
	}
	// Outputs (from stats on) may share no buffer with anything; the
	// read-only inputs may share one with each other (q = k in a test).
	for i := inputs; i < len(bufs); i++ {
		for j := range i {
			if bufs[i].buf == bufs[j].buf {
				return fmt.Errorf("ops: %s: %s and %s are both %q", kernel, bufs[j].what, bufs[i].what, bufs[i].buf.Label())
			}
		}
	}
	params := attentionBackwardParams{
		HeadDim: uint32(a.HeadDim), Heads: uint32(a.Heads), KVHeads: uint32(a.KVHeads), Tokens: uint32(a.Tokens),
		Pos0: uint32(a.Pos0), KVLen: uint32(a.KVLen), Window: uint32(a.Window), Group: uint32(a.Heads / a.KVHeads),
		Scale: a.scale(), Softcap: a.Softcap,
	}
	if a.Sinks != nil {
		params.Flags |= attentionSinks
	}
	// The forward's widths (a.check): heads up to attentionNarrowHeadDim
	// compile with that MAX_HD, as the forward's per-query kernel does.
	maxHD := attentionNarrowHeadDim
	if a.HeadDim > maxHD {
		maxHD = attentionMaxHeadDim
	}
	spec := func(family, entry string) gpu.KernelSpec {
		return gpu.Spec(family, entry, "WG", attentionWG, "MAX_HD", maxHD)
	}
	// The statistics are a family of their own, the one that binds the
	// sinks: with them the gradient passes' module would bind 9 storage
	// buffers, over WebGPU's guaranteed 8.
	rows := [3]uint32{uint32(a.Heads), uint32(a.Tokens), 1}
	if err := dispatch(c, spec("attention_backward_stats", "attention_backward_stats"), params, rows, q, k, v, dout, a.sinksOr(q), stats); err != nil {
		return err
	}
	if err := dispatch(c, spec("attention_backward", "attention_backward_dq"), params, rows, q, k, v, dout, stats, dq, dk, dv); err != nil {
		return err
	}
	return dispatch(c, spec("attention_backward", "attention_backward_dkv"), params, [3]uint32{uint32(a.KVHeads), uint32(a.KVLen), 1}, q, k, v, dout, stats, dq, dk, dv)
}
