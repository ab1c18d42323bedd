# Issue 23 in one lease: prefill on 8-bit activations (ops.MatMulQ8) and
# kernels compiled without naga's loop bounding, beside the peer, in order
# of what matters most, as far as LIMIT allows. While llama.cpp's CUDA
# build of ../shared/peer compiles, hearth (a build of the commit
# measured) runs on the issue's synth files (FILES, 8B Q4_K_M first) as
# built (pp512, tg128) and with HEARTH_Q8_PREFILL=0 (prompts on the f32
# tiles); then the peer's pp512/tg128; then with ops.test the prefill
# kernels on Llama 3 8B's shapes (BenchmarkMatMulTiled at m = 512: f32
# tiles, their sweep, matmul_q8 and its sweep) and matmul_q8's sweep in a
# whole 8B prompt (HEARTH_Q8_TILE); then HEARTH_Q8_DOT=swar
# (decode on two products a u32 multiply) and, on the Q8_0 file,
# HEARTH_Q8_DECODE_Q8_0=0 (its decode on f32 activations); then pp4096
# and tg128 at 4096 tokens of history on 8B Q4_K_M beside the peer's
# pp4096, a decode profile and the attention's split sweep. Every result
# goes to one file, $OUT/r/summary.txt.
# Inputs: .device/debs, .device/hearth.xz, .device/ops.test.xz,
# .device/peer (../shared/peer as it is); the peer's anchor gets
# anchor-depth.patch (ANCHOR_DEPTH, prompts past 512 tokens), without
# which its 4096-token runs printed nothing on 2026-12-08.
#   LIMIT=520 bash docs/h200/prefill/q8.sh   (REPS=1: each setting once)
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m $W/src; R=$OUT/r; mkdir -p $R; S=$R/summary.txt
END=$((SECONDS + ${LIMIT:-520}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
( tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src && cp .device/peer/anchor.cpp $W/src/ &&
  { patch -d $W/src -p0 < docs/h200/prefill/anchor-depth.patch || (P=$PWD/docs/h200/prefill/anchor-depth.patch; cd $W/src && git apply -p0 $P); } &&
  cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build $W/build -j10 >/dev/null ) > $W/peer-build.txt 2>&1 &
PB=$!
xz -T4 -dc .device/hearth.xz > $W/hearth && chmod +x $W/hearth
xz -T4 -dc .device/ops.test.xz > $W/ops.test && chmod +x $W/ops.test
H=$W/hearth
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
$H info 2>&1 | tail -4 >> $S
FILES=${FILES:-llama-3.1-8b-Q4_K_M llama-3.2-1b-Q4_K_M llama-3.1-8b-Q8_0}
synth() { [ -f $W/m/$1.gguf ] || timeout 150 $H synth --preset ${1%-*} --quant ${1##*-} -o $W/m/$1.gguf --seed 1 > /dev/null 2>>$W/log.txt; }
# bench NAME ENV... BINARY ARGS: one line of NAME and its tests' tokens/s.
bench() {
  local name=$1; shift
  left 40 || return
  echo "$name: $(timeout 60 env "$@" --json 2>>$W/log.txt | grep -oE '"(test|tokens_per_second)": *"?[a-z0-9.]*' | tr -d '"' | tr '\n' ' ')" >> $S
}
# In order of what matters most, as far as LIMIT allows.
for b in $FILES; do
  left 60 && synth $b
  bench "$b default" X=1 $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 3
  bench "$b f32-prefill" HEARTH_Q8_PREFILL=0 $H bench -m $W/m/$b.gguf -p 512 -n 0 -r 3
  # Once, with naga's loop bounding back on: is it what cost lease 1 its prefill?
  [ $b = ${FILES%% *} ] && bench "$b f32-prefill loop-bounding" HEARTH_LOOP_BOUNDING=1 HEARTH_Q8_PREFILL=0 $H bench -m $W/m/$b.gguf -p 512 -n 0 -r 1
done
while kill -0 $PB 2>/dev/null && left 90; do sleep 5; done # the peer's build, while time allows
kill $PB 2>/dev/null; wait $PB
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
for b in $FILES; do
  left 25 && echo "peer $b: $(timeout 60 $A bench $W/m/$b.gguf 512 128 3 2>>$W/log.txt)" >> $S
done
left 100 && (cd engine/ops && timeout 90 $W/ops.test -test.run '^$' -test.bench 'MatMulTiled/(4096x4096|14336x4096|4096x14336)/(Q4_K|Q6_K|Q8_0)/m512' -test.benchtime 10x 2>&1 |
  grep -E '^Benchmark' | awk '{print $1, $(NF-1), $NF}') >> $S
# The sweep's shapes in a whole 8B prompt (HEARTH_Q8_TILE=rt,ct,rr,rc).
for t in 16,16,4,8 16,16,8,4 16,16,8,8 8,16,8,4 16,8,4,8; do
  bench "${FILES%% *} tile $t" HEARTH_Q8_TILE=$t $H bench -m $W/m/${FILES%% *}.gguf -p 512 -n 0 -r 2
done
for i in ${REPS:-1 2}; do
  for b in $FILES; do
    M="-m $W/m/$b.gguf"
    [ $i = 1 ] || bench "$b default" X=1 $H bench $M -p 512 -n 128 -r 3
    [ $i = 1 ] || bench "$b f32-prefill" HEARTH_Q8_PREFILL=0 $H bench $M -p 512 -n 0 -r 3
    bench "$b swar-decode" HEARTH_Q8_DOT=swar $H bench $M -p 0 -n 128 -r 3
    [ ${b##*-} = Q8_0 ] && bench "$b f32-q8_0-decode" HEARTH_Q8_DECODE_Q8_0=0 $H bench $M -p 0 -n 128 -r 3
  done
done
b=llama-3.1-8b-Q4_K_M
bench "$b pp4096" X=1 $H bench -m $W/m/$b.gguf -p 4096 -n 0 -r 1 --ctx 8192
bench "$b tg128@4096" X=1 $H bench -m $W/m/$b.gguf -p 0 -n 128 -d 4096 -r 1 --ctx 8192
left 25 && echo "peer $b pp4096, tg128@4096: $(ANCHOR_DEPTH=4096 timeout 60 $A bench $W/m/$b.gguf 4096 128 1 2>>$W/log.txt)" >> $S
# Where a decoded token's time goes now, and the attention's split sweep
# at long histories (docs/performance.md, "Decode at a long history").
left 40 && timeout 60 $H bench -m $W/m/$b.gguf -p 0 -n 16 -r 1 --profile 2>&1 | tail -30 >> $S
left 60 && (cd engine/ops && timeout 60 $W/ops.test -test.run '^$' -test.bench 'AttentionDecode' -test.benchtime 50x 2>&1 |
  grep -E '^Benchmark' | awk '{print $1, $3, $4}') >> $S
tail -3 $W/log.txt $W/peer-build.txt >> $S
cat $S
