# Issue 21: which attention tile suits the vision towers' long
# bidirectional attention. The sweep of every tile at the towers' shapes
# (BenchmarkAttentionPrefill), then each tower with the dispatcher's tile
# and with the two fastest of the SigLIP sweep (docs/performance.md, "Image
# input"). Inputs: .device/vision.test.xz and .device/ops.test.xz (go test
# -c of ./engine/vision and ./engine/ops at the commit measured),
# .device/debs.
#   bash docs/h200/vision/tiles.sh
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W; R=$OUT/tiles; mkdir -p $R
for b in vision.test ops.test; do xz -T4 -dc .device/$b.xz > $W/$b & done; wait
chmod +x $W/*.test
(cd engine/ops && timeout 150 $W/ops.test -test.run '^$' -test.bench 'AttentionPrefill/(gemma4|siglip)' -test.benchtime 10x) > $R/attention.txt 2>&1
for p in gemma-3-4b-vision gemma-4-e2b-vision gemma-4-31b-vision; do
  for tile in "" 16x16 32x16; do
    (cd engine/vision && HEARTH_VISION_PRESET=$p HEARTH_VISION_TILE=$tile timeout 60 $W/vision.test -test.run '^$' -test.bench GPUTower -test.benchtime 10x) > $R/tower-$p-${tile:-default}.txt 2>&1
  done
done
grep -h "Benchmark\|FAIL" $R/*.txt
