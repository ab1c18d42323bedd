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
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/internal/units"
)

// synthListQuants are the quantizations hearth synth --list sizes each
// preset at.
var synthListQuants = []string{"Q4_0", "Q4_K_M", "Q8_0", "F16"}

func newSynthCmd() *cobra.Command {
	var (
		preset, quant, out string
		seed               uint64
		strict, list       bool
		asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "synth --preset NAME -o FILE.gguf",
		Short: "Write a random-weight model with a real model's exact shapes",
		Long: `Write a GGUF model with random weights and the exact tensor shapes, metadata,
tokenizer size and chat template of a real model, for benchmarks and memory
tests without a download. Its answers are noise; its memory use and speed are
the real model's.

--quant takes the types hearth quantize does (Q4_K_M, Q8_0, F16, …) and mixes
them as llama-quantize would; a matrix whose rows the chosen type's blocks do
not divide falls back as llama-quantize does, unless --strict makes that an
error. The weights depend only on --seed: the same preset, type and seed give
the same file on any machine. The tokenizer's merges are learned from a small
built-in English text, so ordinary text tokenizes to a plausible length.

The file is written as FILE.gguf.tmp and renamed when complete. Progress goes
to stderr as a bar when it is a terminal. --list prints the presets with
their parameter counts and file sizes.`,
		Example: `  hearth synth --list
  hearth synth --preset llama-3.1-8b --quant Q4_K_M -o /tmp/llama-8b-q4.gguf
  hearth synth --preset tiny-gemma3 --quant F32 --seed 7 -o tiny.gguf --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			stdout := cmd.OutOrStdout()
			if list {
				return synthList(stdout, asJSON)
			}
			if preset == "" {
				return fmt.Errorf("synth: --preset is required (one of %s), or --list", synth.PresetNames())
			}
			if out == "" {
				return errors.New("synth: -o FILE.gguf is required")
			}
			p, ok := synth.PresetByName(preset)
			if !ok {
				return fmt.Errorf("synth: unknown preset %q (one of %s)", preset, synth.PresetNames())
			}
			opts := synth.Options{Quant: quant, Seed: seed, Strict: strict}
			layout, err := synth.Plan(p, opts)
			if err != nil {
				return err
			}

			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Context = ctx
			prog := newSynthProgress(cmd.ErrOrStderr(), int64(layout.TensorBytes))
			opts.Progress = prog.update
			start := time.Now()
			err = synth.WriteFile(out, p, opts)
			prog.finish()
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return fmt.Errorf("synth: interrupted; %s was not written", out)
				}
				return err
			}
			rep := newSynthReport(layout, out, seed, time.Since(start))
			return printSynthReport(stdout, rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&preset, "preset", "", "the model to imitate (see --list)")
	f.StringVar(&quant, "quant", "Q4_K_M", "tensor `TYPE` or llama.cpp mix: Q4_K_M, Q8_0, F16, …")
	f.StringVarP(&out, "output", "o", "", "write the model to `FILE.gguf`")
	f.Uint64Var(&seed, "seed", 0, "random seed of the weights")
	f.BoolVar(&strict, "strict", false, "refuse a type whose blocks do not divide some tensor's rows instead of falling back")
	f.BoolVar(&list, "list", false, "list the presets with their parameter counts and file sizes")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// synthReport is hearth synth's --json shape for a written model.
type synthReport struct {
	Output      string         `json:"output"`
	Preset      string         `json:"preset"`
	Model       string         `json:"model"`
	Arch        string         `json:"arch"`
	Quant       string         `json:"quant"`
	FileType    string         `json:"file_type"`
	Seed        uint64         `json:"seed"`
	Params      uint64         `json:"params"`
	TensorCount int            `json:"tensor_count"`
	Fallbacks   int            `json:"fallbacks"`
	Types       map[string]int `json:"types"` // tensor type → number of tensors
	TensorBytes uint64         `json:"tensor_bytes"`
	FileSize    int64          `json:"file_size"`
	Seconds     float64        `json:"seconds"`
}

func newSynthReport(l *synth.Layout, out string, seed uint64, took time.Duration) synthReport {
	rep := synthReport{
		Output: out, Preset: l.Preset.Name, Model: l.Preset.Model, Arch: l.Preset.Arch,
		Quant: l.Quant.Name, FileType: l.Quant.FileType.String(), Seed: seed,
		Params: l.Params, TensorCount: len(l.Tensors), Types: map[string]int{},
		TensorBytes: l.TensorBytes, FileSize: l.FileSize, Seconds: took.Seconds(),
	}
	for _, t := range l.Tensors {
		rep.Types[t.Type.String()]++
		if t.Fallback {
			rep.Fallbacks++
		}
	}
	return rep
}

func printSynthReport(w io.Writer, rep synthReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(w, "wrote %s: %s (%s), %s, seed %d\n", rep.Output, rep.Preset, rep.Model, rep.Quant, rep.Seed)
	var types []string
	for _, t := range slices.Sorted(maps.Keys(rep.Types)) {
		types = append(types, fmt.Sprintf("%s %d", t, rep.Types[t]))
	}
	fall := ""
	if rep.Fallbacks > 0 {
		fall = fmt.Sprintf(", %d fell back to another type", rep.Fallbacks)
	}
	fmt.Fprintf(w, "  %s parameters in %d tensors (%s%s)\n", units.Count(rep.Params), rep.TensorCount, strings.Join(types, ", "), fall)
	_, err := fmt.Fprintf(w, "  %s in %.1f s\n", units.Bytes(uint64(rep.FileSize)), rep.Seconds)
	return err
}

// synthListEntry is one preset in hearth synth --list --json.
type synthListEntry struct {
	Name      string           `json:"name"`
	Model     string           `json:"model"`
	Arch      string           `json:"arch"`
	Vocab     int              `json:"vocab"`
	Hidden    int              `json:"hidden"`
	Layers    int              `json:"layers"`
	Heads     int              `json:"heads"`
	KVHeads   int              `json:"kv_heads"`
	HeadDim   int              `json:"head_dim"`
	FF        int              `json:"ff"`
	Context   int              `json:"context"`
	Tied      bool             `json:"tied_embeddings"`
	Params    uint64           `json:"params"`
	FileSizes map[string]int64 `json:"file_sizes"` // quant → bytes
}

func synthList(w io.Writer, asJSON bool) error {
	var entries []synthListEntry
	for _, p := range synth.Presets() {
		e := synthListEntry{
			Name: p.Name, Model: p.Model, Arch: p.Arch, Vocab: p.Vocab, Hidden: p.Hidden, Layers: p.Layers,
			Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim, FF: p.FF, Context: p.Context,
			Tied: p.TiedEmbeddings, FileSizes: map[string]int64{},
		}
		var first *synth.Layout
		for _, q := range synthListQuants {
			var l *synth.Layout
			var err error
			if first == nil {
				l, err = synth.Plan(p, synth.Options{Quant: q})
				first = l
			} else {
				l, err = first.Requantized(q, false)
			}
			if err != nil {
				return err
			}
			e.Params = l.Params
			e.FileSizes[q] = l.FileSize
		}
		entries = append(entries, e)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "PRESET\tARCH\tPARAMS\t%s\tMODEL\n", strings.Join(synthListQuants, "\t"))
	for _, e := range entries {
		sizes := make([]string, len(synthListQuants))
		for i, q := range synthListQuants {
			sizes[i] = units.Bytes(uint64(e.FileSizes[q]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, e.Arch, units.Count(e.Params), strings.Join(sizes, "\t"), e.Model)
	}
	return tw.Flush()
}

// synthProgress draws a progress bar on w while a model is written, when w
// is a terminal; elsewhere (a log, a pipe, a test) it prints nothing, since
// the report at the end says what was written.
type synthProgress struct {
	bar     *progressbar.ProgressBar // nil when w is not a terminal
	current int
}

func newSynthProgress(w io.Writer, total int64) *synthProgress {
	p := &synthProgress{current: -1}
	p.bar = newBytesBar(w, total, false)
	return p
}

func (p *synthProgress) update(r synth.Progress) {
	if p.bar == nil {
		return
	}
	if r.Index != p.current {
		p.current = r.Index
		name := r.Tensor
		if len(name) > 28 {
			name = name[:27] + "…"
		}
		p.bar.Describe(fmt.Sprintf("[%*d/%d] %-28s", len(fmt.Sprint(r.Count)), r.Index+1, r.Count, name))
	}
	p.bar.Set64(r.BytesDone)
}

func (p *synthProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Clear()
	}
}
