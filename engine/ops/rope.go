package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// RoPEArgs shapes a rotary position embedding of x = [Tokens, Heads,
// HeadDim] f32, row-major (a batch of queries or keys).
type RoPEArgs struct {
	Tokens, Heads, HeadDim int
	// RopeDims is how many leading dims of each head rotate, even and at most
	// HeadDim (partial rotary, e.g. Phi-2's 32 of 80); the rest pass
	// through. 0 means all of HeadDim.
	RopeDims int
	// NeoX pairs dims (i, i + RopeDims/2) as GPT-NeoX, Qwen, Gemma and Phi-3
	// do; otherwise (2i, 2i + 1), as the original Llama.
	NeoX bool
	// Base is the frequency base (rope_freq_base): pair i turns at
	// Base^(-2i / RopeDims) radians per position.
	Base float32
	// FreqScale multiplies positions (linear RoPE scaling by a factor s is
	// FreqScale = 1/s); 0 means 1.
	FreqScale float32
	// Pos0 is the position of token 0: token t sits at Pos0 + t. With a
	// positions buffer it must be 0 and token t sits at positions[t].
	Pos0 int
	// AttnFactor multiplies every rotated value (its cos and sin): the
	// attention scaling of YaRN and LongRoPE, applied to q and k alike. 0
	// means 1.
	AttnFactor float32
}

// ropeParams mirrors Params in shaders/rope.wgsl.
type ropeParams struct {
	Tokens, Heads, HeadDim, RopeDims uint32
	Pos0, Flags                      uint32
	MScale                           float32
	_                                uint32
	Lo, Hi                           [16]float32
}

// Flags of ropeParams, as FLAG_* in shaders/rope.wgsl.
const (
	ropeNeoX      = 1
	ropeFactors   = 2
	ropePositions = 4
)

// ropeWG is the RoPE workgroup size; one invocation per rotated pair.
const ropeWG = 256

// ropeMaxDims is the widest rotation the kernel's frequency tables reach:
// 16 x 16 pairs.
const ropeMaxDims = 512

// ropeMaxPos is the largest position an f32 holds exactly (2^24).
const ropeMaxPos = 1 << 24

// ropeTables are the kernel's frequency tables: pair i turns at
// lo[i%16] * hi[i/16] radians per position, so that the kernel needs no pow
// (see shaders/rope.wgsl). Each entry is computed in float64 and rounded
// once, the product is within 1.5 ulps of base^(-2i/dims) * scale.
func ropeTables(base, freqScale float32, dims int) (lo, hi [16]float32) {
	b, d := float64(base), float64(dims)
	for j := range 16 {
		lo[j] = float32(math.Pow(b, -2*float64(j)/d))
		hi[j] = float32(math.Pow(b, -2*float64(16*j)/d) * float64(freqScale))
	}
	return lo, hi
}

// ropeDims is a.RopeDims with 0 meaning the whole head.
func (a RoPEArgs) ropeDims() int {
	if a.RopeDims == 0 {
		return a.HeadDim
	}
	return a.RopeDims
}

// attnFactor is a.AttnFactor with 0 meaning 1.
func (a RoPEArgs) attnFactor() float32 {
	if a.AttnFactor == 0 {
		return 1
	}
	return a.AttnFactor
}

// freqScale is a.FreqScale with 0 meaning 1.
func (a RoPEArgs) freqScale() float32 {
	if a.FreqScale == 0 {
		return 1
	}
	return a.FreqScale
}

func (a RoPEArgs) check() error {
	d := a.ropeDims()
	switch {
	case a.Tokens <= 0 || a.Heads <= 0 || a.HeadDim <= 0:
		return fmt.Errorf("ops: rope: shape %dx%dx%d must be positive", a.Tokens, a.Heads, a.HeadDim)
	case int64(a.Tokens)*int64(a.Heads)*int64(a.HeadDim) > math.MaxUint32:
		return fmt.Errorf("ops: rope: %dx%dx%d floats overflow the kernel's 32-bit index", a.Tokens, a.Heads, a.HeadDim)
	case d < 2 || d%2 != 0 || d > a.HeadDim:
		return fmt.Errorf("ops: rope: rope_dims %d must be even, at least 2 and at most head_dim %d", d, a.HeadDim)
	case d > ropeMaxDims:
		return fmt.Errorf("ops: rope: rope_dims %d is over the kernel's %d", d, ropeMaxDims)
	case !(a.Base > 0) || math.IsInf(float64(a.Base), 0):
		return fmt.Errorf("ops: rope: base %v must be positive and finite", a.Base)
	case !(a.FreqScale >= 0) || math.IsInf(float64(a.FreqScale), 0):
		return fmt.Errorf("ops: rope: freq_scale %v must be finite and >= 0", a.FreqScale)
	case !(a.AttnFactor >= 0) || math.IsInf(float64(a.AttnFactor), 0):
		return fmt.Errorf("ops: rope: attn_factor %v must be finite and >= 0", a.AttnFactor)
	case a.Pos0 < 0 || a.Pos0+a.Tokens > ropeMaxPos:
		return fmt.Errorf("ops: rope: positions %d..%d must lie in [0, 2^24], where f32 holds them exactly", a.Pos0, a.Pos0+a.Tokens-1)
	}
	return nil
}

// params builds the kernel's uniform for a and the optional buffers.
func (a RoPEArgs) params(factors, positions bool) ropeParams {
	lo, hi := ropeTables(a.Base, a.freqScale(), a.ropeDims())
	p := ropeParams{
		Tokens: uint32(a.Tokens), Heads: uint32(a.Heads), HeadDim: uint32(a.HeadDim), RopeDims: uint32(a.ropeDims()),
		Pos0: uint32(a.Pos0), MScale: a.attnFactor(), Lo: lo, Hi: hi,
	}
	if a.NeoX {
		p.Flags |= ropeNeoX
	}
	if factors {
		p.Flags |= ropeFactors
	}
	if positions {
		p.Flags |= ropePositions
	}
	return p
}

// RoPE rotates x = [Tokens, Heads, HeadDim] in place by each token's
// position (see RoPEArgs). factors, when not nil, holds RopeDims/2 floats
// that divide the pairs' angles (Llama 3's rope_freqs, Phi-3's long or short
// factors); positions, when not nil, holds Tokens u32 positions (below 2^24)
// for prefill at arbitrary positions. Angles are f32 as in llama.cpp and
// transformers; see shaders/rope.wgsl for what that costs at long context
// and why nothing else does.
func RoPE(c *gpu.Chain, x, factors, positions *gpu.Buffer, a RoPEArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	if err := needF32("rope", "x", x, a.Tokens*a.Heads*a.HeadDim); err != nil {
		return err
	}
	if factors != nil {
		if err := needF32("rope", "factors", factors, a.ropeDims()/2); err != nil {
			return err
		}
		if factors == x {
			return fmt.Errorf("ops: rope: factors %q must be another buffer than x", factors.Label())
		}
	}
	if positions != nil {
		if a.Pos0 != 0 {
			return fmt.Errorf("ops: rope: pos0 %d with a positions buffer; the buffer gives every position", a.Pos0)
		}
		if positions.Size() < uint64(a.Tokens)*4 {
			return fmt.Errorf("ops: rope: positions buffer %q holds %d positions, need %d", positions.Label(), positions.Size()/4, a.Tokens)
		}
		if positions == x {
			return fmt.Errorf("ops: rope: positions %q must be another buffer than x", positions.Label())
		}
	}
	params := a.params(factors != nil, positions != nil)
	if factors == nil {
		factors = x // fills the slot; the kernel does not read it
	}
	if positions == nil {
		positions = x
	}
	pairs := a.Tokens * a.Heads * a.ropeDims() / 2
	return dispatch(c, gpu.Spec("rope", "rope", "WG", ropeWG), params, gpu.Grid(pairs, ropeWG), x, factors, positions)
}
