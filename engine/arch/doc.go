// Package arch is Hearth's registry of text architectures: one record (Arch)
// per general.architecture, registered from its own file (llama.go,
// qwen.go, gemma.go, phi3.go), and the hyper-parameters (Config) that
// ReadConfig reads from a GGUF file with the record's help.
//
// A record holds everything that differs between architectures outside the
// forward pass: the Configure function and Layout that fill a Config, the
// layer's tensor map (GGUF names ↔ transformers names, shapes, which
// projections LoRA adapts), the Hugging Face classes that import as it
// with their config defaults, whether training covers it, and its built-in
// chat template. Its readers:
//
//   - engine/model: ReadConfig (Config and the forward passes' flags);
//   - engine/hfimport: the classes, defaults and import flags, and each
//     layer's tensors by the tensor map;
//   - engine/adapter: a PEFT module's GGUF tensor and back, and which B
//     rows llama.cpp's converter permutes;
//   - training: Trainable, and the LoRA targets of each layer tensor;
//   - engine/chat: the built-in template when a file has none;
//   - engine/synth: a preset's Arch names its record, whose tensor map is
//     the layer the preset's file holds.
//
// The package imports only gguf, so that all of them can import it:
// engine/model imports engine/chat, and model's tests import
// engine/hfimport and engine/synth, so the registry cannot live in
// engine/model.
//
// # Adding an architecture
//
// One new file here, plus its tests and fixtures. For a graph the forward
// passes already run (new flags of Layout or Config being the exception),
// say "foo" converted from transformers' FooForCausalLM:
//
//	// engine/arch/foo.go
//	func init() {
//		Register(&Arch{
//			Name:   "foo",
//			Layout: Layout{NeoX: true, QKNorm: true},
//			Configure: func(f *gguf.File, c *Config) error {
//				// keys foo adds to the common ones
//				return nil
//			},
//			HF: []HFClass{{Name: "FooForCausalLM",
//				Defaults: map[string]float64{"rms_norm_eps": 1e-6, "rope_theta": 10000}}},
//			Trainable:    true,
//			ChatTemplate: "chatml",
//		})
//	}
//
// and then, outside this package, only tests and data: a tiny preset in
// engine/synth's Presets (Arch: "foo") for the forward-pass and training
// tests, and a transformers fixture under engine/model/testdata/hf/foo made
// by its make_fixtures.py for the import and logits tests. A graph that
// differs also lists its own Block (and Globals, its model-level tensors)
// and adds what the forward passes lack to Config, as data they read:
// Gemma 4 (gemma4.go) set LayerShapes and fills Config.Shapes with each
// layer's widths and KV source, and PerLayerInput and VNorm, which
// engine/model's one forward pass of each backend consults without naming
// the architecture.
package arch
