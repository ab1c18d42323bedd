# Run 4 (final): the peer (llama.cpp CUDA) built and measured beside hearth-base (the tree
# before this session's speed work) and hearth-new (main), same files, one lease.
source .device/env.sh
( mkdir -p $W/src && tar xJf .device/peer/llama.cpp-ec98e2002-src.tar.xz -C $W/src && cp .device/peer/anchor.cpp $W/src/  # ../shared/peer/anchor.cpp with ANCHOR_DEPTH (docs/performance.md) &&
  cmake -S $W/src -B $W/build -DANCHOR_CUDA=ON -DANCHOR_VULKAN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  cmake --build $W/build -j14 >/dev/null ) > $OUT/peer-build.txt 2>&1 &
PB=$!
( synth llama-3.2-1b Q4_K_M; synth llama-3.1-8b Q4_K_M; synth llama-3.1-8b Q8_0 ) > /dev/null 2>&1
R=$OUT/r; mkdir -p $R
for b in llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M llama-3.1-8b-Q8_0; do
  for v in base new; do
    timeout 90 .device/hearth-$v bench -m $W/m/$b.gguf -p 512 -n 128 -r 3 --json > $R/$v-$b.json 2>>$R/log.txt
  done
  timeout 90 .device/hearth-new bench -m $W/m/$b.gguf -p 4096 -n 64 -d 4096 -r 1 --ctx 8300 --json > $R/new4k-$b.json 2>>$R/log.txt
done
timeout 60 .device/hearth-new bench -m $W/m/llama-3.1-8b-Q4_K_M.gguf -p 0 -n 16 -r 1 --profile > $R/profile-8b.txt 2>&1
timeout 40 .device/hearth-new bench -m $W/m/llama-3.2-1b-Q4_K_M.gguf -p 0 -n 16 -r 1 --profile > $R/profile-1b.txt 2>&1
wait $PB
A="env LD_LIBRARY_PATH=$W/build/bin:$LD_LIBRARY_PATH $W/build/bin/anchor"
for b in llama-3.2-1b-Q4_K_M llama-3.1-8b-Q4_K_M llama-3.1-8b-Q8_0; do
  timeout 60 $A bench $W/m/$b.gguf 512 128 3 > $R/peer-$b.json 2>>$R/peer-log.txt
  ANCHOR_DEPTH=4096 timeout 60 $A bench $W/m/$b.gguf 4096 64 1 > $R/peer4k-$b.json 2>>$R/peer-log.txt
done
tail -c 3000 $R/peer-log.txt > $R/peer-log-tail.txt; rm -f $R/peer-log.txt
cd $OUT && tar czf results.tgz r peer-build.txt
