package sample

// Penalize applies llama.cpp's repeat penalty and OpenAI's frequency and
// presence penalties in place to logits[ids[i]], a token seen counts[i]
// times: a positive logit is divided by repeat and a negative one multiplied
// (so both become less likely), then count*frequency + presence is
// subtracted. repeat 0 means 1 (no repeat penalty). Ids at or past
// len(logits) and zero counts are skipped; ids must be unique, or a token is
// penalised twice; pairs past the shorter of ids and counts are ignored.
// The arithmetic is f32, step by step, as llama.cpp's
// llama_sampler_penalties_apply writes it.
func Penalize(logits []float32, ids, counts []uint32, repeat, frequency, presence float32) {
	if repeat == 0 {
		repeat = 1
	}
	for i := range min(len(ids), len(counts)) {
		id, c := ids[i], counts[i]
		if uint64(id) >= uint64(len(logits)) || c == 0 {
			continue
		}
		v := logits[id]
		if v <= 0 {
			v *= repeat
		} else {
			v /= repeat
		}
		// The conversion rounds the product on its own: Go may fuse x*y + z
		// into an FMA (it does on arm64), which would make the reference
		// differ between machines.
		logits[id] = v - (float32(float32(c)*frequency) + presence)
	}
}
