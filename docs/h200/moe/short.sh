# Issue 20, the short form of run.sh for a lease of a few minutes: the
# transformers fixtures of the three mixture families (the correctness
# check), and Hearth alone on the Qwen3-30B-A3B and gpt-oss-20b shapes
# while they are made; no peer (its build alone takes minutes).
# Inputs and carry as run.sh says. Run: `LIMIT=240 bash docs/h200/moe/short.sh`.
source .device/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
pack() { (cd $OUT && tar czf results.tgz r); }
END=$((SECONDS + ${LIMIT:-240}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
( PYTHONUNBUFFERED=1 timeout $((${LIMIT:-240} - 10)) python3 engine/model/testdata/hf/make_fixtures.py $R/fx qwen3moe gemma4moe gptoss > $R/fixtures.log 2>&1
  echo "make_fixtures rc=$?" >> $R/fixtures.log ) &
FX=$!
xz -T4 -dc .device/hearth.xz > $W/hearth && chmod +x $W/hearth
H=$W/hearth
$H info > $R/info.txt 2>&1
for b in qwen3-30b-a3b-Q4_K_M gpt-oss-20b-MXFP4_MOE; do
  left 90 || break
  timeout 60 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > $R/synth-$b.txt 2>&1
  timeout $(( END - SECONDS - 15 > 60 ? 60 : END - SECONDS - 15 )) $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 1 --json > $R/hearth-$b.json 2>>$R/log.txt
  pack
done
wait $FX
tail -5 $R/fixtures.log
grep -h -E '"test"|tokens_per_second|dispatches' $R/hearth-*.json | head -20
pack
