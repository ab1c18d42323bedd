package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/internal/units"
)

func newModelsCmd() *cobra.Command {
	var (
		asJSON  bool
		folders []string
	)
	cmd := &cobra.Command{
		Use:   "models [--json] [--folder DIR]...",
		Short: "List the GGUF models and LoRA adapters already on this machine",
		Long: `List the GGUF models other tools have downloaded, where they keep them,
without copying anything: the Ollama store ($OLLAMA_MODELS, else
~/.ollama/models), the Hugging Face cache that hearth pull and huggingface_hub
share ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), LM
Studio's models folders (~/.lmstudio/models, ~/.cache/lm-studio/models),
Hearth's own folders (~/.config/hearth/models, where the studio makes models,
and ~/.config/hearth/adapters, where training writes adapters), the folders
and files added in the studio, and each --folder, searched four folders deep.
The studio's Models tab lists the same.

NAME is what -m takes: NAME:TAG for Ollama (the tag defaults to latest),
OWNER/REPO:FILE for the Hugging Face cache, PUBLISHER/REPO/FILE.gguf for LM
Studio, the file's name without .gguf for a folder. MEMORY is the GPU memory
the model would take with a context of CONTEXT tokens, at most 8192 (the
--ctx default). Models that cannot be used (a download that did not finish,
an architecture Hearth lacks, a split GGUF) are listed with the reason.

VISION is yes for a model that sees images: a vision projector (an mmproj
GGUF file) of the model's width lies in its folder, or its Ollama manifest
has one. Projectors are not language models and are not listed themselves;
--json gives a model's as "projector".

LoRA adapters found there (GGUF adapters, PEFT folders) are listed apart,
with the architecture or base model they are for and the models listed
above that they fit; --lora takes an adapter's NAME as well as its path.`,
		Example: `  hearth models
  hearth models --folder ~/models --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			roots := libraryRoots(folders...)
			entries, adapters := library.ScanAll(roots)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(newModelsReport(roots, entries, adapters))
			}
			if err := printModels(out, roots, entries); err != nil {
				return err
			}
			return printAdapters(out, adapters)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringArrayVar(&folders, "folder", nil, "also search `DIR` and the folders in it (repeatable)")
	return cmd
}

// libraryRoots are the roots of every command's library, the studio's as
// well: the tools' stores and Hearth's own folders (library.DefaultRoots),
// the folders and files the user added in the studio, and the command's
// own --folder ones. A settings file that cannot be read adds nothing; the
// studio reports it.
func libraryRoots(folders ...string) library.Roots {
	r := library.DefaultRoots()
	if dir, err := settings.Dir(); err == nil {
		if s, err := settings.Load(filepath.Join(dir, "settings.json")); err == nil {
			r.Folders = append(r.Folders, s.Folders...)
			r.Folders = append(r.Folders, s.Files...)
		}
	}
	r.Folders = append(r.Folders, folders...)
	return r
}

// modelsReport is hearth models' --json shape: where it looked, every model
// found, usable or not ("error" says why not), and the LoRA adapters.
type modelsReport struct {
	Roots    modelsRoots     `json:"roots"`
	Models   []modelsEntry   `json:"models"`
	Adapters []adaptersEntry `json:"adapters"`
}

type modelsRoots struct {
	Ollama      string   `json:"ollama"`
	HuggingFace string   `json:"huggingface"`
	LMStudio    []string `json:"lmstudio"`
	Hearth      []string `json:"hearth"`
	Folders     []string `json:"folders"`
}

// adaptersEntry is one LoRA adapter: the fields of its file absent when it
// could not be read; "bases" the listed models it fits.
type adaptersEntry struct {
	Name      string   `json:"name"`
	Source    string   `json:"source"`
	Path      string   `json:"path"`
	Size      int64    `json:"size"`
	Format    string   `json:"format"`
	Arch      string   `json:"arch,omitempty"`
	BaseModel string   `json:"base_model,omitempty"`
	Rank      int      `json:"rank,omitempty"`
	Alpha     float32  `json:"alpha,omitempty"`
	Targets   int      `json:"targets,omitempty"`
	Bases     []string `json:"bases"`
	Error     string   `json:"error,omitempty"`
}

// modelsEntry is one model. The header fields are absent when the header
// could not be read, memory when Hearth cannot run the model.
type modelsEntry struct {
	Name      string        `json:"name"`
	Source    string        `json:"source"`
	Path      string        `json:"path"`
	Size      int64         `json:"size"`
	Parts     int           `json:"parts,omitempty"`
	Arch      string        `json:"arch,omitempty"`
	ModelName string        `json:"model_name,omitempty"`
	Params    int64         `json:"params,omitempty"`
	Quant     string        `json:"quant,omitempty"`
	Context   int           `json:"context,omitempty"`
	Layers    int           `json:"layers,omitempty"`
	Memory    *modelsMemory `json:"memory,omitempty"`
	// Projector is the vision projector the model reads images through.
	Projector string `json:"projector,omitempty"`
	Error     string `json:"error,omitempty"`
}

// modelsMemory is the GPU memory estimate, in bytes, at a context and batch.
type modelsMemory struct {
	Context     int   `json:"context"`
	Batch       int   `json:"batch"`
	Weights     int64 `json:"weights"`
	KV          int64 `json:"kv"`
	Activations int64 `json:"activations"`
	Total       int64 `json:"total"`
}

func newModelsReport(r library.Roots, entries, adapters []library.Entry) modelsReport {
	rep := modelsReport{
		Roots: modelsRoots{
			Ollama: r.Ollama, HuggingFace: r.HFCache,
			LMStudio: nonNil(r.LMStudio), Hearth: nonNil(r.Hearth), Folders: nonNil(r.Folders),
		},
		Models:   []modelsEntry{},
		Adapters: []adaptersEntry{},
	}
	for _, e := range adapters {
		a := adaptersEntry{Name: e.Name, Source: e.Source, Path: e.Path, Size: e.Size, Bases: []string{}, Error: e.Err}
		if i := e.Adapter; i != nil {
			a.Format, a.Arch, a.BaseModel, a.Rank, a.Alpha, a.Targets = i.Format, i.Arch, i.BaseModel, i.Rank, i.Alpha, i.Targets
			a.Bases = nonNil(i.Bases)
		}
		rep.Adapters = append(rep.Adapters, a)
	}
	for _, e := range entries {
		m := modelsEntry{Name: e.Name, Source: e.Source, Path: e.Path, Size: e.Size, Parts: e.Parts, Projector: e.Projector, Error: e.Err}
		if i := e.Info; i != nil {
			m.Arch, m.ModelName, m.Params, m.Quant, m.Context, m.Layers = i.Arch, i.ModelName, i.Params, i.Quant, i.Context, i.Layers
			if i.Memory.Total() > 0 {
				m.Memory = &modelsMemory{
					Context: i.MemoryContext, Batch: library.MemoryBatch,
					Weights: i.Memory.Weights, KV: i.Memory.KV, Activations: i.Memory.Activations, Total: i.Memory.Total(),
				}
			}
		}
		rep.Models = append(rep.Models, m)
	}
	return rep
}

// nonNil makes an empty list JSON's [] rather than null, so scripts can
// iterate without a check.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printModels(w io.Writer, r library.Roots, entries []library.Entry) error {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no models found; searched:")
		fmt.Fprintf(w, "  ollama       %s\n", orNone(r.Ollama))
		fmt.Fprintf(w, "  huggingface  %s\n", orNone(r.HFCache))
		for _, d := range r.LMStudio {
			fmt.Fprintf(w, "  lmstudio     %s\n", d)
		}
		for _, d := range r.Hearth {
			fmt.Fprintf(w, "  hearth       %s\n", d)
		}
		for _, d := range r.Folders {
			fmt.Fprintf(w, "  folder       %s\n", d)
		}
		_, err := fmt.Fprintln(w, "hearth pull OWNER/REPO:FILE.gguf downloads one; --folder DIR searches a folder of your own.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tARCH\tPARAMS\tQUANT\tSIZE\tCONTEXT\tVISION\tMEMORY")
	var problems []library.Entry
	for _, e := range entries {
		arch, params, quant, ctx, vision, mem := "-", "-", "-", "-", "-", "-"
		if e.Projector != "" {
			vision = "yes"
		}
		if i := e.Info; i != nil {
			arch, params, quant = orDash(i.Arch), units.Count(uint64(i.Params)), orDash(i.Quant)
			if i.Context > 0 {
				ctx = strconv.Itoa(i.Context)
			}
			if i.Memory.Total() > 0 {
				mem = units.Bytes(uint64(i.Memory.Total()))
			}
		}
		if e.Err != "" {
			problems = append(problems, e)
			mem = "(see below)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", inspectText(e.Name), e.Source, arch, params, quant, entrySize(e), ctx, vision, mem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printProblems(w, problems)
	_, err := fmt.Fprintf(w, "\nMEMORY: GPU estimate at a context of min(CONTEXT, %d) tokens. Run one with -m NAME.\n", model.DefaultContext)
	return err
}

// printAdapters lists the LoRA adapters under the models: what each is
// for, and the listed models it fits.
func printAdapters(w io.Writer, adapters []library.Entry) error {
	if len(adapters) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nAdapters (LoRA; apply one with --lora NAME):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tFORMAT\tFOR\tRANK\tSIZE\tFITS")
	var problems []library.Entry
	for _, e := range adapters {
		format, forWhat, rank, fitsModels := "-", "-", "-", "-"
		if a := e.Adapter; a != nil {
			format = a.Format
			forWhat = orDash(cmp.Or(a.BaseModel, a.Arch))
			if a.Rank > 0 {
				rank = strconv.Itoa(a.Rank)
			}
			if len(a.Bases) > 0 {
				fitsModels = strings.Join(a.Bases, ", ")
			}
		}
		if e.Err != "" {
			problems = append(problems, e)
			fitsModels = "(see below)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", inspectText(e.Name), e.Source, format, inspectText(forWhat), rank, entrySize(e), inspectText(fitsModels))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printProblems(w, problems)
	return nil
}

// entrySize is a listed file's size, "-" when unknown.
func entrySize(e library.Entry) string {
	if e.Size > 0 {
		return units.Bytes(uint64(e.Size))
	}
	return "-"
}

// printProblems says why each of the entries cannot be used, under a
// table that marked them "(see below)".
func printProblems(w io.Writer, problems []library.Entry) {
	if len(problems) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d cannot be used:\n", len(problems))
	for _, e := range problems {
		fmt.Fprintf(w, "  %s: %s\n", inspectText(e.Name), e.Err)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(none: no home folder)"
	}
	return s
}
