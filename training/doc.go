// Package training is LoRA fine-tuning: the trainable pairs on the layers'
// projections and, when asked, the embeddings and the LM head (lora.go);
// the reference training step on the CPU (step_cpu.go) and the step on the
// GPU through engine/ops (step_gpu.go), each running engine/model's block
// forward with its activations kept (ForwardLayerCPU, RecordLayer) and
// adding the LoRA terms and the backward, both with LoRA dropout from masks
// hashed from their indices; AdamW with clipping, accumulation and the
// learning-rate schedule (optim.go); and the run (run.go): the dataset,
// the steps, validation, checkpoints that resume a run exactly
// (checkpoint.go), pause and stop, and the adapter written as a llama.cpp
// GGUF LoRA or a PEFT folder. Datasets are training/data, adapter files
// and merging engine/adapter. It calls engine/ops, never wgpu; the app's
// engine runs it as a job (app.Engine.Train) for `hearth train` and the
// studio's Tune tab.
package training
