#!/usr/bin/env python3
"""PyTorch + peft's LoRA training step on the shape BenchmarkGPUStep times,
for the comparison the fine-tuning issue asks for: a Llama-3.2-1B-shaped
model (random weights, transformers' LlamaForCausalLM from its config) in
bf16 on the GPU, peft LoRA r 16, alpha 32, on q, k, v, o, gate, up, down,
one sequence of 512 tokens with the first 128 targets masked, AdamW. A step
is zero_grad, forward (sdpa attention), the mean cross-entropy, backward,
clip_grad_norm_(1.0) and the optimizer step; 3 warm-up steps, then STEPS
timed ones with the GPU synchronized. Prints tokens/s and the peak memory
torch allocated.

Usage: python3 peft_bench.py [TOKENS [STEPS]]
"""
import sys
import time

import peft
import torch
import transformers

T = int(sys.argv[1]) if len(sys.argv) > 1 else 512
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 10

cfg = transformers.LlamaConfig(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
    num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192},
)
torch.manual_seed(0)
with torch.device("cuda"):
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
model = peft.get_peft_model(model, peft.LoraConfig(
    r=16, lora_alpha=32, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
    target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
model.train()
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=1e-4)
ids = torch.randint(0, cfg.vocab_size, (1, T + 1), device="cuda")
tokens, labels = ids[:, :-1], ids[:, 1:].clone()
labels[:, : T // 4] = -100


def step():
    opt.zero_grad(set_to_none=True)
    logits = model(input_ids=tokens, use_cache=False).logits.float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return loss


for _ in range(3):
    step()
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
start = time.perf_counter()
for _ in range(STEPS):
    loss = step()
torch.cuda.synchronize()
dt = time.perf_counter() - start
print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, {torch.cuda.get_device_name()}")
print(f"peft bf16 LoRA r16: T={T} {STEPS} steps in {dt:.3f} s: {STEPS * T / dt:.0f} tokens/s, "
      f"{dt / STEPS * 1e3:.1f} ms/step, peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, loss {float(loss):.3f}")
