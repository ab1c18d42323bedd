package cli

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/internal/atomicfile"
	"github.com/hearthstudio/hearth/vocoder/audio"
	"github.com/hearthstudio/hearth/vocoder/kokoro"
)

// voiceReport is `hearth voice --json`'s output.
type voiceReport struct {
	Output    string       `json:"output"`
	Reference string       `json:"reference"`
	Rate      int          `json:"rate"`
	Seconds   float64      `json:"seconds"`   // of the recording as read
	Frames    int          `json:"frames"`    // mel frames after trimming silence
	Backend   string       `json:"backend"`   // "gpu: ADAPTER" or "cpu"
	RefShare  float64      `json:"ref_share"` // the recording's share of the blend
	Blend     []voiceShare `json:"blend"`     // the stock voices mixed in, by share
	Style     []float32    `json:"style"`     // the recording's 256-value style
}

// voiceShare is one stock voice of a blend and its share of the result.
type voiceShare struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"`
}

func newVoiceCmd() *cobra.Command {
	var (
		from, encoder, out, blend, voices, backend string
		asJSON                                     bool
	)
	cmd := &cobra.Command{
		Use:   "voice --from REF.wav --encoder STYLETTS2.pth -o VOICE.bin",
		Short: "Make a voice pack from a reference recording (StyleTTS2's style encoder)",
		Long: `Make a Kokoro voice pack from a recording of someone speaking.

The recording (a WAV file: PCM of 8 to 32 bits or float, any rate, any number
of channels, which are averaged) is resampled to 24 kHz, trimmed of leading
and trailing silence as StyleTTS2's compute_style does (librosa's trim at
30 dB), turned into StyleTTS2's log-mel, and run through the two style
encoders of a StyleTTS2 checkpoint (--encoder: for example StyleTTS2-LibriTTS's
epochs_2nd_00020.pth, or its tensors as safetensors): style_encoder gives the
128 values of timbre, predictor_encoder the 128 of prosody. It needs at least
0.8 s of sound; only the first 30 s are used.

The pack holds that 256-value style on each of its 510 rows (a stock pack's
rows differ by utterance length; one recording has one style). It is written
as 510×256 little-endian float32, the .bin layout, for 'hearth speak --voice
PATH.bin' or the voices folder.

--blend mixes stock voices in, each with its share of the result:
"af_heart:0.5" is half the recording's style and half af_heart's, row by row;
"af_heart:0.3,am_adam:0.2" leaves the recording 0.5. The shares must sum to
less than 1. Names are looked up in --voices (default: the voices folder of
Hearth's Kokoro directory); a path to a .bin or .pt pack works too.

Kokoro-82M ships no style encoder, and StyleTTS2's were trained with
StyleTTS2's decoder, not Kokoro's: a voice made this way is a starting point,
and blending it with a stock voice keeps it in the region Kokoro knows.

The encoders run on the GPU when a hardware one is found (--backend auto),
else on the CPU, as speak does: a software adapter (lavapipe) is slower
(StyleTTS2-LibriTTS's encoders take about 3 s per second of audio on two
cores).`,
		Example: `  hearth voice --from me.wav --encoder epochs_2nd_00020.pth -o me.bin
  hearth voice --from me.wav --encoder styletts2.safetensors -o me-heart.bin --blend af_heart:0.5 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" || encoder == "" || out == "" {
				return fmt.Errorf("voice: --from, --encoder and -o are all required")
			}
			terms, refShare, err := parseVoiceBlend(blend)
			if err != nil {
				return err
			}
			// Check everything that can be checked before the encoders run.
			stock := make([]*kokoro.Voice, len(terms))
			if len(terms) > 0 {
				dir := voices
				if dir == "" {
					if dir, err = app.DefaultKokoroDir(); err != nil {
						return err
					}
				}
				if info, err := os.Stat(filepath.Join(dir, "voices")); err == nil && info.IsDir() {
					dir = filepath.Join(dir, "voices")
				}
				for i, t := range terms {
					if stock[i], err = kokoro.OpenVoice(dir, t.Name); err != nil {
						return fmt.Errorf("voice: --blend: %w", err)
					}
				}
			}
			f, err := os.Open(from)
			if err != nil {
				return fmt.Errorf("voice: %w", err)
			}
			samples, rate, err := audio.ReadRecording(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("voice: %s: %w", from, err)
			}
			mel, frames, err := kokoro.PrepareReference(samples, rate)
			if err != nil {
				return fmt.Errorf("voice: %s: %w", from, err)
			}
			enc, err := kokoro.LoadStyleEncoder(encoder)
			if err != nil {
				return err
			}
			style, backendUsed, err := runStyleEncoder(cmd, enc, mel, frames, backend)
			if err != nil {
				return err
			}
			v, err := kokoro.VoiceFromStyle(strings.TrimSuffix(filepath.Base(out), filepath.Ext(out)), style)
			if err != nil {
				return err
			}
			if len(terms) > 0 {
				weights := []float64{refShare}
				for _, t := range terms {
					weights = append(weights, t.Weight)
				}
				name := v.Name
				if v, err = kokoro.BlendVoices(append([]*kokoro.Voice{v}, stock...), weights); err != nil {
					return err
				}
				v.Name = name
			}
			buf := make([]byte, 0, len(v.Pack)*4)
			for _, x := range v.Pack {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
			}
			if err := atomicfile.Write(out, buf, 0o644); err != nil {
				return fmt.Errorf("voice: %w", err)
			}
			shares := []voiceShare{}
			for _, t := range terms {
				shares = append(shares, voiceShare{t.Name, t.Weight})
			}
			rep := voiceReport{Output: out, Reference: from, Rate: rate, Seconds: float64(len(samples)) / float64(rate),
				Frames: frames, Backend: backendUsed, RefShare: refShare, Blend: shares, Style: style}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %.2f s at %d Hz, %d mel frames after trimming, encoded on %s\n",
				from, rep.Seconds, rate, frames, backendUsed)
			if len(terms) > 0 {
				parts := []string{fmt.Sprintf("recording %.2f", refShare)}
				for _, t := range terms {
					parts = append(parts, fmt.Sprintf("%s %.2f", t.Name, t.Weight))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "blend: %s\n", strings.Join(parts, ", "))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d×%d voice pack)\n", out, kokoro.VoiceRows, kokoro.VoiceDim)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "the reference recording (WAV)")
	fl.StringVar(&encoder, "encoder", "", "a StyleTTS2 checkpoint (.pth or .safetensors) with style_encoder and predictor_encoder")
	fl.StringVarP(&out, "output", "o", "", "the voice pack to write (.bin)")
	fl.StringVar(&blend, "blend", "", `stock voices to mix in with their shares, "af_heart:0.5" or "af_heart:0.3,am_adam:0.2"`)
	fl.StringVar(&voices, "voices", "", "the folder of stock voices for --blend (default: the Kokoro directory's)")
	fl.StringVar(&backend, "backend", "auto", backendFlagHelp)
	fl.BoolVar(&asJSON, "json", false, "print a JSON report, with the style")
	return cmd
}

// parseVoiceBlend reads --blend: stock voices, each with an explicit
// share, the shares summing below 1; the recording gets the rest.
func parseVoiceBlend(spec string) ([]kokoro.VoiceWeight, float64, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, 1, nil
	}
	terms, err := kokoro.ParseVoiceSpec(spec)
	if err != nil {
		return nil, 0, fmt.Errorf("voice: --blend: %w", err)
	}
	sum := 0.0
	for i, t := range strings.Split(spec, ",") {
		if !strings.Contains(t, ":") {
			return nil, 0, fmt.Errorf("voice: --blend %q: give %q a share, such as %s:0.5", spec, terms[i].Name, terms[i].Name)
		}
		sum += terms[i].Weight
	}
	if sum >= 1 {
		return nil, 0, fmt.Errorf("voice: --blend %q: the shares sum to %g; they must leave the recording some (sum below 1)", spec, sum)
	}
	return terms, 1 - sum, nil
}

// runStyleEncoder runs the encoders where app.EncodeStyle says, as speak
// does, saying on stderr why when that is the CPU under auto.
func runStyleEncoder(cmd *cobra.Command, enc *kokoro.StyleEncoder, mel []float32, frames int, backend string) ([]float32, string, error) {
	if err := app.ValidBackend(backend); err != nil {
		return nil, "", fmt.Errorf("--%w", err)
	}
	s, b, err := app.EncodeStyle(backend, app.GPUOptionsFromEnv(), enc, mel, frames, func(b app.Backend) {
		if !b.GPU && !strings.EqualFold(backend, "cpu") {
			fmt.Fprintf(cmd.ErrOrStderr(), "running on the CPU: %s\n", b.Reason)
		}
	})
	if err != nil {
		return nil, "", err
	}
	return s, b.String(), nil
}
