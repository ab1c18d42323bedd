// Package kokoro is Kokoro-82M (StyleTTS2 with an iSTFTNet decoder) text to
// speech, on the GPU through engine/ops (never wgpu directly), with a CPU
// reference of every step. Its neighbours hold what is not the model:
// vocoder/phonemes turns text into tokens, vocoder/audio writes WAV and
// plays sound, and pth (beside gguf and safetensors) reads the PyTorch
// checkpoints. vocoder/ stays the home of speech, as DESIGN.md's layout
// has it; the checkpoint reader is a weights format, so it sits with the
// others on the ground floor.
//
//   - Weights: OpenWeights reads the released kokoro-v1_0.pth (a torch.save
//     zip of the bert, bert_encoder, predictor, text_encoder and decoder
//     state dicts, through pth) or the same weights as safetensors, into
//     f32, with weight norm folded; Weights.Tensor looks a tensor up with a
//     shape check. LoadConfig reads and validates config.json (Config).
//   - Voices: LoadVoice reads a voice pack (.bin or .pt), OpenVoice a voice
//     or a blend ("af_heart:0.6,am_adam:0.4") from a directory, and
//     Voice.Style picks the style row for an utterance's phoneme count.
//   - The model's CPU reference forward: NewModel builds a Model (PL-BERT's
//     ALBERT, the prosody predictor, the text encoder, the decoder and its
//     iSTFTNet generator, fields mirroring the checkpoint) and
//     Model.Forward turns token ids and a style row into 24 kHz audio and
//     per-token durations, on engine/ops/ref's arithmetic (float64 inside).
//     It matches hexgrad's KModel (testdata/make_forward_fixture.py) and is
//     the oracle for the GPU forward.
//   - Speech: LoadModel reads a Kokoro directory; a Speaker phonemizes a
//     text (a phonemes.Phonemizer made with the model's vocabulary) and
//     synthesises it chunk by chunk (the first sentence alone, for a quick
//     start) through any Synthesizer (*Model, *GPUModel), handing out each
//     chunk's audio with its words' times from the predicted durations, for
//     audio.Player to play as they come.
//   - The GPU forward: NewGPUModel uploads a Model's weights and
//     GPUModel.Forward runs the same steps on engine/ops kernels in two
//     submits (PL-BERT, the duration encoder, the durations and the text
//     encoder; then the alignment, F0/energy, the decoder and the
//     generator), tested against the CPU forward step by step.
//   - Voices from recordings: LoadStyleEncoder reads StyleTTS2's style and
//     prosody encoders from its checkpoint; their VoiceFromAudio turns a
//     reference recording (audio.ReadRecording, resampled to 24 kHz,
//     trimmed, log-mel: PrepareReference) into a 256-value style, on the
//     CPU or the GPU, to be blended with a stock voice (BlendVoices).
//     Kokoro ships no style encoder, and StyleTTS2's was trained with
//     StyleTTS2's decoder, so such a voice is a starting point, not a
//     clone.
package kokoro
