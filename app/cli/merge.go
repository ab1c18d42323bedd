package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/model"
)

func newMergeCmd() *cobra.Command {
	var (
		base, out, typ string
		loras          []string
		asJSON         bool
	)
	cmd := &cobra.Command{
		Use:   "merge -m MODEL --lora ADAPTER[:SCALE]... -o OUT.gguf",
		Short: "Merge LoRA adapters into a new GGUF model",
		Long: `Merge LoRA adapters into MODEL and write OUT.gguf.

ADAPTER is a llama.cpp GGUF LoRA file (what convert_lora_to_gguf.py and
hearth train write, what llama-cli --lora loads), a Hugging Face PEFT folder,
or the name of an adapter hearth models lists
(adapter_config.json and adapter_model.safetensors). SCALE is the adapter's
strength, 1 by default, as llama.cpp's --lora-scaled takes it; --lora is
repeatable and the adapters add up. Each targeted weight becomes
W + SCALE·alpha/rank·B·A: dequantized, the product added in float64, and
quantized again to its own type (--type SAME, the default). Another --type
(F16, Q8_0, Q4_K_M, … as hearth quantize takes them) converts the whole merged
model to it, the merged weights rounded only once. Every other tensor and all
metadata are copied; the file appears whole or not at all.`,
		Example: `  hearth merge -m gemma3:1b --lora tuned.gguf -o gemma3-tuned.gguf
  hearth merge -m base.gguf --lora style.gguf:0.5 --lora ./peft-adapter -o out.gguf --type Q8_0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if base == "" || out == "" || len(loras) == 0 {
				return fmt.Errorf("merge needs -m MODEL, at least one --lora ADAPTER and -o OUT.gguf")
			}
			e, err := library.Resolve(libraryRoots(), base)
			if err != nil {
				return err
			}
			m, err := model.Load(e.Path)
			if err != nil {
				return err
			}
			ws, reps, err := readAdapters(m, loras)
			m.Close()
			if err != nil {
				return err
			}
			if err := adapter.Merge(e.Path, ws, out, typ); err != nil {
				return err
			}
			rep := mergeReport{Model: e.Path, Output: out, Type: strings.ToUpper(typ), Adapters: reps}
			targets := map[string]bool{}
			for _, w := range ws {
				for n := range w.Adapter.Pairs {
					targets[n] = true
				}
			}
			rep.MergedTensors = len(targets)
			if st, err := os.Stat(out); err == nil {
				rep.OutputSize = st.Size()
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(w, "wrote %s: %d adapter(s) merged into %d tensors of %s (type %s)\n", out, len(reps), rep.MergedTensors, e.Path, rep.Type)
			for _, a := range reps {
				fmt.Fprintf(w, "  %s: scale %g, rank %d, alpha %g, %d tensors\n", a.Path, a.Scale, a.Rank, a.Alpha, a.Tensors)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&base, "model", "m", "", "the base model: a .gguf file, or a name hearth models lists")
	f.StringArrayVar(&loras, "lora", nil, "a LoRA adapter `ADAPTER[:SCALE]`: a GGUF LoRA file, a PEFT folder, or an adapter's name from hearth models (repeatable)")
	f.StringVarP(&out, "output", "o", "", "the merged model to write")
	f.StringVar(&typ, "type", adapter.SameType, "SAME keeps each tensor's type; F16, Q8_0, Q4_K_M, … convert the merged model")
	f.BoolVar(&asJSON, "json", false, "print a JSON summary")
	return cmd
}

// mergeReport is hearth merge's --json shape.
type mergeReport struct {
	Model         string          `json:"model"`
	Output        string          `json:"output"`
	Type          string          `json:"type"`
	Adapters      []adapterReport `json:"adapters"`
	MergedTensors int             `json:"merged_tensors"`
	OutputSize    int64           `json:"output_size"`
}

type adapterReport struct {
	Path    string  `json:"path"`
	Scale   float32 `json:"scale"`
	Rank    int     `json:"rank"` // 0 when the pairs' ranks differ
	Alpha   float32 `json:"alpha"`
	Tensors int     `json:"tensors"`
}

// parseLoRASpec splits FILE[:SCALE]. The scale is what follows the last
// colon when that parses as a number, so a path with colons (C:\…) works.
func parseLoRASpec(s string) (string, float32, error) {
	path, scale := s, float32(1)
	if i := strings.LastIndexByte(s, ':'); i > 0 {
		if v, err := strconv.ParseFloat(s[i+1:], 32); err == nil {
			path, scale = s[:i], float32(v)
		} else if _, statErr := os.Stat(s); statErr != nil {
			return "", 0, fmt.Errorf("--lora %q: scale %q is not a number", s, s[i+1:])
		}
	}
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return "", 0, fmt.Errorf("--lora %q: scale %v is not a finite number", s, scale)
	}
	return path, scale, nil
}

// resolveLoRA is the adapter a --lora spec names, NAME_OR_FILE[:SCALE]:
// an existing file or folder, else an adapter lib lists by that name.
func resolveLoRA(lib *library.Library, spec string) (string, float32, error) {
	path, scale, err := parseLoRASpec(spec)
	if err != nil {
		return "", 0, err
	}
	e, err := lib.ResolveAdapter(path)
	if err != nil {
		return "", 0, fmt.Errorf("--lora: %w", err)
	}
	return e.Path, scale, nil
}

// readAdapters reads and checks the --lora adapters against m.
func readAdapters(m *model.Model, specs []string) ([]adapter.Weighted, []adapterReport, error) {
	var ws []adapter.Weighted
	var reps []adapterReport
	lib := library.New(libraryRoots())
	for _, s := range specs {
		path, scale, err := resolveLoRA(lib, s)
		if err != nil {
			return nil, nil, err
		}
		a, err := adapter.Load(path, m)
		if err != nil {
			return nil, nil, err
		}
		r, _ := a.Rank()
		ws = append(ws, adapter.Weighted{Adapter: a, Scale: scale})
		reps = append(reps, adapterReport{Path: path, Scale: scale, Rank: r, Alpha: a.Alpha, Tensors: len(a.Pairs)})
	}
	return ws, reps, nil
}

// loadLoRAs reads the --lora adapters of a command that runs m.
func loadLoRAs(m *model.Model, specs []string) ([]model.LoRA, error) {
	ws, _, err := readAdapters(m, specs)
	if err != nil {
		return nil, err
	}
	var out []model.LoRA
	for _, w := range ws {
		l, err := w.Adapter.LoRA(w.Scale)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}
