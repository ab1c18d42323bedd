// Package training is LoRA fine-tuning: the trainable pairs (lora.go), the
// reference training step on the CPU (step_cpu.go) and the step on the GPU
// through engine/ops (step_gpu.go), AdamW with clipping, accumulation and
// the learning-rate schedule (optim.go). Datasets are training/data,
// adapter files and merging training/adapter. It calls engine/ops, never
// wgpu. The run loop with checkpoints, `hearth train` and the Tune tab
// are still to come (the fine-tuning issue).
package training
