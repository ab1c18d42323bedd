# Makes the EmbeddingGemma fixture on the device machine (transformers
# 5.17, torch 2.11): the Hugging Face folder and expected.json
# (make_fixture.py), then the GGUF by llama.cpp's own converter
# (convert.py), all under $OUT/eg; copy expected.json, make_fixture.log,
# embeddinggemma.gguf and the model/ folder (which hearth import reads in
# app's test; git keeps no empty 4_Normalize/) back beside this script. Carry .device/conv: convert_hf_to_gguf.py and
# gguf-py of Mesh-LLM/llama.cpp 092b66d01 (git archive HEAD
# convert_hf_to_gguf.py gguf-py of its mirror).
#
#   bash engine/model/testdata/embeddinggemma/device.sh
D=engine/model/testdata/embeddinggemma
mkdir -p $OUT/eg
python3 $D/make_fixture.py $OUT/eg/model > $OUT/eg/run.log 2>&1
echo fixture rc=$?
python3 $D/convert.py .device/conv $OUT/eg/model $OUT/eg/embeddinggemma.gguf > $OUT/eg/convert.log 2>&1
echo convert rc=$?
tail -30 $OUT/eg/run.log
tail -12 $OUT/eg/convert.log
ls -la $OUT/eg
