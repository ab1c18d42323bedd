# Issue 23, decode: the integer matvecs that quantize their own input
# (matvec_q8's IN > 0) against a quantizer dispatch before each product,
# and Q8_0 weights on 8-bit activations: hearth bench tg128 of the tree
# before (hearth-base) and after (hearth), alternated in one lease on the
# issue's three synth files (on the Q8_0 one also hearth with
# --f32-activations, Q8_0's old path without the base's other changes),
# and both trees' decode profiles (the kernels alone: kernels.sh).
# Inputs: .device/debs, .device/hearth.xz, .device/hearth-base.xz.
#   bash docs/h200/decode/fuse.sh
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
for f in hearth hearth-base; do xz -T8 -dc .device/$f.xz > $W/$f && chmod +x $W/$f; done
H=$W/hearth
$H info > $R/hearth-info.txt 2>&1
FILES="llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M llama-3.1-8b-Q8_0"
for b in $FILES; do
  timeout 120 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > /dev/null 2>>$R/log.txt
done
for b in $FILES; do
  for v in hearth-base hearth hearth-base hearth; do
    timeout 60 $W/$v bench -m $W/m/$b.gguf -p 0 -n 128 -r 3 --json >> $R/$v-$b.json 2>>$R/log.txt
  done
  case $b in *Q8_0) for i in 1 2; do
    timeout 60 $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 3 --json --f32-activations >> $R/hearth-f32-$b.json 2>>$R/log.txt
  done;; esac
  for v in hearth-base hearth; do
    timeout 60 $W/$v bench -m $W/m/$b.gguf -p 0 -n 16 -r 1 --profile > $R/profile-$v-$b.txt 2>&1
  done
done
grep -h tokens_per_second $R/*.json; tail -3 $R/log.txt
