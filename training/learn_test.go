package training

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// TestFineTuningTeachesTheAnswerFormat: the studio's sample dataset
// answers every question as "ANSWER: word". A random-weight model says
// nothing of the kind; after 20 steps of Run (rank 8 on every projection,
// on the device) its greedy reply to questions that are not in the dataset
// starts with "ANSWER:", the loss has fallen by more than half, and
// without the adapter it is the base's reply again. (docs/fine-tuning.md
// shows the same run's loss curve.)
func TestFineTuningTeachesTheAnswerFormat(t *testing.T) {
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q8_0")
	out := filepath.Join(t.TempDir(), "answer.gguf")
	res, err := Run(context.Background(), dev, m, RunConfig{
		Settings: Settings{
			LoRA: LoRAConfig{Rank: 8, Alpha: 16}, AdamW: DefaultAdamW, LR: 1e-2, Warmup: 1,
			// 96 tokens hold every sample of the dataset with this
			// byte-level vocabulary but a few system-prompted ones.
			Steps: 20, SeqLen: 96, Batch: 2, Valid: -1, Seed: 1,
		},
		Data: answerFormat, Out: out, SaveEvery: 20,
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := res.History[0].Loss
	t.Logf("loss %.3f → %.3f", first, res.Loss)
	if res.Loss > first/2 {
		t.Errorf("the loss fell from %.3f to %.3f only", first, res.Loss)
	}

	a, err := adapter.Load(out, m)
	if err != nil {
		t.Fatal(err)
	}
	lora, err := a.LoRA(1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := model.NewCPU(m, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reply := func(q string) string {
		p, err := m.Chat.Render(chat.Request{Messages: []chat.Message{{Role: "user", Content: q}}, AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		req := model.Request{Prompt: m.Chat.Tokenize(p.Text), MaxTokens: 8, Sampling: sample.Options{Temperature: 0},
			StopIDs: m.Chat.StopIDs, Decoder: m.Tokenizer.NewDecoder(tokenizer.DecodeOptions{})}
		if _, err := model.NewSession(r).Generate(context.Background(), req, func(tk model.Token) error {
			sb.WriteString(tk.Text)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}
	for _, q := range []string{"What is the capital of France?", "Name a large animal with a trunk."} {
		if err := r.SetAdapters(nil); err != nil {
			t.Fatal(err)
		}
		base := reply(q)
		if err := r.SetAdapters([]model.LoRA{lora}); err != nil {
			t.Fatal(err)
		}
		tuned := reply(q)
		t.Logf("%q: base %q, tuned %q", q, base, tuned)
		if !strings.HasPrefix(tuned, "ANSWER:") {
			t.Errorf("%q: the tuned model said %q", q, tuned)
		}
		if strings.HasPrefix(base, "ANSWER:") {
			t.Errorf("%q: the base model already said %q", q, base)
		}
	}
}
