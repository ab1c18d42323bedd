package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/internal/units"
)

// infoReport is hearth info's --json shape.
type infoReport struct {
	Adapters []app.AdapterInfo `json:"adapters"`
	// Chosen is the adapter the GPU backend uses (--backend gpu, and auto
	// when Auto says gpu).
	Chosen *app.AdapterInfo `json:"chosen"`
	Error  string           `json:"error,omitempty"`
	// Auto is where text and speech run under --backend auto, the
	// default, and why; AutoTraining where fine-tuning does ("none" when
	// it cannot run).
	Auto         backendReport `json:"auto"`
	AutoTraining backendReport `json:"auto_training"`
	// Language is what the chosen adapter's WGSL compiler accepts beyond
	// core WGSL, tried on a device opened for the purpose; nil when none
	// could be opened (LanguageError says why).
	Language      *app.ShaderLanguage `json:"shader_language,omitempty"`
	LanguageError string              `json:"shader_language_error,omitempty"`
	// DecodeQ8 are the weight types whose decode products run on 8-bit
	// activations on the GPU (unless --f32-activations); DecodeQ8Packed,
	// whether they take dot4I8Packed there, four products an instruction,
	// or two products to a u32 multiply (HEARTH_Q8_DOT=swar, or a compiler
	// without it).
	DecodeQ8       []string `json:"decode_8bit_activations"`
	DecodeQ8Packed bool     `json:"decode_8bit_packed_dot"`
	// PrefillQ8 says whether a prompt's Q4_K, Q6_K and Q8_0 products run
	// on 8-bit activations (dot4I8Packed only; HEARTH_Q8_PREFILL=0 keeps
	// them on f32).
	PrefillQ8 bool `json:"prefill_8bit_activations"`
	// DecodeQ8Fused is the most workgroups of a decode product that
	// quantizes its own input (HEARTH_Q8_FUSE_WORKGROUPS; 0: none does).
	DecodeQ8Fused int `json:"decode_8bit_fused_workgroups"`
}

// backendReport is an app.Backend for reports.
type backendReport struct {
	Backend string `json:"backend"` // "gpu: ADAPTER" or "cpu"
	Reason  string `json:"reason"`
}

func newInfoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info",
		Short: "List the GPU adapters, where Hearth runs models and why, the adapter's limits and features",
		Long: `List every WebGPU adapter wgpu finds, in Hearth's order of preference
(discrete, integrated, then CPU; native backends before GL), the one the GPU
backend would use, and where text, speech and training run under
--backend auto (the default) and why: text and speech on the CPU when there is
no adapter or the best one is a software renderer (lavapipe's llvmpipe), which
is slower than Hearth's CPU path; training, which runs only on a GPU, on that
adapter still. HEARTH_ADAPTER=substring picks an adapter by name (auto
then uses it, even a software one) and HEARTH_BACKEND=vulkan|metal|dx12|gl
restricts the backend.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := app.GPUOptionsFromEnv()
			adapters, err := app.Adapters(opts)
			if err != nil {
				return err
			}
			rep := infoReport{Adapters: adapters}
			rep.DecodeQ8Fused = model.Q8FusedWorkgroups()
			if chosen, err := app.ChooseAdapter(adapters, opts); err != nil {
				rep.Error = err.Error()
			} else {
				rep.Chosen = &chosen
				if lang, err := app.ProbeShaderLanguage(opts); err != nil {
					rep.LanguageError = err.Error()
				} else {
					rep.Language = &lang
					rep.DecodeQ8Packed = lang.PackedDot && model.Q8PackedDot()
					rep.PrefillQ8 = rep.DecodeQ8Packed && model.Q8PrefillAllowed()
				}
			}
			for _, t := range model.Q8DecodeTypes(rep.DecodeQ8Packed) {
				rep.DecodeQ8 = append(rep.DecodeQ8, t.String())
			}
			auto, err := app.DecideBackend("auto", app.JobInference, adapters, nil, opts)
			if err != nil {
				return err
			}
			rep.Auto = backendReport{Backend: auto.String(), Reason: auto.Reason}
			if train, err := app.DecideBackend("auto", app.JobTraining, adapters, nil, opts); err != nil {
				rep.AutoTraining = backendReport{Backend: "none", Reason: err.Error()}
			} else {
				rep.AutoTraining = backendReport{Backend: train.String(), Reason: train.Reason}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printInfo(out, rep)
			if rep.Chosen == nil {
				return fmt.Errorf("%s", rep.Error)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printInfo(w io.Writer, rep infoReport) {
	for _, a := range rep.Adapters {
		mark := " "
		if rep.Chosen != nil && rep.Chosen.Index == a.Index && rep.Chosen.Backend == a.Backend {
			mark = "*"
		}
		fmt.Fprintf(w, "%s [%d] %s (%s, %s)\n", mark, a.Index, a.Label(), a.Type, a.Backend)
	}
	where := func(r backendReport) string {
		switch r.Backend {
		case "cpu":
			return "on the CPU"
		case "none":
			return "nowhere"
		}
		return "on " + strings.TrimPrefix(r.Backend, "gpu: ")
	}
	fmt.Fprintf(w, "\nUnder --backend auto (the default):\n")
	fmt.Fprintf(w, "  text and speech run %s: %s\n", where(rep.Auto), rep.Auto.Reason)
	fmt.Fprintf(w, "  training runs %s: %s\n", where(rep.AutoTraining), rep.AutoTraining.Reason)
	if rep.Chosen == nil {
		return
	}
	c := rep.Chosen
	l := c.Limits
	fmt.Fprintf(w, "\nThe GPU backend uses %s through %s\n", c.Label(), c.Backend)
	fmt.Fprintf(w, "  vendor 0x%04x, device 0x%04x\n", c.VendorID, c.DeviceID)
	maxBuf := units.Bytes(l.MaxBufferSize)
	if l.MaxBufferSize == app.NoBufferLimit {
		maxBuf = "no limit reported"
	}
	fmt.Fprintf(w, "  max buffer size              %s\n", maxBuf)
	fmt.Fprintf(w, "  max storage binding size     %s\n", units.Bytes(l.MaxStorageBufferBindingSize))
	fmt.Fprintf(w, "  storage buffers per stage    %d\n", l.MaxStorageBuffersPerShaderStage)
	fmt.Fprintf(w, "  workgroup storage            %s\n", units.Bytes(uint64(l.MaxComputeWorkgroupStorageSize)))
	fmt.Fprintf(w, "  invocations per workgroup    %d\n", l.MaxComputeInvocationsPerWorkgroup)
	fmt.Fprintf(w, "  workgroups per dimension     %d\n", l.MaxComputeWorkgroupsPerDimension)
	fmt.Fprintf(w, "  features                     %s\n", strings.Join(c.Features, ", "))
	switch {
	case rep.Language != nil:
		fmt.Fprintf(w, "  shader language              %s\n", rep.Language)
	case rep.LanguageError != "":
		fmt.Fprintf(w, "  shader language              unknown: %s\n", rep.LanguageError)
	}
	how := "u32 multiplies, two products each"
	if rep.DecodeQ8Packed {
		how = "dot4I8Packed, four products an instruction"
	}
	fmt.Fprintf(w, "  8-bit decode activations     %s weights (%s)\n", strings.Join(rep.DecodeQ8, ", "), how)
	if rep.PrefillQ8 {
		fmt.Fprintf(w, "  8-bit prompt activations     Q4_K, Q6_K, Q8_0 weights (dot4I8Packed tiles)\n")
	}
	if rep.DecodeQ8Fused > 0 {
		fmt.Fprintf(w, "                               quantized inside products of up to %d workgroups (HEARTH_Q8_FUSE_WORKGROUPS)\n", rep.DecodeQ8Fused)
	}
}
