package server

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/gguf"
)

// toolCaller is a model built to answer every chat with one tool call: the
// tiny Llama (the Llama 3 template, whose calls are a bare JSON object)
// with weights set so that greedy decoding after the generation prompt
// writes toolCallReply and then ends its turn. A random model cannot be
// made to call a tool; this one does by construction, so the tests see the
// server parse and return a real model's output.
const (
	toolCaller    = "tool-caller"
	toolCallReply = `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}`
)

// writeToolCaller writes toolCaller into dir. The weights make the model a
// bigram table: every attention output and FFN down projection is zero, so
// the residual stream is the token's embedding and the logits depend on the
// last token alone. The embedding of the prompt's last token (the "\n\n"
// that ends Llama 3's assistant header) is the unit vector e0, that of a
// token added to the vocabulary whose text is the whole call e1, every
// other token's e2; the LM head's row of the call token is 10·e0 and that
// of <|eot_id|> 10·e1, every other row zero. After the header the call
// token then leads by 10·√hidden = 160 logits (RMSNorm scales a unit
// vector by √hidden), and after it the end of the turn, whatever the
// sampler's temperature.
func writeToolCaller(dir string) error {
	p, ok := synth.PresetByName(llama)
	if !ok {
		return fmt.Errorf("no preset %s", llama)
	}
	base := filepath.Join(dir, "tool-caller-base.gguf")
	defer os.Remove(base)
	if err := synth.WriteFile(base, p, synth.Options{Quant: "F32", Seed: 7}); err != nil {
		return err
	}
	m, err := model.Load(base)
	if err != nil {
		return err
	}
	defer m.Close()
	prompt, err := m.Chat.Render(chat.Request{Messages: []chat.Message{{Role: "user", Content: "weather?"}}, AddGenerationPrompt: true})
	if err != nil {
		return err
	}
	ids := m.Chat.Tokenize(prompt.Text)
	header, eot := ids[len(ids)-1], m.Tokenizer.EOT()
	d, vocab := m.Config.Hidden, m.Config.Vocab
	call := int32(vocab) // the added token

	in, err := gguf.Open(base)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(dir, toolCaller+".gguf"))
	if err != nil {
		return err
	}
	defer out.Close()
	w := gguf.NewWriter(out)
	for _, kv := range in.Metadata() {
		v := kv.Value
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			tokens, err := in.Strings(kv.Key)
			if err != nil {
				return err
			}
			v = gguf.ArrayOf(append(tokens, toolCallReply))
		case "tokenizer.ggml.token_type":
			types, err := in.Int32s(kv.Key)
			if err != nil {
				return err
			}
			v = gguf.ArrayOf(append(types, 4)) // user-defined: written as its text
		}
		if err := w.Set(kv.Key, v); err != nil {
			return err
		}
	}
	unit := func(rows [][]float32, row int32, axis int, scale float32) {
		rows[row] = make([]float32, d)
		rows[row][axis] = scale
	}
	embed := make([][]float32, vocab+1)
	for i := range embed {
		unit(embed, int32(i), 2, 1)
	}
	unit(embed, header, 0, 1)
	unit(embed, call, 1, 1)
	head := make([][]float32, vocab+1)
	for i := range head {
		head[i] = make([]float32, d)
	}
	unit(head, call, 0, 10)
	unit(head, eot, 1, 10)
	flat := func(rows [][]float32) []byte {
		var b []byte
		for _, r := range rows {
			for _, x := range r {
				b = append(b, byte(math.Float32bits(x)), byte(math.Float32bits(x)>>8), byte(math.Float32bits(x)>>16), byte(math.Float32bits(x)>>24))
			}
		}
		return b
	}
	set := map[string][]byte{"token_embd.weight": flat(embed), "output.weight": flat(head)}
	for _, ti := range in.Tensors() {
		shape := ti.Shape
		if _, ok := set[ti.Name]; ok {
			shape = []uint64{uint64(d), uint64(vocab + 1)}
		}
		if err := w.AddTensor(ti.Name, ti.Type, shape); err != nil {
			return err
		}
	}
	for _, ti := range in.Tensors() {
		data, ok := set[ti.Name]
		if !ok {
			if data, err = in.Data(ti); err != nil {
				return err
			}
			if strings.HasSuffix(ti.Name, ".attn_output.weight") || strings.HasSuffix(ti.Name, ".ffn_down.weight") {
				data = make([]byte, len(data))
			} else if ti.Name == "output_norm.weight" {
				ones := make([][]float32, 1)
				ones[0] = make([]float32, d)
				for i := range ones[0] {
					ones[0][i] = 1
				}
				data = flat(ones)
			}
		}
		if err := w.WriteTensorBytes(ti.Name, data); err != nil {
			return err
		}
	}
	return w.Close()
}
