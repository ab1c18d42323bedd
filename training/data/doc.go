// Package data turns a fine-tuning dataset into training sequences: token
// ids, the token to predict at each position (-1 where there is no loss),
// and where each packed sample starts.
//
// # Formats
//
// A JSONL file holds one JSON object per line (blank lines are skipped, a
// UTF-8 BOM is accepted), each in one of the formats Hugging Face TRL reads:
//
//   - {"messages": [{"role": "user", "content": "…"}, …]}: a conversation,
//     rendered with the model's own chat template, with the loss on the
//     assistant turns only. An optional "tools" list is passed to the
//     template.
//   - {"conversations": [{"from": "human", "value": "…"}, …]}: ShareGPT's
//     shape of the same (human→user, gpt→assistant, system, tool).
//   - {"prompt": "…", "completion": "…"}: the loss on the completion and the
//     EOS after it. Both may instead be lists of messages (TRL's
//     conversational prompt/completion): the loss is then on the assistant
//     messages of the completion.
//   - {"text": "…"}: the loss on every token, and an EOS after the text.
//
// A .txt file is one text: BOS, the whole file, EOS, cut into pieces of the
// sequence length, each piece's last position predicting the next piece's
// first token.
//
// # Assistant-only loss
//
// The assistant's tokens are found the way TRL and axolotl find them, by
// rendering incrementally: for assistant message i, A is the render of the
// messages before it with the generation prompt, B the render up to and
// including it. B extends A, and what it adds (the content, and the
// end-of-turn token as the template writes it) is trained. Tokens after the
// first stop token of that span (ChatML's "\n" after <|im_end|>) are not:
// the model never writes them, the next turn's prompt does. A sample ends
// with its last trained token.
//
// Special tokens written in a dataset's text ("<|im_end|>") are read as
// those tokens, as Hugging Face's tokenizer does and as the model's prompt
// is tokenized at inference.
//
// Some templates render an earlier assistant turn differently from the last
// one (Qwen 3 drops the thinking of turns before the last user message), so
// the render of the conversation up to turn i is not a prefix of the whole.
// Such a conversation becomes one sample per assistant turn, each the render
// up to that turn with the loss on that turn only: exactly what the model
// sees when it writes that turn at inference. A template whose generation
// prompt is not a prefix of its rendered assistant turn is an error.
//
// Spans are found in characters and mapped to tokens by tokenizing each
// prefix: where a token would cross a boundary (a prompt that ends inside a
// word its completion finishes), the sample is instead tokenized segment by
// segment, as inference would see it (the prompt encoded alone, then the
// tokens the model writes), and Report.Resegmented counts it.
//
// # Sequences
//
// A sample longer than the sequence length is truncated to it (TRL's
// default), or skipped with Options.DropLong; either way Report counts it
// and names the first lines. A sample with no trained token (a conversation
// without an assistant turn, or one truncated before it) is skipped and
// counted, not an error.
//
// Samples are packed into sequences once, best fit by decreasing length: a
// sample is never split across sequences (one longer than the sequence
// length was truncated first), and the rest of each sequence is padding with
// no loss. Sequence.Bounds records where each sample starts so a trainer can
// keep attention within a sample (a block-diagonal causal mask, positions
// restarting at each sample); a trainer with one causal mask per sequence
// attends across packed samples, as most packers do. The loss never crosses
// a boundary either way: a sample's last position has target -1.
//
// The validation split is chosen by source line with a seeded permutation,
// so every sample of one conversation is on the same side. Training
// sequences are visited in a seeded permutation per epoch; a Position
// (seed, epoch, index and the dataset's fingerprint) saved in a checkpoint
// and given to Seek continues with the same next batch.
package data
