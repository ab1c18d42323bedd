# Issue 23, decode: where a token's time goes, with Device.Wait waiting
# for the queue's work-done callback (the profile of lease 2026-12-08
# returned early), and matvec_q8's rows a workgroup under dot4I8Packed
# (HEARTH_Q8_MATVEC_ROWS). 1B first (its synth is quick), then 8B Q4_K_M,
# as far as LIMIT allows; one file, $OUT/r/summary.txt.
# Inputs: .device/debs, .device/hearth.xz.
#   LIMIT=170 bash docs/h200/decode/profile.sh
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R; S=$R/summary.txt
END=$((SECONDS + ${LIMIT:-170}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
xz -T4 -dc .device/hearth.xz > $W/hearth && chmod +x $W/hearth
H=$W/hearth
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
bench() {
  local name=$1; shift
  left 30 || return
  echo "$name: $(timeout 60 env "$@" --json 2>>$W/log.txt | grep -oE '"(test|tokens_per_second)": *"?[a-z0-9.]*' | tr -d '"' | tr '\n' ' ')" >> $S
}
for b in llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M; do
  left 60 || break
  [ -f $W/m/$b.gguf ] || timeout 150 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > /dev/null 2>>$W/log.txt
  bench "$b default" X=1 $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 2
  left 40 && timeout 60 $H bench -m $W/m/$b.gguf -p 0 -n 16 -r 1 --profile 2>&1 | tail -14 >> $S
  for r in 4 16 2; do
    bench "$b rows $r" HEARTH_Q8_MATVEC_ROWS=$r $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 2
  done
done
tail -3 $W/log.txt >> $S
cat $S
