package app

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/synth"
)

func TestDecideBackend(t *testing.T) {
	t.Setenv("HEARTH_ADAPTER", "")
	discrete := gpu.AdapterInfo{Index: 0, Name: "NVIDIA H200", Type: "discrete", Backend: "vulkan"}
	integrated := gpu.AdapterInfo{Index: 2, Name: "Intel(R) UHD Graphics 770", Type: "integrated", Backend: "vulkan"}
	llvmpipe := gpu.AdapterInfo{Index: 1, Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Driver: "llvmpipe", Type: "cpu", Backend: "vulkan"}
	for _, c := range []struct {
		name     string
		backend  string
		job      Job
		adapters []gpu.AdapterInfo // in preference order, as gpu.Adapters lists them
		listErr  error
		adapter  string // HEARTH_ADAPTER
		wantGPU  string // the adapter's name, "" for the CPU
		reason   []string
		err      string
	}{
		{name: "a discrete GPU before the software one", backend: "auto", adapters: []gpu.AdapterInfo{discrete, llvmpipe},
			wantGPU: discrete.Name, reason: []string{"discrete GPU"}},
		{name: "an integrated GPU", backend: "", adapters: []gpu.AdapterInfo{integrated, llvmpipe},
			wantGPU: integrated.Name, reason: []string{"integrated GPU"}},
		{name: "only the software adapter", backend: "auto", adapters: []gpu.AdapterInfo{llvmpipe},
			reason: []string{"the only adapter", llvmpipe.Name, "software renderer", "slower than Hearth's CPU path"}},
		{name: "two software adapters", backend: "AUTO", adapters: []gpu.AdapterInfo{llvmpipe, llvmpipe},
			reason: []string{"the best adapter", "software renderer"}},
		{name: "no adapter", backend: "auto", reason: []string{"no GPU adapter was found"}},
		{name: "the listing failed", backend: "auto", listErr: errors.New("gpu: could not create a WebGPU instance"),
			reason: []string{"no GPU adapter could be listed: could not create a WebGPU instance"}},
		{name: "gpu forces the software adapter", backend: "gpu", adapters: []gpu.AdapterInfo{llvmpipe},
			wantGPU: llvmpipe.Name, reason: []string{"set to gpu"}},
		{name: "gpu with no adapter", backend: "gpu", err: "no WebGPU adapter found"},
		{name: "gpu when the listing failed", backend: "gpu", listErr: errors.New("gpu: could not create a WebGPU instance"),
			err: "could not create a WebGPU instance"},
		{name: "HEARTH_ADAPTER names the software adapter", backend: "auto", adapters: []gpu.AdapterInfo{discrete, llvmpipe},
			adapter: "llvmpipe", wantGPU: llvmpipe.Name, reason: []string{`asked for by name ("llvmpipe")`}},
		{name: "HEARTH_ADAPTER names nothing", backend: "auto", adapters: []gpu.AdapterInfo{llvmpipe},
			adapter: "radeon", reason: []string{`HEARTH_ADAPTER "radeon" matches no adapter`}},
		{name: "HEARTH_ADAPTER names nothing, gpu", backend: "gpu", adapters: []gpu.AdapterInfo{llvmpipe},
			adapter: "radeon", err: `HEARTH_ADAPTER "radeon"`},
		{name: "cpu", backend: "cpu", adapters: []gpu.AdapterInfo{discrete}, reason: []string{"set to cpu"}},
		{name: "a bad setting", backend: "tpu", adapters: []gpu.AdapterInfo{discrete}, err: `backend "tpu": want gpu, cpu or auto`},

		// Training has no CPU path.
		{name: "training on a discrete GPU", backend: "auto", job: JobTraining, adapters: []gpu.AdapterInfo{discrete, llvmpipe},
			wantGPU: discrete.Name, reason: []string{"discrete GPU"}},
		{name: "training on the only, software, adapter", backend: "auto", job: JobTraining, adapters: []gpu.AdapterInfo{llvmpipe},
			wantGPU: llvmpipe.Name, reason: []string{"trains only on a GPU", llvmpipe.Name, "software renderer", "slow"}},
		{name: "training with no adapter", backend: "auto", job: JobTraining, err: "training runs only on a GPU: no WebGPU adapter found"},
		{name: "training when the listing failed", backend: "auto", job: JobTraining, listErr: errors.New("gpu: could not create a WebGPU instance"),
			err: "training runs only on a GPU: could not create a WebGPU instance"},
		{name: "training set to cpu", backend: "cpu", job: JobTraining, adapters: []gpu.AdapterInfo{discrete}, err: "training runs only on a GPU and the backend is set to cpu"},
		{name: "training, HEARTH_ADAPTER names nothing", backend: "auto", job: JobTraining, adapters: []gpu.AdapterInfo{llvmpipe},
			adapter: "radeon", err: `HEARTH_ADAPTER "radeon" matches no adapter`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("HEARTH_ADAPTER", c.adapter)
			b, err := DecideBackend(c.backend, c.job, c.adapters, c.listErr, gpu.Options{})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %+v, %v; want an error saying %q", b, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := map[bool]string{true: b.Adapter.Name}[b.GPU]; got != c.wantGPU || (!b.GPU && b.String() != "cpu") {
				t.Errorf("chose %s (%s), want %q (\"\" is the CPU)", b, b.Reason, c.wantGPU)
			}
			if b.Brief == "" || len(b.Brief) > 50 {
				t.Errorf("brief reason %q: want a few words for the status bar", b.Brief)
			}
			for _, r := range c.reason {
				if !strings.Contains(b.Reason, r) {
					t.Errorf("reason %q does not say %q", b.Reason, r)
				}
			}
		})
	}
	// An adapter asked for in the options (the studio's choice) is used
	// like HEARTH_ADAPTER.
	t.Setenv("HEARTH_ADAPTER", "")
	b, err := DecideBackend("auto", JobInference, []gpu.AdapterInfo{llvmpipe}, nil, gpu.Options{Adapter: "LLVMPIPE"})
	if err != nil || !b.GPU || b.Adapter.Name != llvmpipe.Name {
		t.Errorf("Options.Adapter naming the software adapter: %+v, %v", b, err)
	}
}

// preferredAdapter is the adapter auto considers on this machine (none:
// the zero AdapterInfo), listed apart from ChooseBackend, for tests that
// check what it decided.
func preferredAdapter(t *testing.T) gpu.AdapterInfo {
	t.Helper()
	adapters, err := gpu.Adapters(gpu.Options{})
	if err != nil || len(adapters) == 0 {
		return gpu.AdapterInfo{}
	}
	return adapters[0]
}

// TestAutoRunsTextOnTheCPUOverASoftwareAdapter: under auto the engine puts
// a model on the CPU when the machine's best adapter is a software
// renderer (lavapipe, as on CI), and its status says why; on a hardware
// adapter it uses the GPU.
func TestAutoRunsTextOnTheCPUOverASoftwareAdapter(t *testing.T) {
	t.Setenv("HEARTH_ADAPTER", "")
	best := preferredAdapter(t)
	p, _ := synth.PresetByName("tiny-llama")
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteFile(path, p, synth.Options{Quant: "Q8_0", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	e := NewEngine(EngineOptions{})
	defer e.Close()
	info, err := e.Load(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch best.Type {
	case "cpu":
		if info.Backend != "cpu" || !strings.Contains(info.BackendReason, "software renderer") || !strings.Contains(info.BackendReason, best.Name) {
			t.Errorf("auto over the software adapter %s: on %q because %q; want the CPU, saying why", best.Name, info.Backend, info.BackendReason)
		}
	case "":
		if info.Backend != "cpu" || !strings.Contains(info.BackendReason, "no GPU adapter") {
			t.Errorf("auto with no adapter: on %q because %q", info.Backend, info.BackendReason)
		}
	default:
		if info.Backend != "gpu: "+best.Label() || info.BackendReason == "" {
			t.Errorf("auto over the %s adapter %s: on %q because %q", best.Type, best.Name, info.Backend, info.BackendReason)
		}
	}
}

// TestTrainingLeavesNoDeviceBehind: a training job opens the device for
// its run; under auto over a software adapter, where text runs on the CPU,
// the device is released after it, and loading a model afterwards neither
// keeps nor opens one.
func TestTrainingLeavesNoDeviceBehind(t *testing.T) {
	t.Setenv("HEARTH_ADAPTER", "")
	best := preferredAdapter(t)
	if best.Name == "" {
		t.Fatal("no adapter: training cannot open a device here")
	}
	software := best.Type == "cpu"
	e := NewEngine(EngineOptions{})
	defer e.Close()
	if _, err := e.Train(context.Background(), TrainRequest{Model: filepath.Join(t.TempDir(), "missing.gguf")}); err == nil {
		t.Fatal("trained a missing model")
	}
	holds := func() (open bool) {
		if err := e.submit(context.Background(), func(context.Context) error { open = e.dev != nil; return nil }); err != nil {
			t.Fatal(err)
		}
		return open
	}
	if holds() {
		t.Error("the device outlived the training job")
	}
	p, _ := synth.PresetByName("tiny-llama")
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteFile(path, p, synth.Options{Quant: "Q8_0", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Load(context.Background(), path, nil); err != nil {
		t.Fatal(err)
	}
	if open := holds(); open == software {
		t.Errorf("after a load over the %s adapter %s: device open %v", best.Type, best.Name, open)
	}
}
