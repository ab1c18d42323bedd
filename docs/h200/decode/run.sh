# Issue 23 beside the peer, in one lease: fuse.sh (decode with and
# without the products quantizing their own input, profiles, kernels)
# while llama.cpp's CUDA build of ../shared/peer compiles, then pp512 and
# tg128 of hearth (its default) and of the peer on the three
# files; with .device/hearth-base.xz (a build of d0f0ef5, the last commit
# on the old binding, github.com/cogentcore/webgpu v0.23.0) the same for
# it, alternated with hearth, which is what the binding switch costs.
# Inputs: .device/debs, .device/hearth.xz, .device/peer (../shared/peer as
# it is), optionally .device/ops.test.xz (the kernels) or
# .device/hearth-base.xz (both do not fit one call's 64 MiB).
#   LIMIT=560 bash docs/h200/decode/run.sh
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m $W/src; R=$OUT/r; mkdir -p $R
END=$((SECONDS + ${LIMIT:-560}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
( tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src && cp .device/peer/anchor.cpp $W/src/ &&
  cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build $W/build -j12 >/dev/null ) > $R/peer-build.txt 2>&1 &
PB=$!
bash docs/h200/decode/fuse.sh
H=$W/hearth
FILES="llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M llama-3.1-8b-Q8_0"
[ -f .device/hearth-base.xz ] && xz -T8 -dc .device/hearth-base.xz > $W/hearth-base && chmod +x $W/hearth-base
for b in $FILES; do
  left 60 && timeout 90 $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 3 --json > $R/both-hearth-$b.json 2>>$R/log.txt
  [ -x $W/hearth-base ] && left 60 && timeout 90 $W/hearth-base bench -m $W/m/$b.gguf -p 512 -n 128 -r 3 --json > $R/both-base-$b.json 2>>$R/log.txt
  [ -x $W/hearth-base ] && left 60 && timeout 90 $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 3 --json > $R/both-hearth2-$b.json 2>>$R/log.txt
done
if ! left 90; then kill $PB 2>/dev/null; fi
wait $PB
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
for b in $FILES; do
  left 30 && timeout 90 $A bench $W/m/$b.gguf 512 128 3 > $R/both-peer-$b.json 2>>$R/log.txt
done
grep -h . $R/both-*.json | head -40; tail -3 $R/log.txt $R/peer-build.txt
