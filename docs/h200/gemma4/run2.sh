# Issue 19, a second lease: transformers' float64 logits of the gemma4
# fixture (f64_logits.py: how far transformers' float32 reference is from
# itself in float64), and gemma-4-e2b Q4_K_M decode with the layer scale
# folded into the last add (434fef0). Inputs as run.sh.
source .device/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
pack() { (cd $OUT && tar czf results.tgz r); }
PYTHONUNBUFFERED=1 timeout 60 python3 docs/h200/gemma4/f64_logits.py engine/model/testdata/hf/gemma4 $R/f64 > $R/f64.log 2>&1
cat $R/f64.log
pack
xz -T4 -dc .device/hearth.xz > $W/hearth
chmod +x $W/hearth
H=$W/hearth
b=gemma-4-e2b-Q4_K_M
timeout 60 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > $R/synth-$b.txt 2>&1
timeout 60 $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 2 --json > $R/hearth-$b.json 2>>$R/log.txt
grep -E '"tokens_per_second"|"test"|backend|dispatches' $R/hearth-$b.json
pack
