// Package vocoder will hold Kokoro/StyleTTS2 text to speech: weights,
// phonemes (espeak-ng), the text encoder, prosody, the iSTFTNet decoder and
// audio out (the voice issue). It calls engine/ops, never wgpu.
package vocoder
