# Issue 19: Gemma 4's transformers fixture (engine/model/testdata/hf/gemma4)
# and the E2B shape's speed on the H200 through Vulkan. The peer
# (llama.cpp ec98e2002) has no gemma4 architecture, so there is no ratio:
# Hearth's figures and the weight bytes a decoded token reads.
#
# Inputs, built here and carried in the ignored .device folder:
#   .device/debs/, .device/env.sh   as docs/h200/one-graph/run.sh says
#   .device/hearth.xz               go build -ldflags "-s -w" ., xz
# Run: device run with carry [".device"], command `bash docs/h200/gemma4/run.sh`.
source .device/env.sh
W=/root/w; mkdir -p $W/m; R=$OUT/r; mkdir -p $R
# Packed after each phase, so a run cut short still brings back what it did.
pack() { (cd $OUT && tar czf results.tgz r); }
python3 -c 'import torch, transformers, tokenizers; print(torch.__version__, transformers.__version__, tokenizers.__version__)' > $R/versions.txt 2>&1
PYTHONUNBUFFERED=1 timeout 180 python3 engine/model/testdata/hf/make_fixtures.py $R/fx gemma4 > $R/fixtures.log 2>&1
echo "make_fixtures rc=$?" >> $R/fixtures.log
# Hugging Face's tokenizations of engine/tokenizer's tiny Gemma 4
# vocabulary (llama.cpp's were made on the dev machine).
PYTHONUNBUFFERED=1 timeout 60 python3 engine/tokenizer/testdata/make_gemma4_refs.py $R/tok > $R/tok.log 2>&1
echo "make_gemma4_refs rc=$?" >> $R/tok.log
pack
xz -T4 -dc .device/hearth.xz > $W/hearth
chmod +x $W/hearth
H=$W/hearth
$H info > $R/info.txt 2>&1
b=gemma-4-e2b-Q4_K_M
timeout 180 $H synth --preset ${b%-*} --quant ${b##*-} -o $W/m/$b.gguf --seed 1 > $R/synth-$b.txt 2>&1
ls -l $W/m/$b.gguf >> $R/synth-$b.txt
timeout 100 $H bench -m $W/m/$b.gguf -p 512 -n 128 -r 2 --json > $R/hearth-$b.json 2>>$R/log.txt
pack
timeout 60 $H bench -m $W/m/$b.gguf -p 0 -n 128 -r 2 --json --f32-activations > $R/hearth-f32-$b.json 2>>$R/log.txt
timeout 40 $H bench -m $W/m/$b.gguf -p 0 -n 16 -r 1 --profile > $R/profile-e2b.txt 2>&1
cat $R/hearth*.json | grep -E '"tokens_per_second"|"test"' | head -40
pack
