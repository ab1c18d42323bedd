# Issue 19, second call (not run yet: the 2026-12-07 session's device time ran out): transformers' float64 logits of the gemma4 fixture
# (f64_logits.py), and the Gemma 4 tokenizer references of
# engine/tokenizer/testdata/make_gemma4_refs.py with transformers and
# llama.cpp (its source in the ignored .g4ref/llama.tar.gz, Mesh-LLM/llama.cpp
# 092b66d, built for the CPU there).
# Run: device run with carry [".g4ref"], command `bash docs/h200/gemma4/refs.sh`.
R=$OUT/r; mkdir -p $R
pack() { (cd $OUT && tar czf results.tgz r); }
PYTHONUNBUFFERED=1 timeout 90 python3 docs/h200/gemma4/f64_logits.py engine/model/testdata/hf/gemma4 $R/f64 > $R/f64.log 2>&1
echo "f64 rc=$?" >> $R/f64.log
cat $R/f64.log
pack
mkdir -p /root/w/llama && tar xzf .g4ref/llama.tar.gz -C /root/w/llama
(cd engine/tokenizer && PYTHONUNBUFFERED=1 timeout 330 python3 testdata/make_gemma4_refs.py $R/tok \
  --llama-cpp /root/w/llama --llama-cpp-rev 092b66d019b8ef8e833a38eca117f31738d31496 --build /root/w/llbuild) > $R/tok.log 2>&1
echo "refs rc=$?" >> $R/tok.log
tail -5 $R/tok.log
pack
