// Package tokenizer turns text into a model's token ids and back, built
// only from the tokenizer metadata of its GGUF file (tokenizer.ggml.*), and
// exactly as the model's own tokenizer does.
//
// Three families cover the GGUF models in use:
//
//   - "llama": SentencePiece BPE (Llama 1/2, Mistral, Gemma 1–3). The text
//     is normalized as sentencepiece does with the identity rules (spaces
//     become "▁", an optional "▁" prefix (tokenizer.ggml.add_space_prefix;
//     where a file lacks it, off for Gemma architectures and on for the
//     others, as their own tokenizers do), optional removal of extra
//     spaces, invalid UTF-8 bytes become U+FFFD), cut into characters and
//     user-defined symbols, and adjacent pieces merge best score first;
//     a piece the vocabulary lacks falls back to its bytes (<0x0A>), or to
//     <unk>, a run of which collapses into one, where the vocabulary has no
//     byte tokens.
//   - "gpt2": byte-level BPE (GPT-2, Llama 3, Qwen, Mistral Tekken, …). A
//     pre-tokenizer named by tokenizer.ggml.pre splits the text into words
//     with the regular expressions llama.cpp uses for that name (in their
//     original form where llama.cpp had to rewrite one), each word's UTF-8
//     bytes map to GPT-2's printable stand-ins, and the merges of
//     tokenizer.ggml.merges apply lowest rank first. Llama 3 and Tekken
//     take a word that is in the vocabulary whole (Hugging Face's
//     ignore_merges).
//   - "gemma4": Gemma 4's BPE, as llama.cpp reads it. Spaces become "▁",
//     the text is cut only into runs of newlines and runs of anything
//     else, each run starts as its characters' own tokens (raw UTF-8, no
//     byte stand-ins) and merges by tokenizer.ggml.merges, lowest rank
//     first; a run of newlines that is itself a token is taken whole, and
//     a piece left that is no token falls back to its <0xXX> byte tokens.
//     BOS is always added, and the end-of-generation tokens llama.cpp
//     names (<turn|>, <|tool_response>, <eos>, …) are control tokens.
//
// Special tokens: user-defined tokens are always matched whole in text, as
// the reference libraries do; control tokens (BOS, "<|eot_id|>",
// "<start_of_turn>") only when the caller sets EncodeOptions.ParseSpecial,
// so that text a user typed cannot forge a turn boundary. Decoding drops
// control tokens unless asked (DecodeOptions.Special), and a Decoder
// streams text token by token, holding back the bytes of a character that
// spans tokens so that every piece it returns is valid UTF-8.
//
// The reference is what the models' own tokenizer libraries produce:
// sentencepiece's encode for "llama" and Hugging Face tokenizers' for
// "gpt2"; for "gemma4", llama.cpp's, the tokenizer its files are made for
// (testdata/refs-gemma4.json, made by make_gemma4_refs.py with llama.cpp's
// converter and tokenizer, and with Hugging Face tokenizers, which agree on
// its texts).
// The tests convert the reference vocabularies in shared/testdata
// to GGUF metadata as llama.cpp's converter does (FromSentencePiece,
// FromHFTokenizerJSON, Vocab.WriteGGUF), read the file back, and match the
// reference tokenizations id for id: shared/testdata/tokenizer/refs-*.json,
// and testdata/refs-spm.json and refs-bpe.json.gz, which the scripts beside
// them made with sentencepiece and Hugging Face tokenizers (special tokens
// in text, invalid UTF-8, unknown characters, and a small BPE trained with
// each pre-tokenizer the shared data has no vocabulary for).
//
// # Regular expressions
//
// The pre-tokenizer patterns need lookahead (\s+(?!\S) keeps the last space
// of a run for the next word) and Unicode classes (\p{L}, \p{N}, \p{Lu}),
// and the patterns are written in the syntax of the models' tokenizer.json
// (Oniguruma's). Go's regexp has the classes but no lookaround, so the
// patterns run on github.com/dlclark/regexp2, a port of .NET's backtracking
// engine: it takes the patterns unchanged, including (?i:…) groups and
// lookahead, and its \s and \p{…} follow Unicode as Oniguruma's do.
// llama.cpp rewrote some patterns because C++'s std::regex lacks those
// features; this package runs the originals (Tekken's \p{Lu}/\p{Ll} classes,
// Llama 3's case-insensitive contractions).
//
// Backtracking is slow, though: it took three quarters of the time of
// encoding a long text. The patterns of GPT-2 and Llama 3 / Qwen 2, which
// nearly every BPE model uses, also have hand-written matchers
// (pretokenize_fast.go), with regexp2 as their test oracle on the reference
// texts, random strings of the characters the patterns distinguish, and a
// fuzz target (FuzzFastPreTokenizers). Every other pattern runs on regexp2.
package tokenizer
