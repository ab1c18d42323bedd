package sample

import (
	"errors"
	"fmt"
	"math"
)

// Options configure a Sampler. The zero value is greedy decoding with no
// penalties; Defaults is what a chat should start from.
type Options struct {
	// Temperature divides the logits before the draw: below 1 sharpens the
	// distribution, above 1 flattens it. 0 always takes the most likely
	// token (greedy), after the penalties.
	Temperature float32
	// TopK keeps only the TopK most likely tokens; 0 keeps all.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// adds up to at least TopP (nucleus sampling); 0 or 1 keeps all.
	TopP float32
	// MinP keeps the tokens at least MinP times as likely as the most likely
	// one; 0 keeps all.
	MinP float32
	// RepeatPenalty is llama.cpp's repetition penalty: a recent token's
	// logit is divided by it when positive and multiplied by it when
	// negative, so above 1 both become less likely. 0 or 1 is off.
	RepeatPenalty float32
	// FrequencyPenalty and PresencePenalty are OpenAI's: a token seen count
	// times in the window loses count*FrequencyPenalty + PresencePenalty
	// from its logit. Both lie in [-2, 2], as in OpenAI's API; negative
	// values favour repeats.
	FrequencyPenalty, PresencePenalty float32
	// RepeatLastN is how many of the most recent tokens the penalties count:
	// 0 none, -1 the whole history.
	RepeatLastN int
	// Seed seeds the draws: one seed and one sequence of inputs give one
	// sequence of tokens. 0 is a seed like any other; a caller wanting
	// different output each run picks a random one.
	Seed uint64
}

// Defaults returns llama.cpp's sampling defaults: temperature 0.8, top-k 40,
// top-p 0.95, min-p 0.05, repeat penalty 1 (off) over the last 64 tokens.
//
// Ollama differs in two: top-p 0.9 and repeat penalty 1.1 (with min-p 0).
// Hearth takes llama.cpp's pair because min-p 0.05 already cuts the
// long tail that Ollama's tighter top-p is there to cut, and does it
// relative to the best token, so a confident step keeps few tokens and an
// open one keeps many. The repeat penalty stays off, as llama.cpp made it,
// because it also punishes the repeats text needs (punctuation, code
// syntax, the names in a conversation); a caller that wants Ollama's
// behaviour sets RepeatPenalty to 1.1.
func Defaults() Options {
	return Options{
		Temperature:   0.8,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1,
		RepeatLastN:   64,
	}
}

// maxPenalty bounds the frequency and presence penalties, as OpenAI's API
// does: past ±2 a single occurrence already outweighs most logit gaps.
const maxPenalty = 2

// Validate reports every option out of range, each error naming its field.
func (o Options) Validate() error {
	var errs []error
	bad := func(field string, v any, want string) {
		errs = append(errs, fmt.Errorf("sample: %s = %v: %s", field, v, want))
	}
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
	if !finite(o.Temperature) || o.Temperature < 0 {
		bad("Temperature", o.Temperature, "must be finite and at least 0")
	}
	if o.TopK < 0 {
		bad("TopK", o.TopK, "must be at least 0 (0 is off)")
	}
	if !finite(o.TopP) || o.TopP < 0 || o.TopP > 1 {
		bad("TopP", o.TopP, "must lie in [0, 1]")
	}
	if !finite(o.MinP) || o.MinP < 0 || o.MinP > 1 {
		bad("MinP", o.MinP, "must lie in [0, 1]")
	}
	if !finite(o.RepeatPenalty) || o.RepeatPenalty < 0 {
		bad("RepeatPenalty", o.RepeatPenalty, "must be finite and at least 0 (0 and 1 are off)")
	}
	if !finite(o.FrequencyPenalty) || math.Abs(float64(o.FrequencyPenalty)) > maxPenalty {
		bad("FrequencyPenalty", o.FrequencyPenalty, "must lie in [-2, 2]")
	}
	if !finite(o.PresencePenalty) || math.Abs(float64(o.PresencePenalty)) > maxPenalty {
		bad("PresencePenalty", o.PresencePenalty, "must lie in [-2, 2]")
	}
	if o.RepeatLastN < -1 {
		bad("RepeatLastN", o.RepeatLastN, "must be at least -1 (-1 is the whole history)")
	}
	return errors.Join(errs...)
}

// CandidateCount is how many top-k candidates the GPU should hand
// SampleCandidates, at most limit (ops.MaxTopK): 1 when greedy, TopK when it
// is set and within limit, else limit. In that last case the GPU path is an
// approximation: tokens past the limit best are never drawn, and top-p
// measures its mass among the limit instead of the whole vocabulary. At the
// usual temperatures those tokens carry little probability; a caller that
// needs the exact distribution with TopK = 0 uses Sample on the whole
// logits.
func (o Options) CandidateCount(limit int) int {
	switch {
	case limit < 1:
		return 0
	case o.Temperature == 0:
		return 1
	case o.TopK > 0:
		return min(o.TopK, limit)
	}
	return limit
}

// penalizes reports whether the penalties change any logit.
func (o Options) penalizes() bool {
	if o.RepeatLastN == 0 {
		return false
	}
	return (o.RepeatPenalty != 0 && o.RepeatPenalty != 1) || o.FrequencyPenalty != 0 || o.PresencePenalty != 0
}

// topPOn and minPOn report whether those filters cut anything.
func (o Options) topPOn() bool { return o.TopP > 0 && o.TopP < 1 }
func (o Options) minPOn() bool { return o.MinP > 0 }
