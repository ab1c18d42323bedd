package kokoro

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"unicode/utf8"
)

// Config is Kokoro's config.json: the hyper-parameters of the PL-BERT
// duration encoder, the prosody predictor, the text encoder and the
// iSTFTNet decoder, and the phoneme vocabulary. Field names follow the JSON
// keys of Kokoro-82M v1.0's config.json, which KModel (kokoro/model.py)
// passes straight to its modules.
type Config struct {
	ISTFTNet              ISTFTNetConfig `json:"istftnet"`
	DimIn                 int            `json:"dim_in"`
	Dropout               float64        `json:"dropout"`
	HiddenDim             int            `json:"hidden_dim"`
	MaxConvDim            int            `json:"max_conv_dim"`
	MaxDur                int            `json:"max_dur"`
	Multispeaker          bool           `json:"multispeaker"`
	NLayer                int            `json:"n_layer"`
	NMels                 int            `json:"n_mels"`
	NToken                int            `json:"n_token"`
	StyleDim              int            `json:"style_dim"`
	TextEncoderKernelSize int            `json:"text_encoder_kernel_size"`
	PLBert                PLBertConfig   `json:"plbert"`
	// Vocab maps one phoneme symbol (a single code point: KModel looks up
	// each character of the phoneme string) to its token id. Id 0 is the
	// pad that wraps every utterance and is never a symbol's id.
	Vocab map[string]int `json:"vocab"`
}

// ISTFTNetConfig is the decoder's generator: transposed-convolution
// upsampling stages, multi-receptive-field residual blocks, and the inverse
// STFT that turns its magnitude and phase into samples.
type ISTFTNetConfig struct {
	UpsampleKernelSizes    []int   `json:"upsample_kernel_sizes"`
	UpsampleRates          []int   `json:"upsample_rates"`
	GenISTFTHopSize        int     `json:"gen_istft_hop_size"`
	GenISTFTNFFT           int     `json:"gen_istft_n_fft"`
	ResblockDilationSizes  [][]int `json:"resblock_dilation_sizes"`
	ResblockKernelSizes    []int   `json:"resblock_kernel_sizes"`
	UpsampleInitialChannel int     `json:"upsample_initial_channel"`
}

// PLBertConfig is the ALBERT encoder that predicts durations from phonemes.
type PLBertConfig struct {
	HiddenSize            int     `json:"hidden_size"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	IntermediateSize      int     `json:"intermediate_size"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	Dropout               float64 `json:"dropout"`
}

// LoadConfig reads and validates a Kokoro config.json.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig decodes and validates config.json's content; name (a path)
// appears in errors.
func ParseConfig(data []byte, name string) (*Config, error) {
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	return &c, nil
}

// MaxPhonemes is the most phoneme tokens one utterance can have: the
// PL-BERT context less the two pads (510 for Kokoro-82M's 512).
func (c *Config) MaxPhonemes() int { return c.PLBert.MaxPositionEmbeddings - 2 }

// Validate checks that the hyper-parameters describe a model that can be
// built: every size positive, the lists that pair up of equal length, the
// attention heads dividing the hidden size, and a vocabulary of single
// symbols whose ids fit n_token.
func (c *Config) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s (%d) must be positive (missing from the file?)", name, v))
		}
	}
	positive("dim_in", c.DimIn)
	positive("hidden_dim", c.HiddenDim)
	positive("max_conv_dim", c.MaxConvDim)
	positive("max_dur", c.MaxDur)
	positive("n_layer", c.NLayer)
	positive("n_mels", c.NMels)
	positive("n_token", c.NToken)
	positive("style_dim", c.StyleDim)
	positive("text_encoder_kernel_size", c.TextEncoderKernelSize)
	if c.Dropout < 0 || c.Dropout >= 1 {
		errs = append(errs, fmt.Errorf("dropout (%g) must be in [0, 1)", c.Dropout))
	}

	b := c.PLBert
	positive("plbert.hidden_size", b.HiddenSize)
	positive("plbert.num_attention_heads", b.NumAttentionHeads)
	positive("plbert.intermediate_size", b.IntermediateSize)
	positive("plbert.num_hidden_layers", b.NumHiddenLayers)
	if b.HiddenSize > 0 && b.NumAttentionHeads > 0 && b.HiddenSize%b.NumAttentionHeads != 0 {
		errs = append(errs, fmt.Errorf("plbert.hidden_size (%d) must be divisible by plbert.num_attention_heads (%d)", b.HiddenSize, b.NumAttentionHeads))
	}
	// Two positions hold the pads around the phonemes.
	if b.MaxPositionEmbeddings < 3 {
		errs = append(errs, fmt.Errorf("plbert.max_position_embeddings (%d) must be at least 3: two pads and one phoneme", b.MaxPositionEmbeddings))
	}
	if b.Dropout < 0 || b.Dropout >= 1 {
		errs = append(errs, fmt.Errorf("plbert.dropout (%g) must be in [0, 1)", b.Dropout))
	}

	n := c.ISTFTNet
	if len(n.UpsampleRates) == 0 {
		errs = append(errs, errors.New("istftnet.upsample_rates is empty"))
	}
	if len(n.UpsampleRates) != len(n.UpsampleKernelSizes) {
		errs = append(errs, fmt.Errorf("istftnet.upsample_rates (%d stages) and istftnet.upsample_kernel_sizes (%d) must have the same length", len(n.UpsampleRates), len(n.UpsampleKernelSizes)))
	}
	for i, r := range n.UpsampleRates {
		positive(fmt.Sprintf("istftnet.upsample_rates[%d]", i), r)
	}
	for i, k := range n.UpsampleKernelSizes {
		positive(fmt.Sprintf("istftnet.upsample_kernel_sizes[%d]", i), k)
		// A transposed convolution with kernel < stride leaves gaps.
		if i < len(n.UpsampleRates) && k < n.UpsampleRates[i] {
			errs = append(errs, fmt.Errorf("istftnet.upsample_kernel_sizes[%d] (%d) must be at least its upsample rate (%d)", i, k, n.UpsampleRates[i]))
		}
	}
	if len(n.ResblockKernelSizes) == 0 {
		errs = append(errs, errors.New("istftnet.resblock_kernel_sizes is empty"))
	}
	if len(n.ResblockKernelSizes) != len(n.ResblockDilationSizes) {
		errs = append(errs, fmt.Errorf("istftnet.resblock_kernel_sizes (%d) and istftnet.resblock_dilation_sizes (%d) must have the same length", len(n.ResblockKernelSizes), len(n.ResblockDilationSizes)))
	}
	for i, k := range n.ResblockKernelSizes {
		positive(fmt.Sprintf("istftnet.resblock_kernel_sizes[%d]", i), k)
	}
	for i, ds := range n.ResblockDilationSizes {
		if len(ds) == 0 {
			errs = append(errs, fmt.Errorf("istftnet.resblock_dilation_sizes[%d] is empty", i))
		}
		for j, d := range ds {
			positive(fmt.Sprintf("istftnet.resblock_dilation_sizes[%d][%d]", i, j), d)
		}
	}
	positive("istftnet.upsample_initial_channel", n.UpsampleInitialChannel)
	// Each upsampling stage halves the channels (upsample_initial_channel
	// // 2**(i+1) in the generator), so they must not reach zero.
	if st := len(n.UpsampleRates); n.UpsampleInitialChannel > 0 && st < 31 && n.UpsampleInitialChannel>>st == 0 {
		errs = append(errs, fmt.Errorf("istftnet.upsample_initial_channel (%d) halves to zero over %d upsampling stages", n.UpsampleInitialChannel, st))
	}
	positive("istftnet.gen_istft_n_fft", n.GenISTFTNFFT)
	positive("istftnet.gen_istft_hop_size", n.GenISTFTHopSize)
	if n.GenISTFTHopSize > n.GenISTFTNFFT && n.GenISTFTNFFT > 0 {
		errs = append(errs, fmt.Errorf("istftnet.gen_istft_hop_size (%d) must not exceed istftnet.gen_istft_n_fft (%d): frames would not overlap", n.GenISTFTHopSize, n.GenISTFTNFFT))
	}

	if len(c.Vocab) == 0 {
		errs = append(errs, errors.New("vocab is empty"))
	}
	for sym, id := range c.Vocab {
		if utf8.RuneCountInString(sym) != 1 {
			errs = append(errs, fmt.Errorf("vocab: symbol %q must be one character: phonemes are looked up one character at a time", sym))
		}
		if id <= 0 || (c.NToken > 0 && id >= c.NToken) {
			errs = append(errs, fmt.Errorf("vocab: symbol %q has id %d, outside [1, n_token=%d) (0 is the pad)", sym, id, c.NToken))
		}
	}
	return errors.Join(errs...)
}

// SampleRate is Kokoro's output rate in Hz (and audio.SampleRate, the rate
// audio.Player plays at: TestPlayerRateIsKokoros holds them equal).
const SampleRate = 24000

// FrameSamples is how many output samples one predicted duration frame
// spans: the decoder doubles the frame rate once before the generator (its
// last AdaIN block upsamples by 2), then the generator multiplies it by
// every upsample rate and the iSTFT hop. For Kokoro-82M that is
// 2·10·6·5 = 600, the factor kokoro's pipeline uses to turn pred_dur into
// 24 kHz timestamps.
func (c *Config) FrameSamples() int {
	s := 2 * c.ISTFTNet.GenISTFTHopSize
	for _, r := range c.ISTFTNet.UpsampleRates {
		s *= r
	}
	return s
}
