package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/training"
)

func newTrainCmd() *cobra.Command {
	var (
		modelName, presetName, targets string
		c                              training.RunConfig
		asJSON                         bool
	)
	var names []string
	for _, p := range training.Presets {
		names = append(names, fmt.Sprintf("%s (%s)", p.Name, p.About))
	}
	def := training.Presets[0].Settings
	cmd := &cobra.Command{
		Use:   "train -m MODEL -d DATA -o ADAPTER",
		Short: "Fine-tune a LoRA adapter on the GPU",
		Long: `Fine-tune a LoRA adapter for MODEL on DATA and write it to ADAPTER.

DATA is a JSONL file of {"messages": [...]} conversations (rendered with the
model's chat template, the loss on the assistant turns only), ShareGPT
{"conversations": [...]}, {"prompt": ..., "completion": ...} or {"text": ...}
lines, or a plain .txt file. Samples are packed into sequences of --seq-len
tokens; a share of the lines (--valid) is held out for the validation loss.

The base model's weights stay as stored (quantized) on the GPU; only the
adapter's pairs train, with AdamW, gradient clipping at norm 1 and a warmup
then cosine learning-rate schedule. A checkpoint (the adapter, the optimizer's
moments and the data position, in one file written atomically) is saved every
--save-every steps and when the run is interrupted (Ctrl-C): --resume
continues it exactly. ADAPTER ending in .gguf is a llama.cpp GGUF LoRA
(llama-cli --lora, Ollama's ADAPTER, hearth --lora); any other path a Hugging
Face PEFT folder.

Presets: ` + strings.Join(names, "; ") + `. Flags override the preset.`,
		Example: `  hearth train -m gemma3:1b -d assets/datasets/answer-format.jsonl -o answer.gguf
  hearth train -m qwen2.5.gguf -d chats.jsonl -o tuned.gguf --preset quick --lr 1e-4
  hearth train -m qwen2.5.gguf -d chats.jsonl -o tuned.gguf --resume
  hearth chat -m qwen2.5.gguf --lora tuned.gguf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelName == "" || c.Data == "" || c.Out == "" {
				return errors.New("train needs -m MODEL, -d DATA and -o ADAPTER")
			}
			flags := cmd.Flags()
			preset, ok := training.PresetByName(presetName)
			if !ok {
				return fmt.Errorf("--preset %q: want one of %s", presetName, presetList())
			}
			// The settings: the preset's, or on --resume the checkpoint's;
			// then each flag given on the command line.
			s := preset.Settings
			if c.Resume {
				st, err := training.ReadState(c.CheckpointPath())
				if err != nil {
					return err
				}
				s = st.Settings
			}
			given := c.Settings
			set := func(name string, apply func()) {
				if flags.Changed(name) {
					apply()
				}
			}
			set("rank", func() { s.LoRA.Rank = given.LoRA.Rank })
			set("alpha", func() { s.LoRA.Alpha = given.LoRA.Alpha })
			set("dropout", func() { s.LoRA.Dropout = given.LoRA.Dropout })
			set("targets", func() { s.LoRA.Targets = splitList(targets) })
			set("lr", func() { s.LR = given.LR })
			set("warmup", func() { s.Warmup = given.Warmup })
			set("epochs", func() { s.Epochs, s.Steps = given.Epochs, 0 })
			set("steps", func() { s.Steps = given.Steps })
			set("seq-len", func() { s.SeqLen = given.SeqLen })
			set("batch", func() { s.Batch = given.Batch })
			set("accum", func() { s.Accum = given.Accum })
			set("valid", func() { s.Valid = given.Valid })
			set("seed", func() { s.Seed = given.Seed })
			set("weight-decay", func() { s.AdamW.WeightDecay = given.AdamW.WeightDecay })
			set("max-grad-norm", func() { s.AdamW.MaxGradNorm = given.AdamW.MaxGradNorm })
			c.Settings = s

			// Training runs only on a GPU; a software one is used, but
			// slowly enough to say so before the run starts.
			b, err := app.ChooseBackend("auto", app.JobTraining, app.GPUOptionsFromEnv())
			if err != nil {
				return err
			}
			if b.Adapter.Type == "cpu" {
				fmt.Fprintf(cmd.ErrOrStderr(), "training on %s: %s\n", b.Adapter.Label(), b.Reason)
			}
			e := app.NewEngine(app.EngineOptions{Backend: "auto", GPU: app.GPUOptionsFromEnv(),
				Resolve: func(name string) (string, error) {
					en, err := library.Resolve(libraryRoots(), name)
					return en.Path, err
				}})
			defer e.Close()
			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			r := newTrainReporter(cmd.ErrOrStderr(), out, asJSON, filepath.Base(modelName))
			res, err := e.Train(ctx, app.TrainRequest{Model: modelName, RunConfig: c, Progress: r.progress})
			r.finish()
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(out).Encode(trainResultJSON(res))
			}
			if res.Stopped {
				fmt.Fprintf(out, "stopped at step %d of %d; the adapter so far is %s, the checkpoint %s: continue with --resume\n",
					res.Step, res.Steps, res.Adapter, res.Checkpoint)
				return nil
			}
			valid := ""
			if res.HasValid {
				valid = fmt.Sprintf(", validation loss %.4f", res.ValidLoss)
			}
			fmt.Fprintf(out, "trained %d steps: loss %.4f%s\nadapter: %s (use it with --lora %s)\ncheckpoint: %s\n",
				res.Step, res.Loss, valid, res.Adapter, res.Adapter, res.Checkpoint)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&modelName, "model", "m", "", "the base model: a .gguf file, or a name hearth models lists")
	f.StringVarP(&c.Data, "data", "d", "", "the dataset: JSONL (messages, conversations, prompt/completion, text) or .txt")
	f.StringVarP(&c.Out, "out", "o", "", "the adapter to write: FILE.gguf (llama.cpp GGUF LoRA) or a folder (PEFT)")
	f.StringVar(&presetName, "preset", training.Presets[0].Name, "the starting settings: "+presetList())
	f.IntVar(&c.LoRA.Rank, "rank", def.LoRA.Rank, "LoRA rank")
	f.Float32Var(&c.LoRA.Alpha, "alpha", def.LoRA.Alpha, "LoRA alpha (the correction is scaled by alpha/rank)")
	f.Float32Var(&c.LoRA.Dropout, "dropout", 0, "LoRA dropout on the adapter's input")
	f.StringVar(&targets, "targets", "", "the weights to adapt, comma-separated: "+strings.Join(training.Targets, ",")+" (the default: all of them), and "+strings.Join(training.ModelTargets, ",")+" (the embeddings and the LM head)")
	f.Float64Var(&c.LR, "lr", def.LR, "peak learning rate")
	f.IntVar(&c.Warmup, "warmup", def.Warmup, "warmup steps, at most a tenth of the steps; negative is 3% of them")
	f.Float64Var(&c.Epochs, "epochs", def.Epochs, "passes over the training data")
	f.IntVar(&c.Steps, "steps", 0, "optimizer steps to take instead of --epochs")
	f.IntVar(&c.SeqLen, "seq-len", def.SeqLen, "tokens per packed sequence")
	f.IntVar(&c.Batch, "batch", def.Batch, "sequences per micro-batch (one GPU submit)")
	f.IntVar(&c.Accum, "accum", def.Accum, "micro-batches accumulated per optimizer step")
	f.Float64Var(&c.Valid, "valid", 0, "share of the dataset's lines held out for validation (default 5%; negative for none)")
	f.Uint64Var(&c.Seed, "seed", def.Seed, "seed of the adapter's initialization, the split and the order")
	f.Float64Var(&c.AdamW.WeightDecay, "weight-decay", def.AdamW.WeightDecay, "AdamW weight decay")
	f.Float32Var(&c.AdamW.MaxGradNorm, "max-grad-norm", def.AdamW.MaxGradNorm, "clip the gradient's global norm to this (0: no clipping)")
	f.IntVar(&c.SaveEvery, "save-every", 50, "optimizer steps between checkpoints")
	f.IntVar(&c.ValidEvery, "valid-every", 0, "optimizer steps between validation losses (default: --save-every)")
	f.StringVar(&c.Checkpoint, "checkpoint", "", "the checkpoint file (default ADAPTER.checkpoint)")
	f.BoolVar(&c.Resume, "resume", false, "continue the run saved in the checkpoint")
	f.BoolVar(&asJSON, "json", false, "print a JSON line per report and the result as JSON")
	return cmd
}

func presetList() string {
	var names []string
	for _, p := range training.Presets {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// trainReporter prints a run's reports: a progress bar on a terminal,
// a line per validation and checkpoint otherwise, or JSON lines. model
// names the model in what the run is doing.
type trainReporter struct {
	log, out io.Writer
	json     bool
	model    string
	bar      *progressbar.ProgressBar
	lastLine time.Time
}

func newTrainReporter(log, out io.Writer, asJSON bool, model string) *trainReporter {
	return &trainReporter{log: log, out: out, json: asJSON, model: model}
}

// progressJSON is a report as --json prints it.
type progressJSON struct {
	Phase        string  `json:"phase"`
	Step         int     `json:"step"`
	Steps        int     `json:"steps"`
	Epoch        float64 `json:"epoch"`
	Loss         float64 `json:"loss,omitempty"`
	ValidLoss    float64 `json:"valid_loss,omitempty"`
	LR           float64 `json:"lr,omitempty"`
	GradNorm     float64 `json:"grad_norm,omitempty"`
	TokensPerSec float64 `json:"tokens_per_second,omitempty"`
	ETASeconds   float64 `json:"eta_seconds,omitempty"`
	// Done of Total: how far the phase under way has got (bytes of the
	// dataset or the upload, passes of a step or a validation).
	Done       int64  `json:"done,omitempty"`
	Total      int64  `json:"total,omitempty"`
	GPUMemory  uint64 `json:"gpu_memory,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
}

func (r *trainReporter) progress(p training.Progress) {
	if r.json {
		j := progressJSON{Phase: string(p.Phase), Step: p.Step, Steps: p.Steps, Epoch: p.Epoch, LR: p.LR, GradNorm: p.GradNorm,
			TokensPerSec: p.TokensPerSec, ETASeconds: p.ETA.Seconds(), Done: p.Done, Total: p.Total, GPUMemory: p.GPUMemory, Checkpoint: p.Checkpoint}
		if p.Phase == training.PhaseTrain || p.Phase == training.PhaseResumed {
			j.Loss = p.Loss
		}
		if p.Phase == training.PhaseValid {
			j.ValidLoss = p.ValidLoss
		}
		json.NewEncoder(r.out).Encode(j)
		return
	}
	if doing := p.Doing(r.model); doing != "" {
		// A long phase under way: the bar's description on a terminal
		// (the bar itself once the steps are known), else a line a second
		// at most, and each phase's first and last.
		if r.bar == nil && p.Steps > 0 && isTerminal(r.log) {
			r.newBar(p.Steps)
		}
		if r.bar != nil {
			r.bar.Describe(doing)
			r.bar.Set(p.Step)
			return
		}
		if time.Since(r.lastLine) >= time.Second || p.Done == 0 || p.Done == p.Total {
			fmt.Fprintln(r.log, doing)
			r.lastLine = time.Now()
		}
		return
	}
	switch p.Phase {
	case training.PhaseData:
		if p.Report != nil {
			lineAboveBar(r.log, r.bar, strings.TrimRight(p.Report.String(), "\n"))
		}
	case training.PhaseResumed:
		lineAboveBar(r.log, r.bar, fmt.Sprintf("resumed at step %d of %d (loss %.4f)", p.Step, p.Steps, p.Loss))
	case training.PhaseTrain:
		if r.bar == nil && isTerminal(r.log) {
			r.newBar(p.Steps)
		}
		line := trainLine(p)
		if r.bar != nil {
			r.bar.Describe(line)
			r.bar.Set(p.Step)
			return
		}
		// Plain output: a line a second at most, and the last step's.
		if time.Since(r.lastLine) >= time.Second || p.Step == p.Steps {
			fmt.Fprintf(r.log, "step %d/%d %s\n", p.Step, p.Steps, line)
			r.lastLine = time.Now()
		}
	case training.PhaseValid:
		lineAboveBar(r.log, r.bar, fmt.Sprintf("step %d: validation loss %.4f", p.Step, p.ValidLoss))
		r.describeLast(p)
	case training.PhaseCheckpoint:
		if r.bar == nil {
			fmt.Fprintf(r.log, "step %d: checkpoint %s\n", p.Step, p.Checkpoint)
		}
		r.describeLast(p)
	}
}

// describeLast puts the last step's numbers back in the bar's description
// after a validation or checkpoint said what it was doing there.
func (r *trainReporter) describeLast(p training.Progress) {
	if r.bar != nil && p.Step > 0 {
		r.bar.Describe(trainLine(p))
	}
}

func (r *trainReporter) newBar(steps int) {
	r.bar = progressbar.NewOptions(steps,
		progressbar.OptionSetWriter(r.log),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionFullWidth(),
		progressbar.OptionThrottle(100*time.Millisecond))
}

func (r *trainReporter) finish() {
	if r.bar != nil {
		r.bar.Finish()
		fmt.Fprintln(r.log)
	}
}

func trainLine(p training.Progress) string {
	s := fmt.Sprintf("loss %.4f", p.Loss)
	if p.HasValid {
		s += fmt.Sprintf(" valid %.4f", p.ValidLoss)
	}
	s += fmt.Sprintf(" lr %.2e %.0f tok/s", p.LR, p.TokensPerSec)
	if p.ETA > 0 {
		s += " ETA " + training.FormatETA(p.ETA)
	}
	if p.GPUMemory > 0 {
		s += " " + settings.FormatSize(int64(p.GPUMemory))
	}
	return s
}

type trainResult struct {
	Adapter    string  `json:"adapter"`
	Checkpoint string  `json:"checkpoint"`
	Step       int     `json:"step"`
	Steps      int     `json:"steps"`
	Loss       float64 `json:"loss"`
	ValidLoss  float64 `json:"valid_loss,omitempty"`
	Stopped    bool    `json:"stopped"`
}

func trainResultJSON(r *training.Result) trainResult {
	out := trainResult{Adapter: r.Adapter, Checkpoint: r.Checkpoint, Step: r.Step, Steps: r.Steps, Loss: r.Loss, Stopped: r.Stopped}
	if r.HasValid {
		out.ValidLoss = r.ValidLoss
	}
	return out
}
