package ref

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMoERouteBackwardMatchesFiniteDifference holds MoERouteBackward
// against central differences of Σ dw·MoERoute(logits) for each gating:
// softmax renormalised (Qwen 3 MoE, gpt-oss), softmax alone, sigmoid
// renormalised and not, and a per-expert scale (Gemma 4). The logits are
// spaced so that no ±1e-3 step changes the choice, which the loss holds
// fixed as the backward does.
func TestMoERouteBackwardMatchesFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 20))
	for _, a := range []MoERouteArgs{
		{Tokens: 3, Experts: 9, TopK: 3, Renorm: true},
		{Tokens: 2, Experts: 6, TopK: 2},
		{Tokens: 2, Experts: 7, TopK: 3, Sigmoid: true, Renorm: true},
		{Tokens: 2, Experts: 5, TopK: 2, Sigmoid: true},
		{Tokens: 1, Experts: 4, TopK: 4, Renorm: true},
	} {
		for _, scaled := range []bool{false, true} {
			logits := make([]float32, a.Tokens*a.Experts)
			for tk := range a.Tokens {
				for e, k := range r.Perm(a.Experts) {
					// Gaps of 0.3 between any two logits of a token.
					logits[tk*a.Experts+e] = 0.3*float32(k) - 1
				}
			}
			var scale []float32
			if scaled {
				scale = randF32(r, a.Experts, 1)
			}
			ids, _ := MoERoute(logits, scale, a)
			dw := randF32(r, a.Tokens*a.TopK, 1)
			got := MoERouteBackward(logits, scale, ids, dw, a)
			checkGradient(t, "dlogits", logits, got, func() float64 {
				gotIDs, w := MoERoute(logits, scale, a)
				if !slices.Equal(gotIDs, ids) {
					t.Fatalf("%+v: a step changed the choice", a)
				}
				return dotF64(w, dw)
			})
		}
	}
}

// TestMoECombineBackwardMatchesFiniteDifference holds MoECombineBackward
// against central differences of Σ g·MoECombine(y, w) in y and in w, with
// and without a scale.
func TestMoECombineBackwardMatchesFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	const tokens, used, dim = 3, 2, 5
	for _, scale := range []float32{0, 0.7} {
		y := randF32(r, tokens*used*dim, 1)
		w := randF32(r, tokens*used, 1)
		g := randF32(r, tokens*dim, 1)
		dY, dW := MoECombineBackward(y, w, g, tokens, used, dim, scale)
		loss := func() float64 { return dotF64(MoECombine(y, w, tokens, used, dim, scale), g) }
		checkGradient(t, "dy", y, dY, loss)
		checkGradient(t, "dw", w, dW, loss)
	}
}
