# Issue 24 item 4 (several requests at once): aggregate decode tokens/s of
# N sequences decoded together, Hearth (hearth bench --parallel, one chain
# a step through Runner.Decode) beside the peer (anchor pbench: a copy of
# ../shared/peer/anchor.cpp with pbench.inc's mode spliced in), on
# the same synth files in one lease; then hearth serve --parallel 16 under
# docs/h200/serve_bench.py's concurrent clients; and, first, the EmbeddingGemma
# fixture (engine/model/testdata/embeddinggemma/device.sh), packed as
# eg.tar, when EG is set and .device/conv is carried. Inputs: .device/debs (as
# docs/h200/one-graph/run.sh lists), .device/hearth.xz (a build of the
# commit measured), .device/peer (../shared/peer as it is), .device/conv.
# The pbench mode added to the copy of anchor.cpp: a context with
# n_seq_max = NSEQ and a cache per sequence (kv_unified false), each
# sequence prefilled with one token, then TG llama_decode calls of one
# batch holding a token of every sequence (pos i+1, its seq id, logits on),
# each followed by llama_synchronize; JSON of NSEQ·TG over the time.
#   LIMIT=540 bash docs/h200/parallel/run.sh
# Run 2026-12-07 (eighth session) as
#   LIMIT=530 WHILE_BUILD="bash docs/h200/vision/run.sh" bash docs/h200/parallel/run.sh
# (outputs in out/; the peer then was .device/peer with pbench.inc's code
# already in its anchor.cpp, as this script now makes it)
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m $W/src; R=$OUT/r; mkdir -p $R
END=$((SECONDS + ${LIMIT:-540}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
# anchor.cpp gains pbench.inc (beside this script) before its logits mode.
( tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src &&
  awk 'FNR==NR { inc = inc $0 "\n"; next } /mode == "logits"/ && !done { printf "%s", inc; done = 1 } { print }' \
    docs/h200/parallel/pbench.inc .device/peer/anchor.cpp > $W/src/anchor.cpp &&
  cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build $W/build -j12 >/dev/null ) > $R/peer-build.txt 2>&1 &
PB=$!
if [ -n "$EG" ] && [ -d .device/conv ]; then
  rm -rf $W/eg; O=$OUT; OUT=$W bash engine/model/testdata/embeddinggemma/device.sh > $R/eg.txt 2>&1; OUT=$O
  tar -C $W -cf $OUT/eg.tar eg
fi
xz -T4 -dc .device/hearth.xz > $W/hearth && chmod +x $W/hearth
H=$W/hearth
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
MODELS=${MODELS:-"llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M"}
NS=${NS:-"4,8,16"}
for b in $MODELS; do
  timeout 120 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > $R/synth-$b.txt 2>&1
done
$H info > $R/hearth-info.txt 2>&1
# Hearth's benches run while the peer builds (a short lease has no time to
# wait for it); the build's compilers share the host, not the GPU.
for b in $MODELS; do
  left 60 && timeout 150 $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 2 --parallel $NS --json > $R/hearth-$b.json 2>>$R/log.txt
done
# WHILE_BUILD: other GPU work to run while the peer still builds.
[ -n "$WHILE_BUILD" ] && left 200 && eval "$WHILE_BUILD"
if ! left 100; then kill $PB 2>/dev/null; fi
wait $PB
for b in $MODELS; do
  left 30 && timeout 60 $A bench $W/m/$b.gguf 0 128 2 > $R/peer-$b-x1.json 2>>$R/log.txt
  for n in ${NS//,/ }; do
    left 20 && timeout 60 $A pbench $W/m/$b.gguf $n 128 2 > $R/peer-$b-x$n.json 2>>$R/log.txt
  done
done
# What API clients see: hearth serve --parallel 16, serve_bench.py's
# streamed clients 1, 4, 8 and 16 at once (aggregate: all completion tokens
# over the wall time, prefill and first tokens included).
S=${SERVE:-llama-3.2-1b-Q4_K_M}
if left 60 && [ -f $W/m/$S.gguf ]; then
  $H serve --folder $W/m --parallel 16 --queue 16 --ctx 1024 --idle 0 --addr 127.0.0.1:11435 > $R/serve.log 2>&1 &
  SP=$!
  for i in $(seq 50); do curl -s 127.0.0.1:11435/ >/dev/null && break; sleep 0.2; done
  for c in 1 4 8 16; do
    left 15 && timeout 60 python3 docs/h200/serve_bench.py --model $S --runs 1 --concurrent $c > $R/serve-$S-x$c.json 2>>$R/log.txt
  done
  kill $SP
fi
(cd $OUT && tar czf results.tgz r)
cat $R/*.json; tail -5 $R/log.txt $R/peer-build.txt
