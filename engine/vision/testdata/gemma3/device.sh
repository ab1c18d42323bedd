# Makes the Gemma 3 vision fixture on the device machine (transformers 5.17,
# torch 2.11): the Hugging Face folder, the three PNGs and expected.json
# (make_fixture.py), then llama.cpp's own converter twice (convert.py): the
# text GGUF and the mmproj GGUF, all under $OUT/g3v. Copy expected.json,
# make_fixture.log, the three PNGs, gemma3-text.gguf and mmproj.gguf back
# beside this script. Carry .device/conv: convert_hf_to_gguf.py and gguf-py
# of a llama.cpp tree (as engine/model/testdata/embeddinggemma/device.sh).
#
#   bash engine/vision/testdata/gemma3/device.sh
D=engine/vision/testdata/gemma3
G=$OUT/g3v
mkdir -p $G
python3 $D/make_fixture.py $G/model > $G/run.log 2>&1
echo fixture rc=$?
python3 $D/convert.py .device/conv $G/model $G/gemma3-text.gguf > $G/convert-text.log 2>&1
echo convert text rc=$?
python3 $D/convert.py .device/conv $G/model $G/mmproj.gguf --mmproj > $G/convert-mmproj.log 2>&1
echo convert mmproj rc=$?
tail -40 $G/run.log
tail -30 $G/convert-text.log
tail -45 $G/convert-mmproj.log
ls -la $G $G/model
