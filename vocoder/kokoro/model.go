package kokoro

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Model is Kokoro-82M (KModel in the reference) on the CPU, its fields the
// checkpoint's five modules. It is the reference the GPU forward is tested
// against; it is exact float64 arithmetic rounded to f32 between layers,
// not fast.
type Model struct {
	Config      *Config
	BERT        *ALBERT
	BERTEncoder *Linear // PL-BERT's width to hidden_dim
	Predictor   *ProsodyPredictor
	TextEncoder *TextEncoder
	Decoder     *Decoder
}

// NewModel builds the model from a checkpoint's weights, checking every
// tensor's shape against the config and that no tensor is left over.
func NewModel(cfg *Config, w *Weights) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kokoro: model: %w", err)
	}
	if cfg.HiddenDim != decoderOut {
		// The decoder's asr_res is Conv1d(512, 64) in the reference.
		return nil, fmt.Errorf("kokoro: model: hidden_dim (%d) must be %d: the decoder's content residual reads that many channels", cfg.HiddenDim, decoderOut)
	}
	if cfg.ISTFTNet.UpsampleInitialChannel != decoderOut {
		return nil, fmt.Errorf("kokoro: model: istftnet.upsample_initial_channel (%d) must be %d, the decoder's output width", cfg.ISTFTNet.UpsampleInitialChannel, decoderOut)
	}
	l := newLoader(w)
	m := &Model{
		Config:      cfg,
		BERT:        loadALBERT(l, cfg),
		BERTEncoder: loadLinear(l, "bert_encoder", cfg.PLBert.HiddenSize, cfg.HiddenDim),
		Predictor:   loadProsodyPredictor(l, cfg),
		TextEncoder: loadTextEncoder(l, cfg),
		Decoder:     loadDecoder(l, cfg),
	}
	if err := l.err(); err != nil {
		return nil, fmt.Errorf("kokoro: model: %w", err)
	}
	if extra := l.unused(); len(extra) > 0 {
		if len(extra) > 5 {
			extra = append(extra[:5], fmt.Sprintf("… (%d in all)", len(extra)))
		}
		return nil, fmt.Errorf("kokoro: model: %s: tensors the config has no place for: %s", w.Path, strings.Join(extra, ", "))
	}
	return m, nil
}

// Forward speaks one utterance: tokens are Kokoro token ids with the pad
// (0) at both ends, as KModel.forward_with_tokens takes them; style is a
// voice's 256-value row for the utterance's phoneme count (Voice.Style);
// speed divides every duration. It returns 24 kHz audio and each token's
// duration in frames (Config.FrameSamples samples each). deterministic
// zeroes the harmonic source's random initial phases and noise, as the
// tests do to the reference; otherwise they are drawn fresh each call.
func (m *Model) Forward(tokens []int, style []float32, speed float64, deterministic bool) (audio []float32, durations []int, err error) {
	var rng *rand.Rand
	if !deterministic {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return m.forward(tokens, style, speed, rng, nil)
}

// tracer receives named intermediates in the reference's layouts (batch
// dimension dropped) for the tests; a nil tracer ignores them.
type tracer func(name string, data []float32, shape ...int)

func (t tracer) add(name string, data []float32, shape ...int) {
	if t != nil {
		t(name, data, shape...)
	}
}

func (m *Model) forward(tokens []int, style []float32, speed float64, rng *rand.Rand, trace tracer) ([]float32, []int, error) {
	c := m.Config
	if err := m.checkInput(tokens, style, speed); err != nil {
		return nil, nil, err
	}
	T, H, S := len(tokens), c.HiddenDim, c.StyleDim
	timbre, prosody := style[:S], style[S:] // ref_s[:, :128] and ref_s[:, 128:]

	// PL-BERT over the phonemes, projected to hidden_dim: d_en.
	bert, err := m.BERT.forward(tokens)
	if err != nil {
		return nil, nil, err
	}
	trace.add("bert", bert, T, m.BERT.Hidden)
	dEn := m.BERTEncoder.rows(bert, T)
	trace.add("d_en", dEn, T, H)

	// Duration encoder (LSTMs and AdaLayerNorms, style appended): d.
	d := m.Predictor.TextEncoder.forward(transpose(dEn, T, H), T, prosody)
	trace.add("dur_enc", transpose(d, H+S, T), T, H+S)

	// Durations in frames: sigmoid(duration_proj(lstm(d))) summed, / speed, rounded.
	durations, x := m.Predictor.durations(d, T, speed)
	trace.add("dur_lstm", transpose(x, H, T), T, H)
	F := 0
	for _, n := range durations {
		F += n
	}

	// Alignment: d spread over the frames, then F0 and energy at 2F.
	en := expand(d, H+S, durations)
	f0, n, shared := m.Predictor.f0n(en, F, prosody)
	trace.add("shared_lstm", transpose(shared, H, F), F, H)
	trace.add("F0", f0, 1, 2*F)
	trace.add("N", n, 1, 2*F)

	// Text encoder, spread over the frames the same way: the content, asr.
	tEn := m.TextEncoder.forward(tokens)
	trace.add("t_en", tEn, H, T)
	asr := expand(tEn, H, durations)
	trace.add("asr", asr, H, F)

	// Decoder to [512][2F] features, then the generator to audio.
	feat := m.Decoder.features(asr, f0, n, F, timbre, trace)
	trace.add("dec_out", feat, decoderOut, 2*F)
	audio, err := m.Decoder.Generator.forward(feat, 2*F, timbre, f0, rng, trace)
	if err != nil {
		return nil, nil, err
	}
	trace.add("audio", audio, len(audio))
	return audio, durations, nil
}

func (m *Model) checkInput(tokens []int, style []float32, speed float64) error {
	c := m.Config
	var errs []error
	if len(tokens) < 3 {
		errs = append(errs, fmt.Errorf("%d tokens: want the two pads and at least one phoneme", len(tokens)))
	}
	if len(tokens) > c.PLBert.MaxPositionEmbeddings {
		errs = append(errs, fmt.Errorf("%d tokens: the model's context is %d (%d phonemes and the pads)", len(tokens), c.PLBert.MaxPositionEmbeddings, c.MaxPhonemes()))
	}
	for i, id := range tokens {
		if id < 0 || id >= c.NToken {
			errs = append(errs, fmt.Errorf("token %d is %d, outside [0, n_token=%d)", i, id, c.NToken))
			break
		}
	}
	if len(style) != 2*c.StyleDim {
		errs = append(errs, fmt.Errorf("style has %d values, want %d", len(style), 2*c.StyleDim))
	}
	if !(speed > 0) || speed > 1e6 {
		errs = append(errs, fmt.Errorf("speed %g must be positive and at most 1e6", speed))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kokoro: forward: %w", err)
	}
	return nil
}
