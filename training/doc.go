// Package training will hold LoRA fine-tuning: adapters, backward passes,
// loss, AdamW, datasets, the training loop, checkpoints and adapter
// export/merge (the fine-tuning issue). It calls engine/ops, never wgpu.
package training
