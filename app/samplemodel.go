package app

import (
	"context"

	"github.com/hearthstudio/hearth/engine/synth"
)

// SampleModel is a model hearth synth can write: random weights with the
// exact shapes of a real model, for trying the studio and measuring a
// machine without downloading anything.
type SampleModel = synth.Preset

// SampleModels are the models hearth synth can write, as it lists them.
func SampleModels() []SampleModel { return synth.Presets() }

// SampleModelSize is p's number of weights and its file's size in bytes at
// quant (a llama.cpp file type: "Q4_K_M"), without writing it.
func SampleModelSize(p SampleModel, quant string) (params uint64, fileSize int64, err error) {
	l, err := synth.Plan(p, synth.Options{Quant: quant})
	if err != nil {
		return 0, 0, err
	}
	return l.Params, l.FileSize, nil
}

// WriteSampleModel writes p at quant to path with seed 1, so the same
// preset gives the same file on any machine. progress, when set, hears the
// bytes of tensor data written; ctx cancels between chunks.
func WriteSampleModel(ctx context.Context, path string, p SampleModel, quant string, progress func(done, total int64)) error {
	o := synth.Options{Quant: quant, Seed: 1, Context: ctx}
	if progress != nil {
		o.Progress = func(pr synth.Progress) { progress(pr.BytesDone, pr.BytesTotal) }
	}
	return synth.WriteFile(path, p, o)
}
