package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/internal/units"
)

func newImportCmd() *cobra.Command {
	var (
		outType string
		pre     string
		name    string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "import HF_DIR OUT.gguf",
		Short: "Convert a Hugging Face model folder to GGUF, as llama.cpp's converter does",
		Long: `Convert the Hugging Face model in HF_DIR (config.json, model.safetensors or
its shards with model.safetensors.index.json, tokenizer.json or
tokenizer.model, tokenizer_config.json, generation_config.json) to OUT.gguf,
with the keys, tensor names and transformations llama.cpp's
convert_hf_to_gguf.py writes: Llama's q/k rows permuted for ggml's RoPE,
Gemma's norm weights +1, Llama 3's rope_freqs, Phi-3's fused tensors kept
fused, no output.weight when the embeddings are tied.

Architectures: ` + strings.Join(hfimport.Classes(), ", ") + `.

--type sets the type of the 2-D weights: auto (their own dtype, the
default), f32, f16 or bf16; norms and biases are always F32. A byte-level
BPE tokenizer's pre-tokenizer is recognized from tokenizer.json; --pre names
it (a tokenizer.ggml.pre value: llama-bpe, qwen2, gpt-2, tekken, …) when it
is not. The file is written as OUT.gguf.tmp and renamed when complete.`,
		Example: `  hearth import ~/models/Qwen2.5-0.5B-Instruct qwen2.5-0.5b-f16.gguf
  hearth import ./gemma-3-1b-it gemma3-1b-bf16.gguf --type bf16 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, outPath := args[0], args[1]
			t, err := hfimport.ParseOutType(outType)
			if err != nil {
				return err
			}
			bar := newImportProgress(cmd.ErrOrStderr())
			m, err := hfimport.Open(dir, hfimport.Options{Type: t, Pre: pre, Name: name, Progress: bar.update})
			if err != nil {
				return err
			}
			defer m.Close()
			err = m.WriteFile(outPath)
			bar.finish()
			if err != nil {
				return err
			}
			rep := newImportReport(m, dir, outPath, t)
			if st, err := os.Stat(outPath); err == nil {
				rep.OutputSize = st.Size()
			}
			return printImportReport(cmd.OutOrStdout(), rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&outType, "type", "auto", "type of the 2-D weights: auto, f32, f16 or bf16")
	f.StringVar(&pre, "pre", "", "tokenizer.ggml.pre for a byte-level BPE tokenizer that is not recognized")
	f.StringVar(&name, "name", "", "general.name (default: the folder's name)")
	f.BoolVar(&asJSON, "json", false, "print a JSON summary")
	return cmd
}

// importProgress is a bar on a terminal and nothing otherwise: the
// conversion is I/O-bound and quick, and a log line per tensor would bury
// the summary.
type importProgress struct {
	w        io.Writer
	terminal bool
	bar      *progressbar.ProgressBar
}

func newImportProgress(w io.Writer) *importProgress {
	return &importProgress{w: w, terminal: isTerminal(w)}
}

func (p *importProgress) update(done, total int, tensor string) {
	if !p.terminal {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionShowCount(),
			progressbar.OptionFullWidth(),
			// A redraw per tensor would flood a slow terminal; 10 a second
			// reads as smooth.
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	p.bar.Describe(tensor)
	p.bar.Set(done)
}

func (p *importProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

// importReport is hearth import's --json shape.
type importReport struct {
	Input        string         `json:"input"`
	Output       string         `json:"output"`
	Class        string         `json:"class"`
	Architecture string         `json:"architecture"`
	Type         string         `json:"type"`
	FileType     string         `json:"file_type"`
	FileTypeID   uint32         `json:"file_type_id"`
	TensorCount  int            `json:"tensor_count"`
	Types        map[string]int `json:"types"` // tensor type → number of tensors
	OutputSize   int64          `json:"output_size"`

	Tokenizer    string `json:"tokenizer"` // the file it came from
	TokenizerPre string `json:"tokenizer_pre,omitempty"`
	VocabSize    int    `json:"vocab_size"`
	ChatTemplate bool   `json:"chat_template"`

	Metadata map[string]any `json:"metadata"` // the architecture keys, tokenizer keys left out
	Tensors  []importTensor `json:"tensors"`
}

type importTensor struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Shape  []uint64 `json:"shape"`
	Source string   `json:"source,omitempty"`
}

func newImportReport(m *hfimport.Model, dir, out string, t hfimport.OutType) importReport {
	rep := importReport{
		Input: dir, Output: out, Class: m.Class, Architecture: m.Architecture, Type: t.String(),
		FileType: m.FileType.String(), FileTypeID: uint32(m.FileType),
		TensorCount: len(m.Tensors), Types: map[string]int{},
		Tokenizer: m.TokenizerSource, TokenizerPre: m.Vocab.Pre, VocabSize: len(m.Vocab.Tokens),
		ChatTemplate: m.ChatTemplate != "", Metadata: map[string]any{}, Tensors: []importTensor{},
	}
	for _, kv := range m.Metadata {
		rep.Metadata[kv.Key] = kv.Value.Any()
	}
	for _, ti := range m.Tensors {
		rep.Types[ti.Type.String()]++
		rep.Tensors = append(rep.Tensors, importTensor{Name: ti.Name, Type: ti.Type.String(), Shape: ti.Shape, Source: ti.Source})
	}
	return rep
}

func printImportReport(w io.Writer, rep importReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	fmt.Fprintf(w, "wrote %s: %s from %s (file type %s)\n", rep.Output, rep.Architecture, rep.Class, rep.FileType)
	fmt.Fprintf(w, "  tensors: %d (", rep.TensorCount)
	first := true
	for _, typ := range []string{"F32", "F16", "BF16"} {
		if n := rep.Types[typ]; n > 0 {
			if !first {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprintf(w, "%d %s", n, typ)
			first = false
		}
	}
	fmt.Fprintf(w, "), %s\n", units.Bytes(uint64(rep.OutputSize)))
	tok := fmt.Sprintf("  tokenizer: %d tokens from %s", rep.VocabSize, rep.Tokenizer)
	if rep.TokenizerPre != "" {
		tok += ", pre-tokenizer " + rep.TokenizerPre
	}
	if rep.ChatTemplate {
		tok += ", with a chat template"
	}
	_, err := fmt.Fprintln(w, tok)
	return err
}
