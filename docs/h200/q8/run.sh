# Issue 23, integer decode products (ops.MatVecQ8): Hearth with 8-bit and
# with f32 decode activations beside the peer (llama.cpp ec98e2002, ggml's
# CUDA backend), the same synth files, one lease on the H200.
#
# Inputs, built here and carried in the ignored .device folder:
#   .device/debs/, .device/env.sh   as docs/h200/one-graph/run.sh says
#   .device/hearth-q8.xz            go build -ldflags "-s -w" ., xz
#   .device/peer/                   ../shared/peer's CMakeLists.txt and source
#                                   tarball, and its anchor.cpp with ANCHOR_DEPTH=D
#                                   (D tokens of history prefilled, untimed,
#                                   before each timed decode) and prompts
#                                   longer than 512 as one batch of 512-token
#                                   ubatches (the diff is in docs/performance.md)
# Run: device run with carry [".device"], command `bash docs/h200/q8/run.sh`.
source .device/env.sh
W=/root/w; mkdir -p $W/m $W/src; R=$OUT/r; mkdir -p $R
# Packed after each phase, so a run cut short still brings back what it did.
pack() { (cd $OUT && tar czf results.tgz r); }
( tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src && cp .device/peer/anchor.cpp $W/src/ &&
  cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build $W/build -j14 >/dev/null ) > $R/peer-build.txt 2>&1 &
PB=$!
xz -T4 -dc .device/hearth-q8.xz > $W/hearth-q8
chmod +x $W/hearth-q8
H=$W/hearth-q8
M="llama-3.1-8b-Q8_0 llama-3.1-8b-Q4_K_M llama-3.2-1b-Q4_K_M"
for b in $M; do
  $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > /dev/null
  timeout 90 $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 3 --json > $R/hearth-$b.json 2>>$R/log.txt
  timeout 90 $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 3 --json --f32-activations > $R/hearth-f32-$b.json 2>>$R/log.txt
  pack
done
timeout 60 $H bench -m $W/m/llama-3.1-8b-Q4_K_M.gguf -p 0 -n 16 -r 1 --profile > $R/profile-8b.txt 2>&1
timeout 60 $H bench -m $W/m/llama-3.2-1b-Q4_K_M.gguf -p 0 -n 16 -r 1 --profile > $R/profile-1b.txt 2>&1
pack
wait $PB
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
for b in $M; do
  timeout 60 $A bench $W/m/$b.gguf 512 128 3 > $R/peer-$b.json 2>>$R/peer-log.txt
done
pack
for b in llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M; do
  timeout 90 $H bench -m $W/m/$b.gguf -p 0 -n 64 -d 4096 -r 1 --ctx 4300 --json > $R/hearth4k-$b.json 2>>$R/log.txt
  ANCHOR_DEPTH=4096 timeout 60 $A bench $W/m/$b.gguf 0 64 1 > $R/peer4k-$b.json 2>>$R/peer-log.txt
done
tail -c 3000 $R/peer-log.txt > $R/peer-log-tail.txt; rm -f $R/peer-log.txt
cat $R/hearth*.json $R/peer*.json | grep -E '"tokens_per_second"|"test"|pp_best|tg_best' | head -60
pack
