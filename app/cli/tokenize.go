package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// loadTokenizer builds the tokenizer of the model name: a .gguf file, or a
// name hearth models lists.
func loadTokenizer(name string) (*tokenizer.Tokenizer, error) {
	if name == "" {
		return nil, fmt.Errorf("no model: give -m with a .gguf file or a name hearth models lists")
	}
	// A file is read as it is, even one that holds only a vocabulary
	// (llama.cpp's ggml-vocab-*.gguf), which the library would not list.
	path := name
	if _, err := os.Stat(name); err != nil {
		e, err := library.Resolve(libraryRoots(), name)
		if err != nil {
			return nil, err
		}
		path = e.Path
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	// The tokenizer copies what it needs out of the metadata.
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

// tokenizeReport is hearth tokenize's --json shape.
type tokenizeReport struct {
	IDs    []int32      `json:"ids"`
	Tokens []tokenEntry `json:"tokens"`
}

// tokenEntry is one token: its id, its text as the vocabulary stores it
// ("▁the", "Ġthe", "<0x0A>") and its type.
type tokenEntry struct {
	ID    int32  `json:"id"`
	Piece string `json:"piece"`
	Type  string `json:"type"`
}

func newTokenizeCmd() *cobra.Command {
	var (
		model               string
		asJSON              bool
		special, addSpecial bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize -m MODEL TEXT",
		Short: "Print the token ids of a text",
		Long: `Print the token ids of TEXT (the arguments joined by spaces, or standard
input if TEXT is "-") with the model's own tokenizer, one "ID<TAB>PIECE" line
each, where PIECE is the token as the vocabulary stores it, quoted.

Special tokens written in the text ("<|eot_id|>", "<start_of_turn>") are plain
text unless --special is given; --add-special adds BOS/EOS where the model asks
for them.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := loadTokenizer(model)
			if err != nil {
				return err
			}
			text := strings.Join(args, " ")
			if text == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				text = string(b)
			}
			ids := tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: special})
			out := cmd.OutOrStdout()
			if asJSON {
				rep := tokenizeReport{IDs: ids, Tokens: make([]tokenEntry, len(ids))}
				for i, id := range ids {
					rep.Tokens[i] = tokenEntry{ID: id, Piece: tok.Token(id), Type: tok.Type(id).String()}
				}
				return writeTokenJSON(out, rep)
			}
			for _, id := range ids {
				if _, err := fmt.Fprintf(out, "%d\t%s\n", id, strconv.Quote(tok.Token(id))); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&model, "model", "m", "", "the model: a .gguf file, or a name hearth models lists")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&special, "special", false, "read special tokens written in the text as tokens")
	cmd.Flags().BoolVar(&addSpecial, "add-special", false, "add BOS/EOS as the model's tokenizer asks")
	return cmd
}

func newDetokenizeCmd() *cobra.Command {
	var (
		model   string
		asJSON  bool
		special bool
	)
	cmd := &cobra.Command{
		Use:   "detokenize -m MODEL ID...",
		Short: "Print the text of token ids",
		Long: `Print the text of the token IDs (separate arguments, or comma-separated)
with the model's own tokenizer. Control tokens (BOS, "<|eot_id|>") print as
nothing unless --special is given. Bytes that do not form UTF-8 print as U+FFFD.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []int32
			for _, a := range args {
				for _, f := range strings.Split(a, ",") {
					if f = strings.TrimSpace(f); f == "" {
						continue
					}
					id, err := strconv.ParseInt(f, 10, 32)
					if err != nil {
						return fmt.Errorf("token id %q: not an integer", f)
					}
					ids = append(ids, int32(id))
				}
			}
			tok, err := loadTokenizer(model)
			if err != nil {
				return err
			}
			text, err := tok.Decode(ids, tokenizer.DecodeOptions{Special: special})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeTokenJSON(out, struct {
					Text string `json:"text"`
				}{text})
			}
			_, err = fmt.Fprintln(out, text)
			return err
		},
	}
	cmd.Flags().StringVarP(&model, "model", "m", "", "the model: a .gguf file, or a name hearth models lists")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&special, "special", false, "print control tokens as their text")
	return cmd
}

// writeTokenJSON writes v indented, with tokens such as "<s>" left readable.
func writeTokenJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
