#!/bin/bash
# One device call: Kokoro-82M's real-time factor in PyTorch (hexgrad's KModel,
# CUDA) and in Hearth (GPUModel, Vulkan) on the same random weights and the
# same tokens, Hearth's profile of the sentence and the chunk
# (BenchmarkGPUProfile), then the Kokoro GPU parity tests and the audio
# kernels' on the device. Outputs go to $OUT (few files: the device returns
# ~8).
#
# Built here first (the device fetches nothing):
#   go test -c -ldflags='-s -w' -o .device/kokoro.test ./vocoder/kokoro
#   go test -c -ldflags='-s -w' -o .device/ops.test ./engine/ops
#   go test -c -ldflags='-s -w' -o .device/gpu.test ./engine/gpu
#   copy ../shared/testdata/kokoro and ggml (the matmul tests' oracle) to
#   .device/shared/testdata/
#   .gl: the Vulkan loader's debs (see the device README) and libasound2
#   .oracle/kokoro: hexgrad's kokoro package (not committed)
# Run: bash docs/h200/voice/run.sh, carrying .gl, .oracle and .device.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json PYTHONUNBUFFERED=1
R=$(pwd)
mkdir -p shared/testdata /tmp/o && cp -r .device/shared/testdata/kokoro .device/shared/testdata/ggml shared/testdata/
nvidia-smi -L > $OUT/gpu.txt
PYTHONPATH=.oracle/kokoro HEARTH_VOICE=$R/shared/testdata/kokoro/voices/af_heart.bin \
  timeout 150 python3 docs/h200/voice/bench_torch.py /tmp/o > $OUT/torch.txt 2>&1
grep -E '^torch' $OUT/torch.txt || tail -5 $OUT/torch.txt
cp /tmp/o/torch.json $OUT/torch.json
cd vocoder/kokoro
export HEARTH_VOICE_RECIPE=/tmp/o/voice_recipe.json
timeout 120 ../../.device/kokoro.test -test.run '^$' \
  -test.bench 'GPUForward|GPUText|GPUDecoder' -test.benchtime 5x 2>&1 | grep -vE 'XDG|^\[wgpu' > $OUT/hearth.txt
grep -E 'Benchmark|FAIL|panic' $OUT/hearth.txt
timeout 120 ../../.device/kokoro.test -test.run '^$' -test.bench 'GPUProfile' -test.benchtime 1x 2>&1 \
  | grep -vE 'XDG|^\[wgpu' > $OUT/profile.txt
grep -E 'dispatches|FAIL|panic' $OUT/profile.txt
timeout 100 ../../.device/kokoro.test -test.run 'GPU' -test.v 2>&1 | grep -vE 'XDG|^\[wgpu' > $OUT/vocoder_parity.txt
grep -E '^(--- FAIL|FAIL|PASS|ok)|panic' $OUT/vocoder_parity.txt
cd ../../engine/ops
timeout 150 ../../.device/ops.test -test.run 'Conv|LSTM|STFT|Snake|SineGen|AdaIN|ChannelLayerNorm|Pad1D|AvgPool|Noise|Gather|Transpose|Broadcast|Upsample|DurationFrames|Attention|MatMulBackwardInput' 2>&1 \
  | grep -E '^(--- FAIL|FAIL|PASS|ok)|panic|_test.go:' | head -80 > $OUT/ops_parity.txt
grep -E '^(--- FAIL|FAIL|PASS|ok)|panic' $OUT/ops_parity.txt
# f32 weights only (-test.bench levels are split at slashes: one pattern a run)
for pat in 'LSTMKokoro' 'AttentionPrefill/albert' 'ConvTranspose1DKokoro/.*/.*/f16=false' 'Conv1DKokoro/.*/tiled/.*/f16=false'; do
  timeout 100 ../../.device/ops.test -test.run '^$' -test.bench "$pat" -test.benchtime 10x 2>&1 | grep -E '^Benchmark|FAIL|panic'
done > $OUT/kernels.txt
(cd ../gpu && timeout 30 ../../.device/gpu.test -test.run '^$' -test.bench 'ReadBack' -test.benchtime 20x 2>&1 | grep -E '^Benchmark|FAIL|panic') >> $OUT/kernels.txt
cat $OUT/kernels.txt
