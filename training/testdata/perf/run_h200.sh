#!/bin/sh
# BenchmarkGPUStep and peft_bench.py in one run on the H200 (see
# peft_bench.py). Expects the compiled test binary at .bin/training.test
# and the Vulkan loader's packages in .gl (the device README's recipe); run
# from the repository root. Writes under $OUT.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > $OUT/hearth_mem.txt &
SMI=$!
HEARTH_BENCH_PRESET=llama-3.2-1b HEARTH_BENCH_QUANT=Q4_K HEARTH_BENCH_TOKENS=512 HEARTH_BENCH_RANK=16 \
	.bin/training.test -test.run '^$' -test.bench GPUStep -test.benchtime 5x -test.v 2>&1 | grep -v XDG
kill $SMI
echo "hearth peak GPU memory used (nvidia-smi, MiB): $(sort -n $OUT/hearth_mem.txt | tail -1)"
PYTHONUNBUFFERED=1 python3 training/testdata/perf/peft_bench.py 512 10 2>&1 | grep -v Warning
