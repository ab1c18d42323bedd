package app

import (
	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
)

// RunnerOptions say where and how a model runs: the Engine's and
// LoadModel's choice of backend and runner.
type RunnerOptions struct {
	// Backend is "gpu", "cpu" or "auto" ("" too), as ChooseBackend takes.
	Backend string
	// GPU picks and opens the adapter.
	GPU gpu.Options
	// Context is the KV cache's length; 0 is the model's, at most
	// model.DefaultContext. Batch is the prompt tokens per submit (0: 512).
	Context, Batch int
	// Slots is how many sequences the runner serves at once, each with
	// its own KV cache (model.GPUOptions.Slots); 0 means 1.
	Slots int
	// GPUMemory, when nonzero, refuses a model whose estimate exceeds it
	// before anything is allocated.
	GPUMemory uint64
	// F32Activations keeps every product on f32 activations (the
	// reference arithmetic) instead of quantizing them to 8 bits where the
	// weights allow, as llama.cpp does (model.GPUOptions.F32Activations).
	F32Activations bool
	// Progress, when set, hears the upload of the weights ("load").
	Progress func(Progress)
	// OnBackend, when set, hears where the model will run once that is
	// decided, before the runner is built: a note about it then comes
	// before a long upload, and before an error the backend explains.
	OnBackend func(Backend)
}

// LoadedModel is a model and the runner evaluating it on a device of its
// own, for a caller that drives the runner itself: hearth generate, chat,
// logits and bench run one model once, and bench measures the runner with
// nothing between it and the clock.
type LoadedModel struct {
	Model  *model.Model
	Runner model.Runner
	// Backend is where Runner computes and why (ChooseBackend).
	Backend Backend
	dev     *gpu.Device
}

// Close frees the runner, the device and the model.
func (l *LoadedModel) Close() {
	if l.Runner != nil {
		l.Runner.Close()
	}
	if l.dev != nil {
		l.dev.Release()
	}
	l.Model.Close()
}

// LoadModel opens the .gguf at path and puts it where o.Backend says
// (openBackend), opening a device for it when that is the GPU.
func LoadModel(path string, o RunnerOptions) (*LoadedModel, error) {
	m, err := model.Load(path)
	if err != nil {
		return nil, err
	}
	b, dev, err := openBackend(o.Backend, JobInference, o.GPU)
	if err != nil {
		m.Close()
		return nil, err
	}
	if o.OnBackend != nil {
		o.OnBackend(b)
	}
	r, err := newRunner(m, b, dev, o)
	if err != nil {
		if dev != nil {
			dev.Release()
		}
		m.Close()
		return nil, err
	}
	return &LoadedModel{Model: m, Runner: r, Backend: b, dev: dev}, nil
}

// newRunner builds m's runner on b: the CPU's, or the GPU's on dev.
func newRunner(m *model.Model, b Backend, dev *gpu.Device, o RunnerOptions) (model.Runner, error) {
	ctx := o.Context
	if ctx == 0 {
		ctx = min(m.Config.Context, model.DefaultContext)
	}
	if !b.GPU {
		return model.NewCPUSlots(m, ctx, max(o.Slots, 1))
	}
	g := model.GPUOptions{Context: ctx, Slots: o.Slots, Batch: o.Batch, Budget: o.GPUMemory, F32Activations: o.F32Activations}
	if o.Progress != nil {
		g.Progress = func(done, total int64) { o.Progress(Progress{Stage: "load", Done: done, Total: total}) }
	}
	return model.NewGPU(dev, m, g)
}
