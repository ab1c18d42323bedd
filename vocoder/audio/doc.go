// Package audio is Hearth's sound in and out, apart from any model: WAV
// files (WriteWAV and the streaming WAVWriter, 16-bit PCM or 32-bit float
// mono; ReadWAV for what Hearth writes; ReadRecording for a user's
// recording in any common WAV encoding), and a Player that plays mono
// samples on the sound card as they are queued (oto, or ALSA directly on
// Linux with cgo; ErrNoAudioDevice where there is no card).
//
// It sits under vocoder/ because speech is the only audio Hearth makes:
// vocoder/kokoro synthesises at SampleRate and app hands its chunks here.
package audio

// SampleRate is the rate in Hz a Player plays at: Kokoro's output rate
// (vocoder/kokoro.SampleRate, which a test there holds equal), the only
// audio Hearth makes.
const SampleRate = 24000
