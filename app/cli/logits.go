package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/engine/model"
)

// logitsReport is hearth logits' JSON: the logits of every position.
type logitsReport struct {
	NVocab int         `json:"n_vocab"`
	Logits [][]float32 `json:"logits"`
}

func newLogitsCmd() *cobra.Command {
	var mf modelFlags
	var list string
	cmd := &cobra.Command{
		Use:   "logits -m MODEL --tokens 1,2,3",
		Short: "Print the logits of every position of a token sequence, as JSON",
		Long: "Print {\"n_vocab\": V, \"logits\": [[...], ...]}: one row of V logits per token,\n" +
			"row i predicting the token after position i. The output is JSON whether or not --json is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseTokenList(list)
			if err != nil {
				return err
			}
			l, err := mf.open(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			res, err := l.Runner.Forward(ids, 0, model.Output{All: true})
			if err != nil {
				return err
			}
			v := l.Model.Config.Vocab
			rep := logitsReport{NVocab: v}
			for i := range ids {
				row := res.Logits[i*v : (i+1)*v]
				for _, x := range row {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						return fmt.Errorf("position %d: the model produced a non-finite logit (%v)", i, x)
					}
				}
				rep.Logits = append(rep.Logits, row)
			}
			return writeTokenJSON(cmd.OutOrStdout(), rep)
		},
	}
	mf.register(cmd)
	cmd.Flags().StringVar(&list, "tokens", "", "token ids, comma-separated")
	cmd.Flags().Bool("json", true, "JSON output (always on; accepted for symmetry with the other commands)")
	return cmd
}

// parseTokenList reads "1,2,3" (spaces allowed).
func parseTokenList(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no tokens: give --tokens 1,2,3")
	}
	var ids []int32
	for i, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--tokens: entry %d %q is not a token id", i+1, f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}
