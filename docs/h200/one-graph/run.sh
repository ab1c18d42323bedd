# The H200 check of issue 17 (one graph per backend): hearth bench and the
# LoRA step of the tree before the change (103f47c, "base") and after it
# ("new"), alternated in one lease on the same synth file. Ran 2026-12-06;
# outputs beside this script (bench-base.json, bench-new.json, step.txt).
#
# Inputs, built here and carried in the ignored .device folder:
#   .device/debs/                  apt-get download (amd64) of libvulkan1 libegl1
#                                  libglvnd0 libopengl0 libgl1 libglx0 libgles2
#                                  libasound2 libasound2-data libx11-6
#                                  libx11-data libxcb1 libxau6 libxdmcp6
#                                  libbsd0 libmd0, which env.sh beside this
#                                  script unpacks
#   .device/hearth-base.xz         go build -ldflags "-s -w" . at 103f47c, xz
#   .device/train-base.test.xz     go test -c ./training at 103f47c, xz
#   .device/hearth-q8.xz           the same build at 9eeab44, run with
#                                  --f32-activations: the restructured tree's
#                                  decode exactly, without the 8-bit
#                                  activations that commit added
#   .device/train-new.test.xz      go test -c ./training at a9f1512 (training
#                                  is unchanged since)
# Run: device run with carry [".device"], command `bash docs/h200/one-graph/run.sh`.
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
for b in hearth-q8 hearth-base train-base.test train-new.test; do xz -T4 -dc .device/$b.xz > $W/$b & done; wait
chmod +x $W/hearth-* $W/train-*
$W/hearth-q8 synth --preset llama-3.2-1b --quant Q4_K_M -o $W/m/1b.gguf --seed 1 > /dev/null
for v in base q8 base q8; do
  fl=""; [ $v = q8 ] && fl=--f32-activations
  timeout 40 $W/hearth-$v bench -m $W/m/1b.gguf -p 512 -n 128 -r 3 --json $fl >> $R/bench17-$v.json 2>>$R/log.txt
done
for v in base new base new; do
  (cd training && HEARTH_BENCH_PRESET=llama-3.2-1b HEARTH_BENCH_QUANT=Q4_K HEARTH_BENCH_TOKENS=512 HEARTH_BENCH_RANK=16 \
    timeout 45 $W/train-$v.test -test.run '^$' -test.bench BenchmarkGPUStep -test.benchtime 8x) >> $R/step-$v.txt 2>&1
done
grep -h Benchmark $R/step-*.txt
cd $OUT && tar czf results.tgz r
