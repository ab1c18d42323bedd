package app

import "github.com/hearthstudio/hearth/vocoder/kokoro"

// VoiceWeight is one term of a voice blend: a voice pack's name and its
// share.
type VoiceWeight = kokoro.VoiceWeight

// ParseVoiceSpec reads a voice setting: "af_heart", "af_heart,am_adam" or
// "af_heart:0.6,am_adam:0.4" (kokoro.ParseVoiceSpec).
func ParseVoiceSpec(spec string) ([]VoiceWeight, error) { return kokoro.ParseVoiceSpec(spec) }

// EncodeStyle runs the voice style encoders on a reference recording's
// mel frames where backend says (openBackend, as speech does: under auto
// on the CPU when there is no GPU or only a software one), on a device of
// its own. onBackend, when set, hears the choice before the encoders run.
func EncodeStyle(backend string, opts GPUOptions, enc *kokoro.StyleEncoder, mel []float32, frames int, onBackend func(Backend)) ([]float32, Backend, error) {
	b, dev, err := openBackend(backend, JobInference, opts)
	if err != nil {
		return nil, Backend{}, err
	}
	if onBackend != nil {
		onBackend(b)
	}
	if !b.GPU {
		s, err := enc.Style(mel, frames)
		return s, b, err
	}
	defer dev.Release()
	g, err := kokoro.NewGPUStyleEncoder(dev, enc)
	if err != nil {
		return nil, Backend{}, err
	}
	defer g.Release()
	s, err := g.Style(mel, frames)
	return s, b, err
}
