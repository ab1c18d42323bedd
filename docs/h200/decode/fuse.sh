# Issue 23, decode: integer products that quantize their own input
# (matvec_q8's IN > 0) against a quantizer dispatch before each, in one
# binary: hearth bench tg128 with HEARTH_Q8_FUSE_WORKGROUPS 0 (the
# default: no product fuses), 1024 (launches of about one wave on an
# H100/H200: Llama 3 8B's q|k|v, o and down) and 4096 (gate|up too),
# alternated on the three synth files, each setting's decode
# profile, then with .device/ops.test.xz the kernels alone
# (BenchmarkMatVecQ8 in Q4_K, Q6_K and Q8_0: f32, q8 on pre-quantized
# input, quantize+q8 and fused, 8 and 16 rows a workgroup; GB/s of weight
# bytes) and BenchmarkAttentionDecode (its splits, 16 to 256). Inputs:
# .device/debs, .device/hearth.xz (a build of the commit measured),
# .device/ops.test.xz.
# FUSE (default "0 1024 4096 0 1024 4096") and PROFILES=0 shorten it.
#   bash docs/h200/decode/fuse.sh
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
xz -T8 -dc .device/hearth.xz > $W/hearth && chmod +x $W/hearth
H=$W/hearth
$H info > $R/hearth-info.txt 2>&1
FILES="llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M llama-3.1-8b-Q8_0"
for b in $FILES; do
  timeout 120 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > /dev/null 2>>$R/log.txt
done
for b in $FILES; do
  for f in ${FUSE:-0 1024 4096 0 1024 4096}; do
    HEARTH_Q8_FUSE_WORKGROUPS=$f timeout 60 $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 3 --json >> $R/fuse$f-$b.json 2>>$R/log.txt
  done
  [ "${PROFILES:-1}" = 0 ] || for f in 0 1024 4096; do
    HEARTH_Q8_FUSE_WORKGROUPS=$f timeout 60 $H bench -m $W/m/$b.gguf -p 0 -n 16 -r 1 --profile > $R/profile-fuse$f-$b.txt 2>&1
  done
done
if [ -f .device/ops.test.xz ]; then
  xz -T8 -dc .device/ops.test.xz > $W/ops.test && chmod +x $W/ops.test
  (cd engine/ops && HEARTH_BENCH_Q8_ROWS=8,16 timeout 200 $W/ops.test -test.run '^$' -test.bench 'MatVecQ8/' -test.benchtime 200x) > $R/ops-bench.txt 2>&1
  (cd engine/ops && timeout 120 $W/ops.test -test.run '^$' -test.bench 'AttentionDecode' -test.benchtime 50x) > $R/attention-decode.txt 2>&1
fi
grep -h tokens_per_second $R/*.json; tail -3 $R/log.txt
