// Package model holds Hearth's text architectures at run time: weights read
// from GGUF, a CPU reference forward pass, the GPU forward pass built on
// engine/ops, and generation (sessions that keep a KV cache, sampling,
// streaming) on either.
//
// Architectures differ by data, not by copies of the forward pass: each one
// is a record in engine/arch (one file per architecture there) whose Layout
// and Configure fill a Config, and the one forward pass of each backend
// consults the Config's fields. A block's forward is written once per
// backend: ForwardLayerCPU (layer_cpu.go) and GPUWeights.RecordLayer
// (layer_gpu.go), over weights uploaded once by UploadWeights
// (weights_gpu.go). The runners (cpu.go, gpu.go) and the training steps
// call them; training keeps the intermediates and adds its LoRA terms
// through the recorders' hooks.
package model

import (
	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/gguf"
)

// Config is an architecture's hyper-parameters, from the GGUF keys.
type Config = arch.Config

// YaRN is the RoPE scaling of that name; see arch.YaRN.
type YaRN = arch.YaRN

// Architectures lists the supported general.architecture values.
func Architectures() []string { return arch.Names() }

// ReadConfig reads a model's hyper-parameters. An architecture Hearth does
// not implement is refused by name.
func ReadConfig(f *gguf.File) (Config, error) { return arch.ReadConfig(f) }
