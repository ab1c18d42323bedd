# The short form of run.sh for a lease with little device time left: decode
# only, 8-bit against f32 activations, no peer; packed after each model.
source .device/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
pack() { (cd $OUT && tar czf results.tgz r); }
xz -T8 -dc .device/hearth-q8.xz > $W/hearth-q8; chmod +x $W/hearth-q8
H=$W/hearth-q8
for b in llama-3.1-8b-Q4_K_M llama-3.1-8b-Q8_0 llama-3.2-1b-Q4_K_M; do
  $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > /dev/null
  for f in "" --f32-activations "" --f32-activations; do
    timeout 60 $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 2 --json $f >> $R/hearth${f:+-f32}-$b.json 2>>$R/log.txt
  done
  pack
done
timeout 60 $H bench -m $W/m/llama-3.1-8b-Q4_K_M.gguf -p 0 -n 16 -r 1 --profile > $R/profile-8b.txt 2>&1
pack
grep -h tokens_per_second $R/*.json
