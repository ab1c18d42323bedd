// Package chat renders a conversation into a model's prompt with the
// model's own chat template (tokenizer.chat_template, a Jinja template),
// the way transformers' apply_chat_template does, and knows where the
// model's turn ends.
//
// A Template is rendered with the variables transformers passes: messages,
// tools, documents, add_generation_prompt, bos_token and eos_token, plus
// raise_exception (a template refusing a conversation becomes a
// *TemplateError) and strftime_now (on the Request's clock), and Jinja2 is
// configured as transformers configures it: trim_blocks and lstrip_blocks
// on, loop controls, and a tojson that is Python's json.dumps with
// ensure_ascii off.
//
// A Format is a model's template together with a built-in fallback chosen
// by architecture and vocabulary (ChatML, Llama 2, Llama 3, Gemma, Phi-3).
// When the file has no template, or its template does not compile or fails
// on a conversation, the fallback renders the prompt and Prompt.Notice says
// why. Its stop tokens are the vocabulary's EOS, EOT and EOM and the
// end-of-turn token the template writes after an assistant message, found
// by rendering a probe conversation.
//
// # The Jinja engine
//
// Templates run on github.com/ardanlabs/jinja v1.8.0 (a pure-Go engine made
// for chat templates; later versions need a newer Go than Hearth's). It was
// chosen over github.com/nikolalohinski/gonja/v2 by rendering the real
// templates in shared/testdata/templates against Jinja2: out of the box
// ardanlabs/jinja matched 79 of 82 renders and gonja 76, and gonja cannot
// parse the conditional expressions in parentheses that the Qwen 3 and
// Nemotron 3 templates use ("'x' + (a if a else b)"), keeps its
// configuration in package variables, and logs through logrus.
//
// Three gaps of ardanlabs/jinja are closed here before a template reaches
// it, so that every render matches Jinja2 byte for byte (testdata/renders.json,
// made by testdata/make_renders.py with Jinja2 itself):
//
//   - whitespace control: it applies "-" markers and the trim_blocks and
//     lstrip_blocks rules to the nearest text even across other tags, so
//     Parse resolves all whitespace control with Jinja2's rules first and
//     hands over a template with no markers and no literal text
//     (resolveWhitespace);
//   - tojson: its filter is not json.dumps (2.0 prints as 2, U+2028 is
//     escaped, and with indent, which Llama 3.1 uses for tool definitions,
//     keys are sorted and <, >, & escaped), and filters cannot be replaced,
//     so Parse rewrites "x | tojson(…)" into a call of Hearth's own
//     (rewriteToJSON);
//   - nested braces: it ends an expression at the first "}}", even inside
//     a dict literal, so Parse writes "} }" there (splitBraces).
package chat
