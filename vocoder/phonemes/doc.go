// Package phonemes turns English text into a speech model's phoneme tokens,
// as Kokoro's pipeline (hexgrad's misaki with its espeak-ng fallback) does:
// a Phonemizer normalises the text (Normalize: numbers, currency,
// abbreviations), phonemizes it with espeak-ng (libespeak-ng loaded at run
// time where cgo is on, else the espeak-ng command), maps espeak's IPA to
// misaki's symbols, keeps the symbols the model's vocabulary has
// (FilterVocab) and splits the result into Chunks of at most the model's
// limit, with token ids and per-word phoneme spans for timestamps. A
// Rechunker recuts those chunks for streaming: the first sentence alone,
// then chunks that double.
//
// It knows a model only by its vocabulary and its limit, so it imports no
// model; vocoder/kokoro's Speaker is its user.
package phonemes
