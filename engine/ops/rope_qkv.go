package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// RoPEQKVArgs shapes RoPEQKV: RoPEArgs for the rotation (Heads the query
// heads, Pos0 the batch's first position; no positions buffer), KVHeads the
// key and value heads, Eps the norms' epsilon.
type RoPEQKVArgs struct {
	RoPEArgs
	// KVHeads is the key and value heads; 0 means qkv holds queries only
	// and no cache is written (Gemma 4's KV-shared layers, whose attention
	// reads an earlier layer's cache).
	KVHeads int
	Eps     float32
	// VNorm RMS-normalises each v head without a gain, v / sqrt(mean(v²) +
	// Eps), before it is cached (Gemma 4's v_norm), whether or not norms
	// are given. With KVHeads 0 there is no v and it does nothing.
	VNorm bool
}

// ropeQKVParams mirrors Params in shaders/rope_qkv.wgsl.
type ropeQKVParams struct {
	Tokens, Heads, KVHeads, HeadDim uint32
	RopeDims, Pos0, Flags           uint32
	MScale, Eps                     float32
	_                               [3]uint32
	Lo, Hi                          [16]float32
}

// Flags of ropeQKVParams, as FLAG_* in shaders/rope_qkv.wgsl.
const (
	ropeQKVNeoX    = 1
	ropeQKVFactors = 2
	ropeQKVBias    = 4
	ropeQKVNorm    = 8
	ropeQKVVNorm   = 16
)

// ropeQKVWG is the fused kernel's workgroup size: one workgroup per head,
// 64 invocations, a pair each at the common head_dim of 128 (four at Gemma
// 4's 512).
const ropeQKVWG = 64

// RoPEQKV appends, for a batch of Tokens tokens whose q, k and v
// projections sit side by side in qkv = [Tokens, (Heads + 2·KVHeads)·HeadDim]:
//
//	q_out[t]       = rope(norm_q(q[t] + bias_q), Pos0 + t)
//	kCache[Pos0+t] = rope(norm_k(k[t] + bias_k), Pos0 + t)
//	vCache[Pos0+t] = norm_v(v[t] + bias_v)
//
// the caches being [positions, KVHeads·HeadDim]. bias (nil for none) holds
// (Heads + 2·KVHeads)·HeadDim floats in qkv's column order; norms (nil for
// none) holds 2·HeadDim floats, q's per-head RMSNorm gain then k's, applied
// with a.Eps; norm_v is the identity, or with a.VNorm an RMSNorm without a
// gain; factors (nil for none) divide the pairs' angles as in RoPE (a factor
// of 1e30, as Gemma 4's proportional RoPE stores for the pairs that do not
// turn, leaves its pair as it is). The rotation is RoPE's, to the bit; one
// dispatch in place of the bias adds, norms, two rotations and the cache
// copy of the unfused chain.
//
// With a.KVHeads 0, qkv is [Tokens, Heads·HeadDim] of queries only, kCache
// and vCache must be nil (a cache passed there would not be written, so it
// is refused), and norms needs only q's gain, HeadDim floats (a
// 2·HeadDim buffer of both gains works too: k's is not read).
func RoPEQKV(c *gpu.Chain, qkv, bias, norms, factors, q, kCache, vCache *gpu.Buffer, a RoPEQKVArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	if a.KVHeads < 0 {
		return fmt.Errorf("ops: rope_qkv: kv_heads %d is negative", a.KVHeads)
	}
	if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
		return fmt.Errorf("ops: rope_qkv: eps %v must be finite and >= 0", a.Eps)
	}
	width := (a.Heads + 2*a.KVHeads) * a.HeadDim
	kvd := a.KVHeads * a.HeadDim
	if int64(a.Tokens)*int64(width) > math.MaxUint32 || int64(a.Pos0+a.Tokens)*int64(kvd) > math.MaxUint32 {
		return fmt.Errorf("ops: rope_qkv: %d tokens of %d floats overflow the kernel's 32-bit index", a.Tokens, width)
	}
	ins := []operand{{"qkv", qkv, a.Tokens * width}, {"q", q, a.Tokens * a.Heads * a.HeadDim}}
	if a.KVHeads > 0 {
		ins = append(ins, operand{"k cache", kCache, (a.Pos0 + a.Tokens) * kvd}, operand{"v cache", vCache, (a.Pos0 + a.Tokens) * kvd})
	} else if kCache != nil || vCache != nil {
		return fmt.Errorf("ops: rope_qkv: kv_heads 0 computes queries only and writes no cache; pass nil caches")
	}
	for _, b := range ins {
		if err := needF32("rope_qkv", b.what, b.buf, b.n); err != nil {
			return err
		}
	}
	for i := 1; i < len(ins); i++ {
		for j := range i {
			if ins[i].buf == ins[j].buf {
				return fmt.Errorf("ops: rope_qkv: %s and %s are both %q: qkv, q and the caches must be distinct buffers", ins[j].what, ins[i].what, ins[i].buf.Label())
			}
		}
	}
	lo, hi := ropeTables(a.Base, a.freqScale(), a.ropeDims())
	p := ropeQKVParams{
		Tokens: uint32(a.Tokens), Heads: uint32(a.Heads), KVHeads: uint32(a.KVHeads), HeadDim: uint32(a.HeadDim),
		RopeDims: uint32(a.ropeDims()), Pos0: uint32(a.Pos0), MScale: a.attnFactor(), Eps: a.Eps, Lo: lo, Hi: hi,
	}
	if a.NeoX {
		p.Flags |= ropeQKVNeoX
	}
	if a.VNorm {
		p.Flags |= ropeQKVVNorm
	}
	// The optional inputs are read only; each must be another buffer than
	// those written.
	optional := func(name string, b *gpu.Buffer, floats int, flag uint32) (*gpu.Buffer, error) {
		if b == nil {
			return qkv, nil // fills the slot; the kernel does not read it
		}
		if err := needF32("rope_qkv", name, b, floats); err != nil {
			return nil, err
		}
		if b == q || b == kCache || b == vCache {
			return nil, fmt.Errorf("ops: rope_qkv: %s %q must not be an output", name, b.Label())
		}
		p.Flags |= flag
		return b, nil
	}
	var err error
	if bias, err = optional("bias", bias, width, ropeQKVBias); err != nil {
		return err
	}
	gains := 2 // q's and k's
	if a.KVHeads == 0 {
		gains = 1
	}
	if norms, err = optional("norms", norms, gains*a.HeadDim, ropeQKVNorm); err != nil {
		return err
	}
	if factors, err = optional("factors", factors, a.ropeDims()/2, ropeQKVFactors); err != nil {
		return err
	}
	if a.KVHeads == 0 {
		kCache, vCache = qkv, qkv // fill the slots; the kernel does not touch them
	}
	groups := a.Tokens * (a.Heads + 2*a.KVHeads)
	return dispatch(c, gpu.Spec("rope_qkv", "rope_qkv", "WG", ropeQKVWG), p, gpu.Grid(groups, 1), qkv, bias, norms, factors, q, kCache, vCache)
}
