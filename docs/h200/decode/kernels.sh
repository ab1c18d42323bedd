# Issue 23, decode: the integer matvecs alone on the Llama 3 8B shapes
# (BenchmarkMatVecQ8 in Q4_K, Q6_K and Q8_0: f32, q8 on pre-quantized
# input, quantize+q8 and fused, 8 and 16 rows a workgroup), GB/s of
# weight bytes. Input:
# .device/debs, .device/ops.test.xz (a build of the commit measured).
#   bash docs/h200/decode/kernels.sh
source docs/h200/one-graph/env.sh
W=/root/w; R=$OUT/r; mkdir -p $W $R
xz -T8 -dc .device/ops.test.xz > $W/ops.test && chmod +x $W/ops.test
(cd engine/ops && HEARTH_BENCH_Q8_ROWS=8,16 timeout 300 $W/ops.test -test.run '^$' -test.bench 'MatVecQ8/' -test.benchtime 200x) > $R/ops-bench.txt 2>&1
awk '/GB\/s/ {print $1, $3, $(NF-1)}' $R/ops-bench.txt
