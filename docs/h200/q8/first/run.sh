# The first H200 call of the integer decode matvecs (2026-12-06, the tree at
# 9eeab44: one-workgroup normed quantizer, 16 rows a matvec workgroup),
# which also ran issue 17's check (docs/h200/one-graph). Outputs beside it.
# Issue 23 (integer decode matvecs) and issue 17's before/after, one lease.
source .device/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
for b in ops.test hearth-q8 hearth-base train-base.test train-new.test; do xz -T4 -dc .device/$b.xz > $W/$b & done; wait
chmod +x $W/*.test $W/hearth-*
(cd engine/ops && HEARTH_BENCH_Q8_ROWS=8,16,32 timeout 150 $W/ops.test -test.run '^$' -test.bench 'MatVecQ8' -test.benchtime 200x) > $R/q8.txt 2>&1
grep -E "GB/s" $R/q8.txt | awk '{print $1, $(NF-1)}'
$W/hearth-q8 synth --preset llama-3.1-8b --quant Q4_K_M -o $W/m/8b.gguf --seed 1 > /dev/null
for f in "" --f32-activations "" --f32-activations; do
  echo "8b $f" >> $R/q8bench.txt
  timeout 60 $W/hearth-q8 bench -m $W/m/8b.gguf -p 0 -n 128 -r 3 $f >> $R/q8bench.txt 2>&1
done
cat $R/q8bench.txt
timeout 60 $W/hearth-q8 bench -m $W/m/8b.gguf -p 0 -n 16 -r 1 --profile > $R/profile8b-q8.txt 2>&1
# Issue 17: base (103f47c) against the restructured tree (hearth-q8 with
# f32 activations: the decode path of the tree before the q8 change).
$W/hearth-q8 synth --preset llama-3.2-1b --quant Q4_K_M -o $W/m/1b.gguf --seed 1 > /dev/null
for v in base q8 base q8; do
  fl=""; [ $v = q8 ] && fl=--f32-activations
  timeout 40 $W/hearth-$v bench -m $W/m/1b.gguf -p 512 -n 128 -r 3 --json $fl >> $R/bench17-$v.json 2>>$R/log.txt
done
for v in base new base new; do
  (cd training && HEARTH_BENCH_PRESET=llama-3.2-1b HEARTH_BENCH_QUANT=Q4_K HEARTH_BENCH_TOKENS=512 HEARTH_BENCH_RANK=16 \
    timeout 45 $W/train-$v.test -test.run '^$' -test.bench BenchmarkGPUStep -test.benchtime 8x) >> $R/step-$v.txt 2>&1
done
cat $R/bench17-*.json | head -20; grep -h Benchmark $R/step-*.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/smi.txt 2>&1
cd $OUT && rm -f results.tgz && tar czf results.tgz r
