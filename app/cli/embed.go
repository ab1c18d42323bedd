package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
)

// embedReport is hearth embed's --json shape.
type embedReport struct {
	Model      string      `json:"model"`
	Embeddings [][]float32 `json:"embeddings"`
	Tokens     int         `json:"tokens"`
	Backend    string      `json:"backend"`
}

func newEmbedCmd() *cobra.Command {
	var mf modelFlags
	var asJSON, truncate, raw bool
	cmd := &cobra.Command{
		Use:   "embed -m MODEL TEXT...",
		Short: "Embed texts: one vector each, as /v1/embeddings and /api/embed give them",
		Long: `Embed each TEXT (- reads standard input as one text): the model's final
hidden states pooled as its file says (mean for a chat model), through an
embedding model's dense layers (EmbeddingGemma's), scaled to unit length.
Prints one vector a line, its values separated by spaces, or JSON with
--json.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			texts := make([]string, len(args))
			stdin := false
			for i, a := range args {
				texts[i] = a
				if a == "-" {
					if stdin {
						return fmt.Errorf("- is given twice: standard input is one text")
					}
					stdin = true
					b, err := io.ReadAll(cmd.InOrStdin())
					if err != nil {
						return fmt.Errorf("reading standard input: %w", err)
					}
					texts[i] = string(b)
				}
			}
			l, err := mf.open(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			vecs, tokens, err := l.Embed(ctx, texts, app.EmbedOptions{Truncate: truncate, Unnormalized: raw})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				return enc.Encode(embedReport{Model: mf.path, Embeddings: vecs, Tokens: tokens, Backend: l.Backend.String()})
			}
			for _, v := range vecs {
				parts := make([]string, len(v))
				for i, x := range v {
					parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
				}
				fmt.Fprintln(w, strings.Join(parts, " "))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s; %d texts, %d tokens, %d values each\n", l.Backend.String(), len(vecs), tokens, len(vecs[0]))
			return nil
		},
	}
	mf.register(cmd)
	cmd.Flags().BoolVar(&truncate, "truncate", false, "cut a text longer than the context to its start (else it is an error)")
	cmd.Flags().BoolVar(&raw, "unnormalized", false, "print the pooled vectors as they are, not scaled to unit length")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the vectors and the token count as JSON")
	return cmd
}
