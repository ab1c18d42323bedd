package data

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/chat"
)

// conversation is a JSONL line of messages.
func conversation(t testing.TB, msgs ...chat.Message) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestChatLossOnAssistantTurnsOnly(t *testing.T) {
	msgs := []chat.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Where is the hearth?"},
		{Role: "assistant", Content: "In the first room of the house."},
		{Role: "user", Content: "And the oven?"},
		{Role: "assistant", Content: "The baker lit it before the sun was up."},
		{Role: "user", Content: "A question the data leaves unanswered."},
	}
	for _, tc := range []struct {
		preset, eot string
	}{
		{"tiny-llama", "<|eot_id|>"},
		{"tiny-qwen3", "<|im_end|>"},
		{"tiny-gemma3", "<end_of_turn>"},
		{"tiny-phi3", "<|end|>"},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			tok, f := tinyModel(t, tc.preset)
			d, rep, err := readString(t, "chat.jsonl", conversation(t, msgs...), tok, f, Options{SeqLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			// Every boundary of these templates falls on a token edge,
			// so the sample is the whole render's tokenization.
			if rep.Samples != 1 || rep.Skipped != 0 || rep.Truncated != 0 || rep.PerTurn != 0 || rep.Resegmented != 0 {
				t.Fatalf("report: %+v", rep)
			}
			s := d.Train.Samples[0]
			got := trainedText(t, tok, s)
			// Each assistant turn is trained on its content and the
			// end-of-turn token the template writes after it, nothing
			// else: not the system prompt, the users' turns, the
			// headers, nor the newline after the end of turn.
			want := []string{msgs[2].Content + tc.eot, msgs[4].Content + tc.eot}
			if !slices.Equal(got, want) {
				t.Errorf("trained text %q, want %q", got, want)
			}
			if rep.TrainedTokens != s.Trained() {
				t.Errorf("report says %d trained tokens, the sample has %d", rep.TrainedTokens, s.Trained())
			}
			// The sample is the model's own tokenization of the rendered
			// conversation, up to the end of the last assistant turn.
			p, err := f.Render(chat.Request{Messages: msgs[:5]})
			if err != nil {
				t.Fatal(err)
			}
			full := f.Tokenize(p.Text)
			if !slices.Equal(s.Tokens, full[:len(s.Tokens)]) {
				t.Errorf("sample tokens %q\nare not a prefix of the render's %q", decode(t, tok, s.Tokens), decode(t, tok, full))
			}
			if s.Targets[len(s.Targets)-1] != -1 {
				t.Errorf("the last position has target %d, want -1", s.Targets[len(s.Targets)-1])
			}
			if !f.IsStop(s.Tokens[len(s.Tokens)-1]) {
				t.Errorf("the sample ends with %q, not the end of the last turn", decode(t, tok, s.Tokens[len(s.Tokens)-1:]))
			}
		})
	}
}

func TestChatSingleTurnNoSystemAndToolMessages(t *testing.T) {
	tok, f := tinyModel(t, "tiny-qwen3")
	lines := []string{
		conversation(t, chat.Message{Role: "user", Content: "Hi"}, chat.Message{Role: "assistant", Content: "Hello."}),
		`{"messages": [{"role": "user", "content": "Weather?"},` +
			`{"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]},` +
			`{"role": "tool", "name": "weather", "content": "rain"},` +
			`{"role": "assistant", "content": [{"type": "text", "text": "It rains."}]}]}`,
	}
	d, rep, err := readString(t, "c.jsonl", strings.Join(lines, "\n"), tok, f, Options{SeqLen: 128, Valid: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Samples != 2 {
		t.Fatalf("%d samples, want 2", rep.Samples)
	}
	if got := trainedText(t, tok, d.Train.Samples[0]); !slices.Equal(got, []string{"Hello.<|im_end|>"}) {
		t.Errorf("line 1 trains on %q", got)
	}
	// ChatML writes an assistant that only calls a tool as an empty turn;
	// that turn's end is trained, the tool's answer is not.
	if got := trainedText(t, tok, d.Train.Samples[1]); !slices.Equal(got, []string{"<|im_end|>", "It rains.<|im_end|>"}) {
		t.Errorf("line 2 trains on %q", got)
	}
}

func TestShareGPTIsMessages(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	sharegpt := `{"conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello."}]}`
	openai := conversation(t, chat.Message{Role: "system", Content: "Be brief."}, chat.Message{Role: "user", Content: "Hi"}, chat.Message{Role: "assistant", Content: "Hello."})
	a, _, err := readString(t, "a.jsonl", sharegpt, tok, f, Options{SeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := readString(t, "b.jsonl", openai, tok, f, Options{SeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := a.Train.Samples[0], b.Train.Samples[0]
	if !slices.Equal(sa.Tokens, sb.Tokens) || !slices.Equal(sa.Targets, sb.Targets) {
		t.Errorf("ShareGPT gives %q, messages %q", decode(t, tok, sa.Tokens), decode(t, tok, sb.Tokens))
	}
}

func TestConversationalPromptCompletion(t *testing.T) {
	tok, f := tinyModel(t, "tiny-gemma3")
	line := `{"prompt": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Name a room."}],` +
		` "completion": [{"role": "assistant", "content": "The kitchen."}]}`
	d, _, err := readString(t, "pc.jsonl", line, tok, f, Options{SeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	// The prompt's assistant turn is context, not loss.
	if got := trainedText(t, tok, d.Train.Samples[0]); !slices.Equal(got, []string{"The kitchen.<end_of_turn>"}) {
		t.Errorf("trains on %q", got)
	}
}

// historyTemplate renders an assistant turn with its thinking only when it
// is the last message, as Qwen 3 drops the thinking of earlier turns: the
// render up to an earlier turn is not a prefix of the whole conversation.
const historyTemplate = `
{%- for m in messages %}
    {%- if m.role == 'assistant' and loop.last %}
        {{- '<|im_start|>assistant\n<think>\n' + m.reasoning_content + '\n</think>\n\n' + m.content + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}`

func TestChatHistoryRenderedDifferentlyIsOneSamplePerTurn(t *testing.T) {
	tok, _ := tinyModel(t, "tiny-qwen3")
	f := chat.NewFormat("qwen3", historyTemplate, tok)
	if f.Template == nil {
		t.Fatal(f.Notice)
	}
	line := `{"messages": [{"role": "user", "content": "One?"}, {"role": "assistant", "reasoning_content": "count", "content": "One."},` +
		` {"role": "user", "content": "Two?"}, {"role": "assistant", "reasoning_content": "again", "content": "Two."}]}`
	d, rep, err := readString(t, "h.jsonl", line+"\n"+line, tok, f, Options{SeqLen: 128, ValidCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PerTurn != 2 || rep.Samples != 4 {
		t.Fatalf("report: %+v", rep)
	}
	s := d.Train.Samples
	if len(s) != 2 || s[0].Line != s[1].Line {
		t.Fatalf("the turns of one conversation are split between train and validation: train lines %v", []int{s[0].Line, s[1].Line})
	}
	if got := trainedText(t, tok, s[0]); !slices.Equal(got, []string{"<think>\ncount\n</think>\n\nOne.<|im_end|>"}) {
		t.Errorf("turn 1 trains on %q", got)
	}
	if got := trainedText(t, tok, s[1]); !slices.Equal(got, []string{"<think>\nagain\n</think>\n\nTwo.<|im_end|>"}) {
		t.Errorf("turn 2 trains on %q", got)
	}
	// Turn 2's context is the history as the template writes it when the
	// model answers turn 2: turn 1 without its thinking.
	if ctx := decode(t, tok, s[1].Tokens); !strings.Contains(ctx, "<|im_start|>assistant\nOne.<|im_end|>") {
		t.Errorf("turn 2 reads %q", ctx)
	}
}

func TestChatTemplateProblemsAreLineErrors(t *testing.T) {
	tok, _ := tinyModel(t, "tiny-qwen3")
	ok := conversation(t, chat.Message{Role: "user", Content: "Hi"}, chat.Message{Role: "assistant", Content: "Hello."})
	for _, tc := range []struct {
		name, template, data, want string
	}{
		{
			"generation prompt not a prefix",
			`{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>model\n' }}{%- endif %}`,
			ok, "t.jsonl:1: message 1: the chat template's generation prompt is not where its render of the assistant message starts",
		},
		{
			"the model's template refuses the conversation",
			`{%- for m in messages %}{%- if loop.index0 > 0 and m.role == messages[loop.index0 - 1].role %}{{ raise_exception('roles must alternate') }}{%- endif %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`,
			ok + "\n" + `{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]}`,
			"t.jsonl:2: the model's chat template failed (it refused the conversation: roles must alternate)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := chat.NewFormat("qwen3", tc.template, tok)
			if f.Template == nil {
				t.Fatal(f.Notice)
			}
			_, _, err := readString(t, "t.jsonl", tc.data, tok, f, Options{SeqLen: 64})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
