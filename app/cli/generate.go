package cli

import (
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// generateReport is hearth generate's --json shape.
type generateReport struct {
	Text         string  `json:"text"`
	Tokens       []int32 `json:"tokens"`
	PromptTokens int     `json:"prompt_tokens"`
	Stop         string  `json:"stop"`
	PrefillTPS   float64 `json:"prefill_tokens_per_second"`
	DecodeTPS    float64 `json:"decode_tokens_per_second"`
	Backend      string  `json:"backend"`
}

func newGenerateCmd() *cobra.Command {
	var mf modelFlags
	var sf samplingFlags
	var prompt, mmproj string
	var images []string
	var n, imageTokens int
	var stops []string
	var asJSON, special, shift bool
	cmd := &cobra.Command{
		Use:   "generate -m MODEL -p PROMPT [--image FILE]",
		Short: "Continue a prompt (a raw completion, no chat template), streamed",
		Long: "Continue a prompt (a raw completion, no chat template), streamed. With --image, a vision\n" +
			"model reads each image where " + chat.ImageMarker + " stands in the prompt (or before it), framed as\n" +
			"its processor frames an image, with the mmproj file beside the model or the one --mmproj names.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("prompt") {
				return fmt.Errorf("no prompt: give -p PROMPT")
			}
			l, err := mf.open(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			tok := l.Model.Tokenizer
			ids := tok.Encode(prompt, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: special})
			req := model.Request{Prompt: ids, MaxTokens: n, Sampling: sf.o, StopStrings: stops}
			if tok.EOS() != tokenizer.None {
				req.StopIDs = append(req.StopIDs, tok.EOS())
			}
			if tok.EOT() != tokenizer.None {
				req.StopIDs = append(req.StopIDs, tok.EOT())
			}
			if shift {
				req.Overflow = model.OverflowShift
			}
			session := model.NewSession(l.Runner)
			if len(images) > 0 {
				files, err := readImages(images)
				if err != nil {
					return err
				}
				v, err := openProjector(l, mmproj, mf.projector, imageTokens)
				if err != nil {
					return err
				}
				defer v.Close()
				text := prompt
				if !strings.Contains(text, chat.ImageMarker) {
					text = strings.Repeat(chat.ImageMarker, len(files)) + text
				}
				ip, err := v.Splice(l.Model, text, files)
				if err != nil {
					return err
				}
				if err := ip.Fits(l.Runner.Context()); err != nil {
					return err
				}
				req.Prompt, req.Images = ip.Tokens, ip.Images
				if err := v.Encode(cmd.Context(), ip, 0); err != nil {
					return err
				}
			}
			req.Decoder = tok.NewDecoder(tokenizer.DecodeOptions{Special: special})

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			var text strings.Builder
			var out []int32
			w := cmd.OutOrStdout()
			st, err := session.Generate(ctx, req, func(t model.Token) error {
				if t.ID >= 0 {
					out = append(out, t.ID)
				}
				text.WriteString(t.Text)
				if !asJSON {
					fmt.Fprint(w, t.Text)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if asJSON {
				return writeTokenJSON(w, generateReport{Text: text.String(), Tokens: out, PromptTokens: st.PromptTokens, Stop: st.Stop,
					PrefillTPS: st.PrefillRate(), DecodeTPS: st.DecodeRate(), Backend: l.Backend.String()})
			}
			fmt.Fprintln(w)
			fmt.Fprintf(cmd.ErrOrStderr(), "\n%s; prompt %d tokens, %.1f tokens/s; reply %d tokens, %.1f tokens/s; stop: %s\n",
				l.Backend.String(), st.PromptTokens, st.PrefillRate(), st.Generated, st.DecodeRate(), st.Stop)
			return nil
		},
	}
	mf.register(cmd)
	sf.register(cmd)
	cmd.Flags().StringVarP(&prompt, "prompt", "p", "", "the text to continue")
	cmd.Flags().IntVarP(&n, "n", "n", 128, "most tokens to generate; 0 is until a stop or the context's end")
	cmd.Flags().StringArrayVar(&stops, "stop", nil, "stop when the reply contains this text (repeatable)")
	cmd.Flags().BoolVar(&special, "special", false, "parse special tokens in the prompt and print them in the reply")
	cmd.Flags().BoolVar(&shift, "shift", false, "when the context fills, drop its oldest half instead of stopping")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reply and statistics as JSON")
	cmd.Flags().StringArrayVar(&images, "image", nil, "an image (PNG, JPEG, GIF or WebP) for a vision model to read (repeatable)")
	cmd.Flags().StringVar(&mmproj, "mmproj", "", "the vision projector (mmproj GGUF) that reads images (default: the one beside the model)")
	imageTokensFlag(cmd, &imageTokens)
	return cmd
}
