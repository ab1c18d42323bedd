package chat

import (
	"embed"

	"github.com/hearthstudio/hearth/engine/arch"
)

// The built-in templates, for files without tokenizer.chat_template or
// whose template fails. Each is the plain form of one family's format,
// written for Hearth; testdata/renders.json holds Jinja2's renders of them.
//
//go:embed builtin/*.jinja
var builtinFS embed.FS

// builtinSource is the source of built-in template name, "" if none.
func builtinSource(name string) string {
	b, err := builtinFS.ReadFile("builtin/" + name + ".jinja")
	if err != nil {
		return ""
	}
	return string(b)
}

// BuiltinTemplate is the Jinja source of the built-in template called name
// ("llama3", "llama2", "gemma", "gemma4", "chatml", "phi3"), or "" if there is none,
// for tools that write a model file with a template of its family.
func BuiltinTemplate(name string) string { return builtinSource(name) }

// vocabulary is what choosing a built-in template needs to know of the
// tokenizer: whether a special token is in it.
type vocabulary interface {
	ID(text string) (int32, bool)
}

// builtinFor picks the built-in template for a model: the one its
// architecture's record (engine/arch) names where the architecture decides
// the format, otherwise by the turn markers its vocabulary has ("llama" is
// both Llama 2 and Llama 3, and many fine-tunes of any architecture use
// ChatML), then the record's fallback. ChatML is the last resort.
func builtinFor(archName string, vocab vocabulary) string {
	has := func(s string) bool {
		if vocab == nil {
			return false
		}
		_, ok := vocab.ID(s)
		return ok
	}
	a, known := arch.Lookup(archName)
	if known && a.ChatTemplate != "" {
		return a.ChatTemplate
	}
	switch {
	case has("<|start_header_id|>") && has("<|eot_id|>"):
		return "llama3"
	case has("<|im_start|>") && has("<|im_end|>"):
		return "chatml"
	case has("<start_of_turn>") && has("<end_of_turn>"):
		return "gemma"
	case has("<|turn>") && has("<turn|>"):
		return "gemma4"
	case has("<|user|>") && has("<|end|>"):
		return "phi3"
	case has("[INST]") || archName == "mistral":
		return "llama2"
	case known && a.ChatFallback != "":
		return a.ChatFallback
	}
	return "chatml"
}
