package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
)

// modelFlags are the flags of every command that runs a model.
type modelFlags struct {
	path      string
	backend   string
	ctx       int
	batch     int
	gpuMemory string
	f32       bool // --f32-activations
	loras     []string
	slots     int // KV caches to allocate (hearth bench --parallel); 0 is 1
	// projector is the vision projector the library pairs with the model
	// open loaded (beside its file, or an Ollama manifest's layer).
	projector string
}

func (f *modelFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.path, "model", "m", "", "the model: a .gguf file, or a name hearth models lists (gemma3:1b, OWNER/REPO:FILE.gguf)")
	cmd.Flags().StringVar(&f.backend, "backend", "auto", backendFlagHelp)
	cmd.Flags().IntVar(&f.ctx, "ctx", 0, fmt.Sprintf("context length in tokens (default: the model's, at most %d)", model.DefaultContext))
	cmd.Flags().IntVar(&f.batch, "batch", 512, "prompt tokens evaluated per GPU submit")
	cmd.Flags().StringVar(&f.gpuMemory, "gpu-memory", os.Getenv("HEARTH_GPU_MEMORY"),
		"GPU memory the model may use, e.g. 8GiB (default $HEARTH_GPU_MEMORY); a model whose estimate exceeds it is refused before loading")
	cmd.Flags().BoolVar(&f.f32, "f32-activations", false, "keep f32 activations in every product (the reference arithmetic, slower) instead of 8-bit ones where the weights allow, as llama.cpp does: a decoded token's Q4_K and Q6_K products, and a prompt's Q4_K, Q6_K and Q8_0 ones where the GPU's compiler takes dot4I8Packed (hearth info)")
	cmd.Flags().StringArrayVar(&f.loras, "lora", nil, "apply the LoRA adapter `ADAPTER[:SCALE]`: a GGUF LoRA file, a PEFT folder, or an adapter's name from hearth models (repeatable)")
}

// backendFlagHelp is the --backend flag's help, for every command that has
// it.
const backendFlagHelp = "gpu, cpu, or auto: the best GPU adapter, or the CPU when there is none or it is a software renderer (lavapipe's llvmpipe), which is slower than Hearth's CPU path; hearth info says which and why"

// open loads the model and its runner (app.LoadModel); notes (the backend
// chosen, a template notice) go to log.
func (f *modelFlags) open(log io.Writer) (*app.LoadedModel, error) {
	if f.path == "" {
		return nil, fmt.Errorf("no model: give -m with a .gguf file or a name hearth models lists")
	}
	if err := app.ValidBackend(f.backend); err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	var budget uint64
	if f.gpuMemory != "" {
		var err error
		if budget, err = settings.ParseSize(f.gpuMemory); err != nil {
			return nil, fmt.Errorf("--gpu-memory: %w", err)
		}
	}
	// A path that exists wins over a name; a name is looked up in the
	// stores hearth models lists.
	e, err := library.Resolve(libraryRoots(), f.path)
	if err != nil {
		return nil, err
	}
	f.projector = e.Projector
	l, err := app.LoadModel(e.Path, app.RunnerOptions{
		Backend: f.backend, GPU: app.GPUOptionsFromEnv(), Context: f.ctx, Batch: f.batch, Slots: f.slots, GPUMemory: budget, F32Activations: f.f32,
		OnBackend: func(b app.Backend) {
			if !b.GPU && !strings.EqualFold(f.backend, "cpu") {
				fmt.Fprintf(log, "running on the CPU: %s\n", b.Reason)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if len(f.loras) > 0 {
		loras, err := loadLoRAs(l.Model, f.loras)
		if err == nil {
			err = l.Runner.SetAdapters(loras)
		}
		if err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// samplingFlags are the sampler's flags.
type samplingFlags struct{ o sample.Options }

func (s *samplingFlags) register(cmd *cobra.Command) {
	d := sample.Defaults()
	fl := cmd.Flags()
	fl.Float32Var(&s.o.Temperature, "temp", d.Temperature, "temperature; 0 is greedy")
	fl.IntVar(&s.o.TopK, "top-k", d.TopK, "keep the k most likely tokens; 0 keeps all")
	fl.Float32Var(&s.o.TopP, "top-p", d.TopP, "keep the smallest set of tokens with this much probability; 1 is off")
	fl.Float32Var(&s.o.MinP, "min-p", d.MinP, "drop tokens less likely than this fraction of the most likely; 0 is off")
	fl.Float32Var(&s.o.RepeatPenalty, "repeat-penalty", d.RepeatPenalty, "penalty for repeated tokens; 1 is off")
	fl.IntVar(&s.o.RepeatLastN, "repeat-last-n", d.RepeatLastN, "how many recent tokens the penalties look at; -1 is all")
	fl.Float32Var(&s.o.FrequencyPenalty, "frequency-penalty", d.FrequencyPenalty, "subtract this times a token's count so far")
	fl.Float32Var(&s.o.PresencePenalty, "presence-penalty", d.PresencePenalty, "subtract this from every token seen so far")
	fl.Uint64Var(&s.o.Seed, "seed", d.Seed, "random seed")
}
