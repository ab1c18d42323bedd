#!/bin/sh
# The fine-tuning demo of docs/fine-tuning.md on the H200: a random-weight
# model of qwen2.5-0.5b's shapes (its real tokenizer and chat template) at
# Q4_K learns the answer format of assets/datasets/answer-format.jsonl.
# Expects the hearth binary at .demo/hearth and the Vulkan loader's
# packages in .gl (the device README's recipe); run from the repository
# root; writes the training log, the replies and the loss curve under $OUT.
set -e
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
H=.demo/hearth
M=/tmp/qwen-0.5b-q4k.gguf
$H synth --preset qwen2.5-0.5b --quant Q4_K -o $M >/dev/null
$H train -m $M -d assets/datasets/answer-format.jsonl -o $OUT/answer.gguf \
	--rank 16 --alpha 32 --lr 2e-3 --steps 60 --seq-len 128 --batch 4 --valid 0.2 --valid-every 5 --save-every 30 \
	--json > $OUT/train.jsonl
tail -1 $OUT/train.jsonl
for q in "What is the capital of France?" "Name a large animal with a trunk." "What do bees make?"; do
	echo "Q: $q"
	echo "base:  $($H chat -m $M -p "$q" -n 10 --temp 0 2>/dev/null)"
	echo "tuned: $($H chat -m $M --lora $OUT/answer.gguf -p "$q" -n 10 --temp 0 2>/dev/null)"
done > $OUT/replies.txt
cat $OUT/replies.txt
rm -f $OUT/answer.gguf $OUT/answer.gguf.checkpoint
python3 docs/h200/loss_curve.py $OUT/train.jsonl $OUT/loss-curve.svg "LoRA on a Q4_K qwen2.5-0.5b-shaped model, answer-format.jsonl"
