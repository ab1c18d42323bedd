# Issue 20, the third lease: the speed after the decode fusions of gpt-oss's
# biases (the router's into MoERoute, the experts' gate-up and down biases
# into MoEMatVec's store: 72 fewer dispatches a token), beside the peer, for
# Qwen3-30B-A3B Q4_K_M, gpt-oss-20b MXFP4 and Gemma 4 26B-A4B Q4_K_M, with
# a dense model (Llama 3.1 8B Q4_K_M) measured the same way as the ratio a
# mixture is to be read against; the decode profiles; the expert matvec's
# launch sweep (BenchmarkMoEMatVecLaunch) and the MoE kernels' parity on
# the GPU.
# Inputs as run.sh says, plus .device/ops.test.xz (go test -c
# -ldflags "-s -w" ./engine/ops, xz). Run: `LIMIT=520 bash docs/h200/moe/third.sh`.
# The fourth lease, after moeVecLaunch took the sweep's shapes, ran
# `LIMIT=520 SWEEP=0 QUIET=1 MODELS="gpt-oss-20b-MXFP4_MOE
# qwen3-30b-a3b-Q4_K_M llama-3.1-8b-Q4_K_M" bash docs/h200/moe/third.sh`
# with the build of 4fc30af (before the launch change) as hearth-base.
# The fifth, after the router took the feed-forward norm, ran `LIMIT=250
# SWEEP=0 NOPEER=1 MODELS="gpt-oss-20b-MXFP4_MOE qwen3-30b-a3b-Q4_K_M" bash
# docs/h200/moe/third.sh` with the build of 3af211f as hearth-base.
# The sixth ran `LIMIT=540 SWEEP=0 QUIET=1 MODELS="gpt-oss-20b-MXFP4_MOE
# qwen3-30b-a3b-Q4_K_M" bash docs/h200/moe/third.sh` with the build of
# 11c4e31 as hearth and, as hearth-q8, the same with Q8_0 in
# model.q8DecodeTypes.
source .device/env.sh
W=/root/w; mkdir -p $W/m $W/src; R=$OUT/r; mkdir -p $R
pack() { (cd $OUT && tar czf results.tgz r); }
END=$((SECONDS + ${LIMIT:-520}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
# NOPEER=1 leaves the peer out (an A/B of two Hearth builds in a short lease).
if [ "${NOPEER:-0}" = 1 ]; then
  true & PB=$!
else
  ( tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src && cp .device/peer/anchor.cpp $W/src/ &&
    cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
    cmake --build $W/build -j12 >/dev/null ) > $R/peer-build.txt 2>&1 &
  PB=$!
fi
xz -T4 -dc .device/hearth.xz > $W/hearth && chmod +x $W/hearth
[ -f .device/ops.test.xz ] && xz -T4 -dc .device/ops.test.xz > $W/ops.test && chmod +x $W/ops.test
H=$W/hearth
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
MODELS=${MODELS:-"gpt-oss-20b-MXFP4_MOE qwen3-30b-a3b-Q4_K_M llama-3.1-8b-Q4_K_M gemma-4-26b-a4b-Q4_K_M"}
# The files are made while the peer builds; Hearth's benches wait for the
# build (its 12 compilers would slow the submits of a decode) only with
# QUIET=1, as the fourth lease ran. Every .device/hearth-NAME.xz carried
# (hearth-base, a build before a change; others, variants of one) is
# benched the same way as hearth-NAME.
for b in $MODELS; do
  left 200 || break
  timeout 90 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > $R/synth-$b.txt 2>&1
done
[ "${QUIET:-0}" = 1 ] && wait $PB
BINS=hearth
for f in .device/hearth-*.xz; do
  [ -f $f ] || continue
  h=$(basename $f .xz); xz -T4 -dc $f > $W/$h && chmod +x $W/$h && BINS="$BINS $h"
done
for b in $MODELS; do
  for h in $BINS; do
    [ -f $W/m/$b.gguf ] && left 90 && timeout 80 $W/$h bench -m $W/m/$b.gguf -p 512 -n 128 -r 2 --json > $R/$h-$b.json 2>>$R/log.txt
  done
  pack
done
if [ "${SWEEP:-1}" != 0 ]; then
  (cd engine/ops && timeout 60 $W/ops.test -test.run 'TestMoE' 2>&1 | tail -3) > $R/parity.txt
  left 150 && (cd engine/ops && timeout 90 $W/ops.test -test.run '^$' -test.bench MoEMatVecLaunch -test.benchtime 200x 2>&1 | grep -E '^Benchmark|FAIL|panic') > $R/moe-launch.txt
fi
pack
wait $PB
for b in $MODELS; do
  [ -f $W/m/$b.gguf ] && [ "${NOPEER:-0}" != 1 ] || continue
  left 45 && timeout 60 $A bench $W/m/$b.gguf 512 128 3 > $R/peer-$b.json 2>>$R/peer-log.txt
  pack
done
for b in gpt-oss-20b-MXFP4_MOE qwen3-30b-a3b-Q4_K_M; do
  [ -f $W/m/$b.gguf ] && left 40 && timeout 40 $H bench -m $W/m/$b.gguf -p 0 -n 16 -r 1 --profile > $R/profile-$b.txt 2>&1
done
tail -c 3000 $R/peer-log.txt > $R/peer-log-tail.txt 2>/dev/null; rm -f $R/peer-log.txt
for b in $MODELS; do
  for h in $BINS; do echo "$h $b: $(grep -h -A1 -E '"test": "(pp512|tg128)"' $R/$h-$b.json 2>/dev/null | grep tokens_per | tr -d ' \n')"; done
  echo "peer $b: $(cat $R/peer-$b.json 2>/dev/null)"
done
cat $R/parity.txt $R/moe-launch.txt 2>/dev/null | head -5
pack
