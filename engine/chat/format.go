package chat

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// Format is how one model's conversations become prompts and where its
// turns end: its chat template, the built-in template to fall back on, its
// BOS and EOS texts, and its stop tokens.
type Format struct {
	// Template is the model's own template; nil if the file has none or
	// it does not compile (Notice says which).
	Template *Template
	// Fallback is the built-in template for the model's architecture and
	// vocabulary, used when Template is nil or fails.
	Fallback *Template
	// Notice says why Template is nil, "" if it is not.
	Notice string

	BOS, EOS string // bos_token and eos_token for the template

	// StopIDs are the tokens that end the assistant's turn: EOS, EOT and
	// EOM, and the end-of-turn token the template writes after an
	// assistant message. StopStrings are their texts, for a stream that
	// is matched as text.
	StopIDs     []int32
	StopStrings []string

	tok *tokenizer.Tokenizer
}

// FromGGUF is the Format of a model file: tokenizer.chat_template, and the
// built-in template chosen by general.architecture.
func FromGGUF(f *gguf.File, tok *tokenizer.Tokenizer) (*Format, error) {
	src, err := f.StringOr(tokenizer.KeyChatTemplate, "")
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return NewFormat(f.Architecture(), src, tok), nil
}

// NewFormat is the Format of a model of architecture arch whose template
// source is src ("" if it has none) and whose tokenizer is tok.
func NewFormat(arch, src string, tok *tokenizer.Tokenizer) *Format {
	f := &Format{tok: tok}
	if id := tok.BOS(); id != tokenizer.None {
		f.BOS = tok.Token(id)
	}
	if id := tok.EOS(); id != tokenizer.None {
		f.EOS = tok.Token(id)
	}
	name := builtinFor(arch, tok)
	fb, err := Parse("builtin:"+name, builtinSource(name))
	if err != nil {
		// The built-in templates are tested; this is a build defect.
		panic(fmt.Sprintf("chat: built-in template %s: %v", name, err))
	}
	f.Fallback = fb
	switch {
	case strings.TrimSpace(src) == "":
		f.Notice = fmt.Sprintf("the model has no %s; using the built-in %s template", tokenizer.KeyChatTemplate, name)
	default:
		t, err := Parse(tokenizer.KeyChatTemplate, src)
		if err != nil {
			f.Notice = fmt.Sprintf("the model's chat template does not compile (%v); using the built-in %s template", err, name)
		} else {
			f.Template = t
		}
	}
	f.StopIDs, f.StopStrings = f.stops()
	return f
}

// Prompt is a rendered conversation.
type Prompt struct {
	Text     string
	Template string // the name of the template that rendered it
	// Notice is set when the built-in template rendered it, and says why.
	Notice string
}

// Render renders r with the model's template, or with the built-in one if
// the model has none or its template fails; Prompt.Notice then says so.
// r.BOS and r.EOS default to the model's.
func (f *Format) Render(r Request) (Prompt, error) {
	if r.BOS == "" {
		r.BOS = f.BOS
	}
	if r.EOS == "" {
		r.EOS = f.EOS
	}
	notice := f.Notice
	if f.Template != nil {
		text, err := f.Template.Render(r)
		if err == nil {
			return Prompt{Text: text, Template: f.Template.Name()}, nil
		}
		why := err.Error()
		if te := (*TemplateError)(nil); errors.As(err, &te) {
			why = "it refused the conversation: " + te.Message
		}
		notice = fmt.Sprintf("the model's chat template failed (%s); using the built-in %s template", why, strings.TrimPrefix(f.Fallback.Name(), "builtin:"))
	}
	text, err := f.Fallback.Render(r)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Text: text, Template: f.Fallback.Name(), Notice: notice}, nil
}

// ToolSyntax is how the model writes tool calls: the syntax of the
// template Render uses (the model's, else the built-in one).
func (f *Format) ToolSyntax() ToolSyntax {
	if f.Template != nil {
		return ToolSyntaxFor(f.Template.Source())
	}
	return ToolSyntaxFor(f.Fallback.Source())
}

// Tokenize encodes a rendered prompt: special tokens in it are tokens, and
// BOS is added where the vocabulary asks for it unless the template already
// wrote it (llama.cpp does the same, to avoid a doubled BOS).
func (f *Format) Tokenize(prompt string) []int32 {
	addBOS := f.BOS == "" || !strings.HasPrefix(prompt, f.BOS)
	return f.tok.Encode(prompt, tokenizer.EncodeOptions{AddSpecial: addBOS, ParseSpecial: true})
}

// IsStop reports whether token id ends the assistant's turn.
func (f *Format) IsStop(id int32) bool { return slices.Contains(f.StopIDs, id) }

// endOfTurnTexts are end-of-turn tokens of known families (llama.cpp's
// list of end-of-generation tokens); one counts as a stop if the vocabulary
// has it as a special token and the template writes it.
var endOfTurnTexts = []string{
	"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<turn|>",
	"<|endoftext|>", "<|end_of_text|>", "<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
	"<|return|>", "<|call|>",
}

// probe marks the assistant's message when stops renders a conversation to
// see what the template writes after it.
const probe = "HEARTHPROBE"

// stops finds the stop tokens: the vocabulary's EOS, EOT and EOM, the
// special token the template writes right after an assistant message, and
// the known end-of-turn tokens the template uses.
func (f *Format) stops() ([]int32, []string) {
	var ids []int32
	add := func(id int32) {
		if id != tokenizer.None && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	v := f.tok.Vocab()
	add(v.EOS)
	add(v.EOT)
	add(v.EOM)

	tmpl := f.Template
	if tmpl == nil {
		tmpl = f.Fallback
	}
	for _, msgs := range [][]Message{
		{{Role: "user", Content: "hi"}, {Role: "assistant", Content: probe}},
		{{Role: "system", Content: "s"}, {Role: "user", Content: "hi"}, {Role: "assistant", Content: probe}},
	} {
		text, err := tmpl.Render(Request{Messages: msgs, BOS: f.BOS, EOS: f.EOS})
		i := strings.LastIndex(text, probe)
		if err != nil || i < 0 {
			continue
		}
		after := strings.TrimLeft(text[i+len(probe):], " \n")
		if toks := f.tok.Encode(after, tokenizer.EncodeOptions{ParseSpecial: true}); len(toks) > 0 {
			if t := f.tok.Type(toks[0]); t == tokenizer.Control || t == tokenizer.UserDefined {
				add(toks[0])
			}
		}
		break
	}
	for _, s := range endOfTurnTexts {
		if id, ok := f.tok.ID(s); ok && strings.Contains(tmpl.Source(), s) {
			if t := f.tok.Type(id); t == tokenizer.Control || t == tokenizer.UserDefined {
				add(id)
			}
		}
	}
	strs := make([]string, 0, len(ids))
	for _, id := range ids {
		if s := f.tok.Token(id); s != "" && !slices.Contains(strs, s) {
			strs = append(strs, s)
		}
	}
	return ids, strs
}
