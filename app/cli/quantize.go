package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/units"
)

func newQuantizeCmd() *cobra.Command {
	var (
		keep   []string
		pure   bool
		dryRun bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf TYPE",
		Short: "Requantize a GGUF model, as llama.cpp's llama-quantize does",
		Long: `Convert IN.gguf to TYPE and write OUT.gguf.

TYPE is a llama.cpp file type, case-insensitive: F32, F16, BF16, Q8_0, Q6_K,
Q5_K_M, Q5_K_S, Q5_1, Q5_0, Q4_K_M, Q4_K_S, Q4_1, Q4_0, IQ4_XS, IQ4_NL,
Q3_K_L, Q3_K_M, Q3_K_S, Q2_K, TQ2_0, TQ1_0, MXFP4_MOE. The quantized ones mix
types as llama.cpp does: the output tensor in Q6_K, and for the _M mixes
attn_v and ffn_down in Q6_K in the first and last eighth of the layers and
every third layer between. A tensor type that is not a file type (Q4_K,
Q5_K, Q3_K, MXFP4) gives every converted tensor that type, as --pure does.
Types that need an importance matrix (IQ1_*, IQ2_*, IQ3_XXS, Q2_K_S) are
refused.

Only matrices whose name ends in "weight" are converted: 1-D tensors (norms,
biases), MoE routers and integer tensors keep their type. A matrix whose row
length the chosen type's block does not divide falls back as llama.cpp does
(Q4_K to Q5_0, Q6_K to Q8_0, …, F16 last) and the output says so.

Tensors of any type Hearth can decode are dequantized and requantized a chunk
of rows at a time, in parallel over the cores; tensors whose type does not
change are copied as they are. The metadata is copied in order, with
general.file_type and general.quantization_version set. The file is written
as OUT.gguf.tmp and renamed when complete, so a failed or interrupted run
leaves no partial OUT.gguf.

Progress goes to stderr: a bar on a terminal, one line per tensor otherwise.`,
		Example: `  hearth quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M
  hearth quantize model.gguf model-q8.gguf q8_0 --keep 'token_embd' --json`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			inPath, outPath := args[0], args[1]
			target, err := gguf.ParseQuantTarget(args[2])
			if err != nil {
				return err
			}
			target.Pure = target.Pure || pure
			opts := gguf.RequantizeOptions{Target: target}
			for _, k := range keep {
				re, err := regexp.Compile(k)
				if err != nil {
					return fmt.Errorf("--keep %q: %w", k, err)
				}
				opts.Keep = append(opts.Keep, re)
			}
			in, err := gguf.Open(inPath)
			if err != nil {
				return err
			}
			defer in.Close()
			plans, err := gguf.PlanRequantize(in, opts)
			if err != nil {
				return err
			}
			rep := newQuantizeReport(in, outPath, target, plans)
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if dryRun {
				rep.DryRun = true
				if !asJSON {
					for i, p := range plans {
						fmt.Fprintln(out, quantizeLine(i, len(plans), p))
					}
				}
				return printQuantizeReport(out, rep, asJSON)
			}

			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Context = ctx
			prog := newQuantizeProgress(errOut, len(plans), rep.TensorBytesIn)
			opts.Progress = prog.update
			err = gguf.RequantizeFile(in, outPath, opts)
			prog.finish()
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return fmt.Errorf("quantize: interrupted; %s was not written", outPath)
				}
				return err
			}
			if st, err := os.Stat(outPath); err == nil {
				rep.OutputSize = st.Size()
			}
			return printQuantizeReport(out, rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&keep, "keep", nil, "leave tensors whose name matches `REGEX` as they are (repeatable)")
	f.BoolVar(&pure, "pure", false, "no mix rules: every converted tensor gets TYPE's main type")
	f.BoolVar(&dryRun, "dry-run", false, "print the type each tensor would get, write nothing")
	f.BoolVar(&asJSON, "json", false, "print a JSON summary")
	return cmd
}

// commandContext is cmd's context; Background when it was run without one.
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// quantizeReport is hearth quantize's --json shape.
type quantizeReport struct {
	Input      string `json:"input"`
	Output     string `json:"output"`
	Type       string `json:"type"`
	FileType   string `json:"file_type"`
	FileTypeID uint32 `json:"file_type_id"`
	Pure       bool   `json:"pure"`
	DryRun     bool   `json:"dry_run,omitempty"`

	TensorCount int            `json:"tensor_count"`
	Converted   int            `json:"converted"`
	Copied      int            `json:"copied"`
	Fallbacks   int            `json:"fallbacks"`
	Types       map[string]int `json:"types"` // output type → number of tensors

	InputSize      int64   `json:"input_size"`            // file bytes
	OutputSize     int64   `json:"output_size,omitempty"` // file bytes; not in a dry run
	TensorBytesIn  int64   `json:"tensor_bytes_in"`
	TensorBytesOut int64   `json:"tensor_bytes_out"`
	BPWIn          float64 `json:"bits_per_weight_in"`
	BPWOut         float64 `json:"bits_per_weight_out"`

	Tensors []quantizeTensor `json:"tensors"`
}

type quantizeTensor struct {
	Name     string   `json:"name"`
	Shape    []uint64 `json:"shape"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	BytesIn  uint64   `json:"bytes_in"`
	BytesOut uint64   `json:"bytes_out"`
	Note     string   `json:"note,omitempty"`
	Fallback bool     `json:"fallback,omitempty"`
}

func newQuantizeReport(in *gguf.File, outPath string, target gguf.QuantTarget, plans []gguf.TensorPlan) quantizeReport {
	rep := quantizeReport{
		Input: in.Name(), Output: outPath, Type: target.Name,
		FileType: target.FileType.String(), FileTypeID: uint32(target.FileType), Pure: target.Pure,
		TensorCount: len(plans), Types: map[string]int{}, InputSize: in.Size(),
		Tensors: []quantizeTensor{},
	}
	for _, p := range plans {
		if p.Copied() {
			rep.Copied++
		} else {
			rep.Converted++
		}
		if p.Fallback {
			rep.Fallbacks++
		}
		rep.Types[p.To.String()]++
		rep.TensorBytesIn += int64(p.InSize)
		rep.TensorBytesOut += int64(p.OutSize)
		rep.Tensors = append(rep.Tensors, quantizeTensor{
			Name: p.Name, Shape: p.Shape, From: p.From.String(), To: p.To.String(),
			BytesIn: p.InSize, BytesOut: p.OutSize, Note: p.Note, Fallback: p.Fallback,
		})
	}
	if n := float64(in.ParameterCount()); n > 0 {
		rep.BPWIn = float64(rep.TensorBytesIn) * 8 / n
		rep.BPWOut = float64(rep.TensorBytesOut) * 8 / n
	}
	return rep
}

func printQuantizeReport(w io.Writer, rep quantizeReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	verb := "wrote " + rep.Output
	if rep.DryRun {
		verb = "would write " + rep.Output
	}
	pure := ""
	if rep.Pure {
		pure = ", pure"
	}
	fmt.Fprintf(w, "%s: %s (file type %s%s)\n", verb, rep.Type, rep.FileType, pure)
	fmt.Fprintf(w, "  tensors: %d, %d converted, %d copied as they are", rep.TensorCount, rep.Converted, rep.Copied)
	if rep.Fallbacks > 0 {
		fmt.Fprintf(w, ", %d fell back to another type", rep.Fallbacks)
	}
	fmt.Fprintln(w)
	var types []string
	for _, t := range slices.Sorted(maps.Keys(rep.Types)) {
		types = append(types, fmt.Sprintf("%s %d", t, rep.Types[t]))
	}
	fmt.Fprintf(w, "  types: %s\n", strings.Join(types, ", "))
	fmt.Fprintf(w, "  tensor data: %s -> %s (%.2f -> %.2f bits per weight)\n",
		units.Bytes(uint64(rep.TensorBytesIn)), units.Bytes(uint64(rep.TensorBytesOut)), rep.BPWIn, rep.BPWOut)
	if rep.OutputSize > 0 {
		_, err := fmt.Fprintf(w, "  file: %s -> %s\n", units.Bytes(uint64(rep.InputSize)), units.Bytes(uint64(rep.OutputSize)))
		return err
	}
	return nil
}

// quantizeLine is one tensor's line: position, name, shape, types, sizes and
// why its type is what it is.
func quantizeLine(i, n int, p gguf.TensorPlan) string {
	width := len(fmt.Sprint(n))
	conv := fmt.Sprintf("%-6s -> %-6s", p.From, p.To)
	if p.Copied() {
		conv = fmt.Sprintf("%-6s (copied)", p.From)
	}
	line := fmt.Sprintf("[%*d/%d] %-32s %-14s %s  %9s -> %9s", width, i+1, n, p.Name, inspectShape(p.Shape), conv,
		units.Bytes(p.InSize), units.Bytes(p.OutSize))
	if p.Note != "" {
		line += "  " + p.Note
	}
	return line
}

// quantizeProgress shows RequantizeFile's progress on w: a progress bar when
// w is a terminal, one line per finished tensor otherwise (a log, a pipe, a
// test). Fallbacks are printed as lines in both cases.
type quantizeProgress struct {
	w       io.Writer
	n       int
	current int                      // the tensor the bar names
	bar     *progressbar.ProgressBar // nil when w is not a terminal
}

func newQuantizeProgress(w io.Writer, n int, total int64) *quantizeProgress {
	p := &quantizeProgress{w: w, n: n, current: -1}
	p.bar = newBytesBar(w, total, true)
	return p
}

func (p *quantizeProgress) update(r gguf.RequantizeProgress) {
	if p.bar == nil {
		if r.Done {
			fmt.Fprintln(p.w, quantizeLine(r.Index, p.n, r.Tensor))
		}
		return
	}
	if r.Index != p.current {
		p.current = r.Index
		p.describe(r)
	}
	if r.Done && r.Tensor.Fallback {
		p.bar.Clear()
		fmt.Fprintln(p.w, quantizeLine(r.Index, p.n, r.Tensor))
	}
	p.bar.Set64(r.BytesDone)
}

// describe names the tensor being converted next to the bar.
func (p *quantizeProgress) describe(r gguf.RequantizeProgress) {
	name := r.Tensor.Name
	if len(name) > 28 {
		name = name[:27] + "…"
	}
	p.bar.Describe(fmt.Sprintf("[%*d/%d] %-28s", len(fmt.Sprint(p.n)), r.Index+1, p.n, name))
}

// finish takes the bar off the terminal.
func (p *quantizeProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Clear()
	}
}
