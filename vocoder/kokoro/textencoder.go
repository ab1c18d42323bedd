package kokoro

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// TextEncoder is StyleTTS2's phoneme encoder, whose output the alignment
// spreads over the frames as the decoder's content input (asr): an
// embedding, NLayer blocks of conv → LayerNorm over channels → LeakyReLU
// 0.2, and a bidirectional LSTM.
type TextEncoder struct {
	Embedding []float32 // [n_token][channels]
	CNN       []TextConvBlock
	LSTM      *BiLSTM
	Channels  int
}

// TextConvBlock is one nn.Sequential(weight_norm(Conv1d), LayerNorm,
// LeakyReLU, Dropout) of the text encoder.
type TextConvBlock struct {
	Conv        *Conv1d
	Gamma, Beta []float32
}

func loadTextEncoder(l *loader, c *Config) *TextEncoder {
	ch, k := c.HiddenDim, c.TextEncoderKernelSize
	m := &TextEncoder{Embedding: l.tensor("text_encoder.embedding.weight", c.NToken, ch),
		LSTM: loadBiLSTM(l, "text_encoder.lstm", ch, ch/2), Channels: ch}
	for i := range c.NLayer {
		p := fmt.Sprintf("text_encoder.cnn.%d.", i)
		m.CNN = append(m.CNN, TextConvBlock{
			Conv:  loadConv1d(l, p+"0", ch, ch, k, 1, (k-1)/2, 1, true),
			Gamma: l.tensor(p+"1.gamma", ch),
			Beta:  l.tensor(p+"1.beta", ch),
		})
	}
	return m
}

// forward encodes the token ids into [Channels][T]. Every position is a
// real token (one utterance, no padding), so the masks are no-ops.
func (m *TextEncoder) forward(tokens []int) []float32 {
	T, C := len(tokens), m.Channels
	x := make([]float32, C*T)
	for t, id := range tokens {
		for c := range C {
			x[c*T+t] = m.Embedding[id*C+c]
		}
	}
	for _, b := range m.CNN {
		x = b.Conv.apply(x, T)
		x = ref.ChannelLayerNorm(x, b.Gamma, b.Beta, nil, ref.AudioNormArgs{Channels: C, Length: T, Eps: 1e-5})
		x = ref.LeakyReLU(x, 0.2)
	}
	return m.LSTM.apply(x, T)
}
