#!/bin/bash
# One device call: parity of the new kernel, old vs new kernel benchmarks,
# old vs new training step. Usage: run.sh [training]
set -u
R=$(cd "$(dirname "$0")/../.." && pwd)
for f in "$R"/.device/mmbi_gz/*.gz; do b=$(basename "$f" .gz); gunzip -c "$f" > /tmp/$b; chmod +x /tmp/$b; done
nvidia-smi -L | tee $OUT/gpu.txt
cd "$R/engine/ops"
t0=$(date +%s)
timeout 150 /tmp/ops.test -test.run 'MatMulBackward|LoRA|LMHead' -test.v 2>&1 | grep -E '^(--- FAIL|FAIL|PASS|ok)|worst error|panic' > $OUT/parity.txt
grep -E '^(--- FAIL|FAIL|PASS|ok)|panic' $OUT/parity.txt; echo "parity $(( $(date +%s)-t0 ))s"
B='^$'
for v in old new; do
  bin=/tmp/ops_$v.test; [ $v = new ] && bin=/tmp/ops.test
  extra=''; [ $v = new ] && extra='|MatMulBackwardLaunch'
  timeout 150 $bin -test.run "$B" -test.bench "MatMulBackwardInputTraining$extra" -test.benchtime 50x 2>&1 | grep -E '^Benchmark|FAIL|panic' > $OUT/bench_$v.txt
  timeout 90 $bin -test.run "$B" -test.bench 'LlamaHead' -test.benchtime 5x 2>&1 | grep -E '^Benchmark|FAIL|panic' >> $OUT/bench_$v.txt
  echo "bench $v $(( $(date +%s)-t0 ))s"
done
if [ "${1:-}" = training ]; then
  cd "$R/training"
  for v in old new; do
    bin=/tmp/training_$v.test; [ $v = new ] && bin=/tmp/training.test
    HEARTH_BENCH_PRESET=llama-3.2-1b HEARTH_BENCH_QUANT=Q4_K HEARTH_BENCH_TOKENS=512 HEARTH_BENCH_RANK=16 timeout 200 $bin -test.run "$B" -test.bench GPUStep -test.benchtime 5x 2>&1 | grep -vE 'XDG|swapchain' > $OUT/train_$v.txt
    grep -E 'tokens/s|FAIL|panic' $OUT/train_$v.txt; echo "train $v $(( $(date +%s)-t0 ))s"
  done
fi
cd $OUT && for f in bench_*.txt; do echo "== $f"; sed -E 's/[[:space:]]+/ /g' $f; done
