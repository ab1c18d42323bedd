# Issue 20: the transformers fixtures of Qwen 3 MoE, Gemma 4's mixture and
# gpt-oss (engine/model/testdata/hf/qwen3moe, gemma4moe, gptoss), and the
# Qwen3-30B-A3B, gpt-oss-20b and Gemma 4 26B-A4B shapes beside the peer
# (llama.cpp ec98e2002, ggml's CUDA backend) on synth files in one lease:
# speed, the decode profile, and the logits of one token list from both,
# compared by docs/h200/gemma3n/compare.py.
#
# Inputs, built here and carried in the ignored .device folder:
#   .device/debs/, .device/env.sh   as docs/h200/one-graph/run.sh says
#   .device/hearth.xz               go build -ldflags "-s -w" ., xz
#   .device/peer/                   ../shared/peer's CMakeLists.txt, source
#                                   tarball and anchor.cpp
# Run: device run with carry [".device"], command `LIMIT=560 bash docs/h200/moe/run.sh`.
source .device/env.sh
W=/root/w; mkdir -p $W/m $W/src; R=$OUT/r; mkdir -p $R
# Packed after each phase, so a run cut short still brings back what it did.
pack() { (cd $OUT && tar czf results.tgz r); }
python3 -c 'import torch, transformers, tokenizers; print(torch.__version__, transformers.__version__, tokenizers.__version__)' > $R/versions.txt 2>&1
( PYTHONUNBUFFERED=1 timeout 240 python3 engine/model/testdata/hf/make_fixtures.py $R/fx qwen3moe gemma4moe gptoss > $R/fixtures.log 2>&1
  echo "make_fixtures rc=$?" >> $R/fixtures.log ) &
FX=$!
( tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src && cp .device/peer/anchor.cpp $W/src/ &&
  cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build $W/build -j12 >/dev/null ) > $R/peer-build.txt 2>&1 &
PB=$!
xz -T4 -dc .device/hearth.xz > $W/hearth
chmod +x $W/hearth
H=$W/hearth
$H info > $R/info.txt 2>&1
T=2,818,5279,1274,15,3467,512,9123,262,4062,1001,17,900,33021,46,12,650,7788,2411,93,1500,20000,300,44
# A budget in seconds (LIMIT, default 560): each step runs only while
# enough of it is left, so a short lease still brings back whole pairs.
END=$((SECONDS + ${LIMIT:-560}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
hearth() { # model-quant
  b=$1
  timeout 120 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > $R/synth-$b.txt 2>&1
  ls -l $W/m/$b.gguf >> $R/synth-$b.txt
  timeout 80 $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 2 --json > $R/hearth-$b.json 2>>$R/log.txt
  timeout 40 $H logits -m $W/m/$b.gguf --tokens $T > $W/hearth-$b.json 2>>$R/log.txt
  pack
}
peer() {
  b=$1
  timeout 50 $A bench $W/m/$b.gguf 512 128 3 > $R/peer-$b.json 2>>$R/peer-log.txt
  timeout 40 $A logits $W/m/$b.gguf $W/peer-$b.f32 $T >> $R/peer-log.txt 2>&1
  python3 docs/h200/gemma3n/compare.py $W/peer-$b.f32 $W/hearth-$b.json > $R/compare-$b.json 2>&1
  pack
}
hearth qwen3-30b-a3b-Q4_K_M
left 300 && timeout 40 $H bench -m $W/m/qwen3-30b-a3b-Q4_K_M.gguf -p 0 -n 16 -r 1 --profile > $R/profile-qwen3.txt 2>&1
left 300 && hearth gpt-oss-20b-MXFP4_MOE
wait $PB
left 100 && peer qwen3-30b-a3b-Q4_K_M
left 100 && [ -f $W/m/gpt-oss-20b-MXFP4_MOE.gguf ] && peer gpt-oss-20b-MXFP4_MOE
left 250 && hearth gemma-4-26b-a4b-Q4_K_M && left 90 && peer gemma-4-26b-a4b-Q4_K_M
wait $FX
tail -c 3000 $R/peer-log.txt > $R/peer-log-tail.txt 2>/dev/null; rm -f $R/peer-log.txt
cat $R/hearth*.json $R/peer*.json $R/compare*.json 2>/dev/null | grep -E '"tokens_per_second"|"test"|pp_best|tg_best|rel_diff|argmax' | head -60
tail -5 $R/fixtures.log
pack
