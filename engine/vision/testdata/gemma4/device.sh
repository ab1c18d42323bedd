# Makes the Gemma 4 vision fixture on the device machine (transformers
# 5.17, torch 2.11, torchvision): the Hugging Face folder, the four PNGs and
# expected.json (make_fixture.py), then llama.cpp's own converter twice
# (convert.py): the text GGUF and the mmproj GGUF, all under $OUT/g4v. Copy
# expected.json, make_fixture.log, the PNGs, gemma4-text.gguf and mmproj.gguf
# back beside this script. Carry .device/conv: convert_hf_to_gguf.py and
# gguf-py of a llama.cpp tree (as the gemma3 fixture's device.sh).
#
#   bash engine/vision/testdata/gemma4/device.sh
D=engine/vision/testdata/gemma4
G=$OUT/g4v
mkdir -p $G
python3 $D/make_fixture.py $G/model > $G/run.log 2>&1
echo fixture rc=$?
python3 $D/convert.py .device/conv $G/model $G/gemma4-text.gguf > $G/convert-text.log 2>&1
echo convert text rc=$?
python3 $D/convert.py .device/conv $G/model $G/mmproj.gguf --mmproj > $G/convert-mmproj.log 2>&1
echo convert mmproj rc=$?
tail -40 $G/run.log
tail -30 $G/convert-text.log
tail -60 $G/convert-mmproj.log
ls -la $G $G/model
