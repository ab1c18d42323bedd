package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/internal/units"
)

// infoReport is hearth info's --json shape.
type infoReport struct {
	Adapters []gpu.AdapterInfo `json:"adapters"`
	Chosen   *gpu.AdapterInfo  `json:"chosen"`
	Error    string            `json:"error,omitempty"`
}

func newInfoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info",
		Short: "List the GPU adapters, the one Hearth uses, its limits and features",
		Long: `List every WebGPU adapter wgpu finds, in Hearth's order of preference
(discrete, integrated, then CPU; native backends before GL), and the one it
would use. HEARTH_ADAPTER=substring picks an adapter by name and
HEARTH_BACKEND=vulkan|metal|dx12|gl restricts the backend.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := gpu.OptionsFromEnv()
			adapters, err := gpu.Adapters(opts)
			if err != nil {
				return err
			}
			rep := infoReport{Adapters: adapters}
			if chosen, err := gpu.Choose(adapters, opts); err != nil {
				rep.Error = err.Error()
			} else {
				rep.Chosen = &chosen
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
	if rep.Chosen == nil {
		return
	}
	c := rep.Chosen
	l := c.Limits
	fmt.Fprintf(w, "\nUsing %s through %s\n", c.Label(), c.Backend)
	fmt.Fprintf(w, "  vendor 0x%04x, device 0x%04x\n", c.VendorID, c.DeviceID)
	maxBuf := units.Bytes(l.MaxBufferSize)
	if l.MaxBufferSize == gpu.LimitCeiling {
		maxBuf = "no limit reported"
	}
	fmt.Fprintf(w, "  max buffer size              %s\n", maxBuf)
	fmt.Fprintf(w, "  max storage binding size     %s\n", units.Bytes(l.MaxStorageBufferBindingSize))
	fmt.Fprintf(w, "  storage buffers per stage    %d\n", l.MaxStorageBuffersPerShaderStage)
	fmt.Fprintf(w, "  workgroup storage            %s\n", units.Bytes(uint64(l.MaxComputeWorkgroupStorageSize)))
	fmt.Fprintf(w, "  invocations per workgroup    %d\n", l.MaxComputeInvocationsPerWorkgroup)
	fmt.Fprintf(w, "  workgroups per dimension     %d\n", l.MaxComputeWorkgroupsPerDimension)
	fmt.Fprintf(w, "  features                     %s\n", strings.Join(c.Features, ", "))
}
