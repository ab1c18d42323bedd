package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// Backend is where a job runs, the GPU adapter or Hearth's CPU path, and
// why. Text, speech, the voice encoder and training all take it from
// ChooseBackend, so each says the same thing about the same machine.
type Backend struct {
	// GPU is set when the job runs on Adapter.
	GPU     bool
	Adapter gpu.AdapterInfo
	// Reason says why, for people: "the only adapter, llvmpipe (LLVM 15),
	// is a software renderer, slower than Hearth's CPU path". Brief says
	// it in a few words, for a status bar: "faster than the software GPU".
	Reason, Brief string
}

// String is "gpu: ADAPTER" or "cpu", as reports name a backend.
func (b Backend) String() string {
	if b.GPU {
		return "gpu: " + b.Adapter.Label()
	}
	return "cpu"
}

// Job is the kind of work a backend is chosen for: text and speech (the
// voice encoder too) have a CPU path; training does not.
type Job int

// The jobs ChooseBackend decides for.
const (
	// JobInference runs a model forward: text, speech, the voice encoder.
	JobInference Job = iota
	// JobTraining is LoRA fine-tuning, which runs only on a GPU adapter:
	// its CPU step is the GPU step's float64 test reference (a 64-token
	// step of qwen2.5-0.5b took over 8 minutes on 2 cores).
	JobTraining
)

// ValidBackend checks a backend setting: gpu, cpu, auto, or "" (auto).
func ValidBackend(backend string) error {
	switch strings.ToLower(backend) {
	case "", "auto", "gpu", "cpu":
		return nil
	}
	return fmt.Errorf("backend %q: want gpu, cpu or auto", backend)
}

// ChooseBackend decides where jobs run under the backend setting (gpu,
// cpu, or auto, which "" also means) and the adapter options, from the
// list of adapters: no device is created. "gpu" fails when no adapter
// fits; "auto" then runs on the CPU and says why.
func ChooseBackend(backend string, job Job, opts gpu.Options) (Backend, error) {
	if err := ValidBackend(backend); err != nil {
		return Backend{}, err
	}
	if strings.EqualFold(backend, "cpu") {
		return DecideBackend(backend, job, nil, nil, opts)
	}
	adapters, err := gpu.Adapters(opts)
	return DecideBackend(backend, job, adapters, err, opts)
}

// DecideBackend is ChooseBackend's decision from a list of adapters in
// preference order (gpu.Adapters) or the error listing them gave.
//
// Under auto the preferred adapter is used unless it is a software
// renderer (lavapipe's llvmpipe, AdapterInfo.Type "cpu"): that runs
// Hearth's kernels about ten times slower than its own CPU path (text:
// 0.1 against 1.2 tokens/s on a 2-core machine; speech: 14 s against
// 1.5 s for "Hi."), so the CPU runs the job. An adapter asked for by name
// (opts.Adapter or HEARTH_ADAPTER) or the "gpu" setting uses the GPU even
// when it is a software one.
//
// Training has no CPU path: it fails where there is no adapter or the
// backend is cpu, and under auto takes a software adapter, saying so.
func DecideBackend(backend string, job Job, adapters []gpu.AdapterInfo, listErr error, opts gpu.Options) (Backend, error) {
	if err := ValidBackend(backend); err != nil {
		return Backend{}, err
	}
	b := strings.ToLower(backend)
	training := job == JobTraining
	if b == "cpu" {
		if training {
			return Backend{}, errors.New("training runs only on a GPU and the backend is set to cpu; choose a GPU adapter")
		}
		return Backend{Reason: "the backend is set to cpu", Brief: "set to CPU"}, nil
	}
	forced := b == "gpu"
	if listErr != nil {
		if training {
			return Backend{}, fmt.Errorf("training runs only on a GPU: %s", strings.TrimPrefix(listErr.Error(), "gpu: "))
		}
		if forced {
			return Backend{}, listErr
		}
		return Backend{Reason: "no GPU adapter could be listed: " + strings.TrimPrefix(listErr.Error(), "gpu: "), Brief: "no GPU found"}, nil
	}
	if opts.Adapter == "" {
		opts.Adapter = gpu.OptionsFromEnv().Adapter
	}
	chosen, err := gpu.Choose(adapters, opts)
	switch {
	case err != nil && training:
		return Backend{}, fmt.Errorf("training runs only on a GPU: %s", strings.TrimPrefix(err.Error(), "gpu: "))
	case err != nil && forced:
		return Backend{}, err
	case len(adapters) == 0:
		return Backend{Reason: "no GPU adapter was found", Brief: "no GPU found"}, nil
	case err != nil:
		return Backend{Reason: strings.TrimPrefix(err.Error(), "gpu: "), Brief: "no GPU matches HEARTH_ADAPTER"}, nil
	case forced:
		return Backend{GPU: true, Adapter: chosen, Reason: "the backend is set to gpu", Brief: "set to GPU"}, nil
	case opts.Adapter != "":
		return Backend{GPU: true, Adapter: chosen, Reason: fmt.Sprintf("the adapter asked for by name (%q)", opts.Adapter), Brief: "asked for by name"}, nil
	case chosen.Type == "cpu":
		which := "the best adapter"
		if len(adapters) == 1 {
			which = "the only adapter"
		}
		if training {
			return Backend{GPU: true, Adapter: chosen, Reason: fmt.Sprintf("Hearth trains only on a GPU, and %s, %s, is a software renderer: expect it to be slow", which, chosen.Label()),
				Brief: "training needs a GPU; this one is software, slow"}, nil
		}
		return Backend{Reason: fmt.Sprintf("%s, %s, is a software renderer, slower than Hearth's CPU path", which, chosen.Label()),
			Brief: "faster than the software GPU"}, nil
	case chosen.Type == "discrete" || chosen.Type == "integrated":
		return Backend{GPU: true, Adapter: chosen, Reason: fmt.Sprintf("the best adapter, a %s GPU", chosen.Type), Brief: "the best GPU"}, nil
	}
	return Backend{GPU: true, Adapter: chosen, Reason: "the best adapter", Brief: "the best GPU"}, nil
}

// openBackend is ChooseBackend with the device opened when the choice is
// the GPU; the caller releases it. Under auto a device that fails to open
// sends the job to the CPU, with that as the reason.
func openBackend(backend string, job Job, opts gpu.Options) (Backend, *gpu.Device, error) {
	b, err := ChooseBackend(backend, job, opts)
	if err != nil || !b.GPU {
		return b, nil, err
	}
	dev, err := gpu.Open(opts)
	if err != nil {
		if strings.EqualFold(backend, "gpu") || job == JobTraining {
			return Backend{}, nil, err
		}
		return Backend{Reason: fmt.Sprintf("the GPU adapter %s could not be opened: %v", b.Adapter.Label(), err), Brief: "the GPU failed to open"}, nil, nil
	}
	return b, dev, nil
}
