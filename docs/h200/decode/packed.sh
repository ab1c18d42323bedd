# Issue 23, decode on dot4I8Packed, in one lease: llama.cpp's CUDA build of
# ../shared/peer compiles while hearth runs pp512/tg128 on the issue's three
# synth files, alternated: hearth as built (integer products on
# dot4I8Packed), the same binary with HEARTH_Q8_DOT=swar (two products a u32
# multiply, decode as before), with HEARTH_Q8_DECODE_Q8_0=1 on the Q8_0 file
# (Q8_0 on 8-bit activations), with HEARTH_Q8_FUSE_WORKGROUPS=4096, and
# with .device/hearth-base.xz (d0f0ef5, the last commit on the old
# binding, github.com/cogentcore/webgpu v0.23.0); then the peer.
# Inputs: .device/debs, .device/hearth.xz, .device/hearth-base.xz,
# .device/peer (../shared/peer as it is).
#   LIMIT=570 bash docs/h200/decode/packed.sh
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W/m $W/src; R=$OUT/r; mkdir -p $R
END=$((SECONDS + ${LIMIT:-570}))
left() { [ $((END - SECONDS)) -gt $1 ]; }
( tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src && cp .device/peer/anchor.cpp $W/src/ &&
  cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build $W/build -j10 >/dev/null ) > $R/peer-build.txt 2>&1 &
PB=$!
xz -T4 -dc .device/hearth.xz > $W/hearth && chmod +x $W/hearth
xz -T4 -dc .device/hearth-base.xz > $W/hearth-base && chmod +x $W/hearth-base
H=$W/hearth
$H info > $R/hearth-info.txt 2>&1
FILES="llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M llama-3.1-8b-Q8_0"
for b in $FILES; do
  [ -f $W/m/$b.gguf ] || timeout 150 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > /dev/null 2>>$R/log.txt
done
bench() { # name, env..., then binary and args
  local name=$1; shift
  left 50 && timeout 60 env "$@" --json >> $R/$name.json 2>>$R/log.txt
}
for b in $FILES; do
  M="-m $W/m/$b.gguf"
  for i in 1 2; do
    bench packed-$b X=1 $H bench $M -p 512 -n 128 -r 3
    bench swar-$b HEARTH_Q8_DOT=swar $H bench $M -p 0 -n 128 -r 3
    bench base-$b X=1 $W/hearth-base bench $M -p 512 -n 128 -r 3
    [ ${b##*-} = Q8_0 ] && bench q80-$b HEARTH_Q8_DECODE_Q8_0=1 $H bench $M -p 0 -n 128 -r 3
    [ ${b##*-} = Q8_0 ] && bench q80swar-$b HEARTH_Q8_DECODE_Q8_0=1 HEARTH_Q8_DOT=swar $H bench $M -p 0 -n 128 -r 3
    bench fuse-$b HEARTH_Q8_FUSE_WORKGROUPS=4096 $H bench $M -p 0 -n 128 -r 3
  done
done
if ! left 100; then kill $PB 2>/dev/null; fi
wait $PB
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
for b in $FILES; do
  left 25 && timeout 60 $A bench $W/m/$b.gguf 512 128 3 > $R/peer-$b.json 2>>$R/log.txt
done
for f in $R/*.json; do echo "$(basename $f): $(grep -hoE '"(test|tokens_per_second|pp_median|tg_median)": *"?[a-z0-9.]*' $f | tr '\n' ' ')"; done
tail -5 $R/log.txt $R/peer-build.txt
