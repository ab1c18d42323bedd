package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// penaltyParams mirrors Params in shaders/penalty.wgsl.
type penaltyParams struct {
	N, Vocab                    uint32
	Repeat, Frequency, Presence float32
	_, _, _                     uint32
}

// PenaltyArgs are the repetition penalties Penalize applies.
type PenaltyArgs struct {
	// Vocab is the length of the logits vector; ids at or past it are
	// skipped, so a stray id cannot write past the row.
	Vocab int
	// Repeat is llama.cpp's repeat penalty: a positive logit is divided by
	// it, a negative one multiplied. 0 and 1 leave logits as they are.
	Repeat float32
	// Frequency and Presence are OpenAI's: a token seen count times loses
	// count*Frequency + Presence. Negative values favour repeats.
	Frequency, Presence float32
}

// Penalize appends the repetition penalties to logits[ids[i]] for i < n, in
// place, each id counted counts[i] times (u32 each; sample.Sampler's
// Penalties lists them). The ids must be unique: each invocation rewrites its
// own logit, and a repeated id would race. Ids at or past p.Vocab and zero
// counts are skipped; ±inf and NaN logits are left as they are. n = 0
// appends nothing. logits must be another buffer than ids and counts.
func Penalize(c *gpu.Chain, logits, ids, counts *gpu.Buffer, n int, p PenaltyArgs) error {
	const kernel = "penalize"
	if n < 0 || p.Vocab <= 0 || int64(n) > math.MaxUint32 || int64(p.Vocab) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: n = %d, vocab = %d: n must not be negative, vocab must be positive, both below 2^32", kernel, n, p.Vocab)
	}
	for _, f := range []struct {
		name string
		v    float32
	}{{"repeat", p.Repeat}, {"frequency", p.Frequency}, {"presence", p.Presence}} {
		if math.IsNaN(float64(f.v)) || math.IsInf(float64(f.v), 0) {
			return fmt.Errorf("ops: %s: %s penalty %v must be finite", kernel, f.name, f.v)
		}
	}
	if p.Repeat < 0 {
		return fmt.Errorf("ops: %s: repeat penalty %v must not be negative", kernel, p.Repeat)
	}
	if err := needF32(kernel, "logits", logits, p.Vocab); err != nil {
		return err
	}
	// u32 and f32 are both 4 bytes, so needF32 measures the id and count
	// lists too.
	if err := needF32(kernel, "ids", ids, n); err != nil {
		return err
	}
	if err := needF32(kernel, "counts", counts, n); err != nil {
		return err
	}
	if logits == ids || logits == counts {
		return fmt.Errorf("ops: %s: logits %q must be another buffer than ids and counts", kernel, logits.Label())
	}
	if n == 0 {
		return nil
	}
	repeat := p.Repeat
	if repeat == 0 {
		repeat = 1 // "off", as in the sampler's options; the kernel divides by it
	}
	params := penaltyParams{N: uint32(n), Vocab: uint32(p.Vocab), Repeat: repeat, Frequency: p.Frequency, Presence: p.Presence}
	return dispatch(c, gpu.Spec("penalty", kernel, "WG", wg), params, gpu.Grid(n, wg), logits, ids, counts)
}
