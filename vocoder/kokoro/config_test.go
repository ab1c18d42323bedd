package kokoro

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/vocoder/audio"
)

// TestPlayerRateIsKokoros: app hands Kokoro's chunks to audio.Player and
// audio.WriteWAV unconverted, so the player's fixed rate must be the
// model's.
func TestPlayerRateIsKokoros(t *testing.T) {
	if audio.SampleRate != SampleRate {
		t.Fatalf("audio.SampleRate = %d, Kokoro's SampleRate = %d", audio.SampleRate, SampleRate)
	}
}

// testConfigJSON has Kokoro-82M v1.0's hyper-parameters with a small
// vocabulary of made-up ids (the real vocab is read from the model's own
// config.json at load; none is committed here).
const testConfigJSON = `{
  "istftnet": {
    "upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6],
    "gen_istft_hop_size": 5, "gen_istft_n_fft": 20,
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "resblock_kernel_sizes": [3, 7, 11], "upsample_initial_channel": 512
  },
  "dim_in": 64, "dropout": 0.2, "hidden_dim": 512, "max_conv_dim": 512,
  "max_dur": 50, "multispeaker": true, "n_layer": 3, "n_mels": 80,
  "n_token": 178, "style_dim": 128, "text_encoder_kernel_size": 5,
  "plbert": {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 2048,
    "max_position_embeddings": 512, "num_hidden_layers": 12, "dropout": 0.1},
  "vocab": {";": 1, ":": 2, ",": 3, ".": 4, "!": 5, "?": 6, " ": 16, "a": 43, "ə": 83}
}`

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(testConfigJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxPhonemes() != 510 || c.FrameSamples() != 600 || c.ISTFTNet.GenISTFTNFFT != 20 ||
		len(c.ISTFTNet.ResblockDilationSizes) != 3 || c.PLBert.HiddenSize != 768 || c.Vocab["ə"] != 83 || !c.Multispeaker {
		t.Errorf("config read as %+v", c)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"heads", func(m map[string]any) { m["plbert"].(map[string]any)["num_attention_heads"] = 7 },
			"plbert.hidden_size (768) must be divisible by plbert.num_attention_heads (7)"},
		{"missing hidden_dim", func(m map[string]any) { delete(m, "hidden_dim") }, "hidden_dim (0) must be positive"},
		{"upsample lists", func(m map[string]any) {
			m["istftnet"].(map[string]any)["upsample_rates"] = []int{10, 6, 2}
		}, "istftnet.upsample_rates (3 stages) and istftnet.upsample_kernel_sizes (2) must have the same length"},
		{"kernel below rate", func(m map[string]any) {
			m["istftnet"].(map[string]any)["upsample_kernel_sizes"] = []int{20, 4}
		}, "istftnet.upsample_kernel_sizes[1] (4) must be at least its upsample rate (6)"},
		{"resblocks", func(m map[string]any) {
			m["istftnet"].(map[string]any)["resblock_dilation_sizes"] = [][]int{{1}}
		}, "istftnet.resblock_kernel_sizes (3) and istftnet.resblock_dilation_sizes (1) must have the same length"},
		{"hop", func(m map[string]any) { m["istftnet"].(map[string]any)["gen_istft_hop_size"] = 40 },
			"istftnet.gen_istft_hop_size (40) must not exceed istftnet.gen_istft_n_fft (20)"},
		{"channels", func(m map[string]any) { m["istftnet"].(map[string]any)["upsample_initial_channel"] = 2 },
			"istftnet.upsample_initial_channel (2) halves to zero over 2 upsampling stages"},
		{"dropout", func(m map[string]any) { m["dropout"] = 1.5 }, "dropout (1.5) must be in [0, 1)"},
		{"context", func(m map[string]any) { m["plbert"].(map[string]any)["max_position_embeddings"] = 2 },
			"plbert.max_position_embeddings (2) must be at least 3"},
		{"vocab symbol", func(m map[string]any) { m["vocab"].(map[string]any)["ab"] = 7 }, `vocab: symbol "ab" must be one character`},
		{"vocab pad", func(m map[string]any) { m["vocab"].(map[string]any)["b"] = 0 }, `vocab: symbol "b" has id 0, outside [1, n_token=178)`},
		{"vocab range", func(m map[string]any) { m["vocab"].(map[string]any)["b"] = 178 }, `symbol "b" has id 178`},
		{"no vocab", func(m map[string]any) { delete(m, "vocab") }, "vocab is empty"},
		{"wrong type", func(m map[string]any) { m["n_layer"] = "three" }, "cannot unmarshal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(testConfigJSON), &m); err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			b, _ := json.Marshal(m)
			_, err := ParseConfig(b, "cfg.json")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cfg.json") {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}
