# Issue 21: the vision towers' time on the GPU, and where the Gemma 3
# SigLIP tower's goes. The
# tower at the real shape (27 blocks of 1152, 4096 patches), then its two
# kinds of work alone at the same shapes: attention (16 heads of 72 over
# 4096 positions, bidirectional) and the F16 products (q|k|v, o, up and
# down of 1152 and 4304 over 4096 rows), each with the kernel the tower
# runs. Inputs: .device/vision.test.xz and .device/ops.test.xz (go test -c
# of ./engine/vision and ./engine/ops at the commit measured), .device/debs.
# Run after docs/h200/parallel/run.sh, or alone:
#   bash docs/h200/vision/run.sh
source docs/h200/one-graph/env.sh
W=/root/w; mkdir -p $W; R=$OUT/vision; mkdir -p $R
for b in vision.test ops.test; do xz -T4 -dc .device/$b.xz > $W/$b & done; wait
chmod +x $W/*.test
(cd engine/vision && HEARTH_VISION_PRESET=gemma-3-4b-vision timeout 120 $W/vision.test -test.run '^$' -test.bench GPUTower -test.benchtime 10x -test.count 2) > $R/tower.txt 2>&1
# Gemma 4's towers at 896×896 (a 48×48-patch grid, 256 tokens): E2B's 16
# blocks of 768 with clamps, the 31B's 27 of 1152.
for p in gemma-4-e2b-vision gemma-4-31b-vision; do
  (cd engine/vision && HEARTH_VISION_PRESET=$p timeout 100 $W/vision.test -test.run '^$' -test.bench GPUTower -test.benchtime 10x -test.count 2) > $R/tower-$p.txt 2>&1
done
(cd engine/ops && timeout 120 $W/ops.test -test.run '^$' -test.bench 'AttentionPrefill/siglip' -test.benchtime 10x) > $R/attention.txt 2>&1
(cd engine/ops && timeout 120 $W/ops.test -test.run '^$' -test.bench MatMulSigLIP -test.benchtime 10x) > $R/matmul.txt 2>&1
cat $R/*.txt
