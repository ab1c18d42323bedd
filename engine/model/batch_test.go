package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/engine/sample"
)

// TestDecodeMatchesCPU decodes three sequences together on the GPU
// (Runner.Decode: one chain, the products batched, each token's rotation,
// cache write and attention on its own slot) and checks every row against
// the CPU reference, which decodes each sequence by itself. The prompts
// differ in length and content, so a token that read another slot's cache
// or position, or another row's q, would be far off. The presets cover
// sliding windows and soft-caps (Gemma 2, 3), a shared KV cache and
// per-layer inputs (Gemma 4, 3n), experts (Qwen3 MoE, gpt-oss and its
// sinks) and quantized decode products.
func TestDecodeMatchesCPU(t *testing.T) {
	cases := []struct{ preset, quant string }{
		{"tiny-llama", "F32"}, {"tiny-gemma2", "F32"}, {"tiny-gemma3", "F32"}, {"tiny-gemma3n", "F32"},
		{"tiny-gemma4", "F32"}, {"tiny-qwen3moe", "F32"}, {"tiny-gpt-oss", "F32"}, {"tiny-llama", "Q4_K_M"},
	}
	for _, tc := range cases {
		t.Run(tc.preset+"-"+tc.quant, func(t *testing.T) {
			m := synthModel(t, tc.preset, tc.quant)
			const slots, ctx = 3, 64
			cpu, err := NewCPUSlots(m, ctx, slots)
			if err != nil {
				t.Fatal(err)
			}
			g, err := NewGPU(dev, m, GPUOptions{Context: ctx, Batch: 16, Slots: slots, F32Activations: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			vocab := m.Config.Vocab
			// Prompts of 23, 9 and 40 tokens: the first and last cross the
			// sliding windows, the second does not.
			pos := []int{23, 9, 40}
			for s, n := range pos {
				prompt := make([]int32, n)
				for i := range prompt {
					prompt[i] = int32((i*(s+3)*101 + 7*s) % vocab)
				}
				for _, r := range []Runner{cpu, g} {
					if _, err := r.ForwardSlot(s, prompt, 0, Output{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Three steps of all three, then one of slots 2 and 0 alone (in
			// that order: rows need not follow the slots).
			rounds := [][]int{{0, 1, 2}, {1, 2, 0}, {0, 1, 2}, {2, 0}}
			for round, order := range rounds {
				steps := make([]Step, len(order))
				for i, s := range order {
					steps[i] = Step{Slot: s, Token: int32((round*37 + s*11 + 5) % vocab), Pos: pos[s]}
					pos[s]++
				}
				want, err := cpu.Decode(steps)
				if err != nil {
					t.Fatal(err)
				}
				got, err := g.Decode(steps)
				if err != nil {
					t.Fatal(err)
				}
				for i, st := range steps {
					if d, at := maxRelDiff(got[i].Logits, want[i].Logits); d > tolFor(m) {
						t.Errorf("round %d, slot %d at position %d: logits differ by %.3g of the range at token %d", round, st.Slot, st.Pos, d, at)
					}
				}
			}
		})
	}
}

// TestDecodeRefusesBadSteps: steps a Decode cannot run are errors, on both
// runners, before anything is evaluated; and a GPU runner refuses more
// slots than one batch of logits holds.
func TestDecodeRefusesBadSteps(t *testing.T) {
	m := synthModel(t, "tiny-llama", "F32")
	cpu, err := NewCPUSlots(m, 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGPU(dev, m, GPUOptions{Context: 16, Batch: 8, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	bad := []struct {
		steps []Step
		want  string
	}{
		{nil, "no sequences"},
		{[]Step{{Slot: 2}}, "slot 2 is outside the runner's 2"},
		{[]Step{{Slot: -1}}, "slot -1 is outside"},
		{[]Step{{Slot: 1}, {Slot: 1, Pos: 1}}, "slot 1 decodes twice"},
		{[]Step{{Slot: 0, Pos: 16}}, "do not fit the 16-token context"},
		{[]Step{{Slot: 0, Token: int32(m.Config.Vocab)}}, "outside the vocabulary"},
	}
	for _, r := range []Runner{cpu, g} {
		for _, b := range bad {
			if _, err := r.Decode(b.steps); err == nil || !strings.Contains(err.Error(), b.want) {
				t.Errorf("%T.Decode(%v): %v, want an error containing %q", r, b.steps, err, b.want)
			}
		}
		if _, err := r.ForwardSlot(2, []int32{1}, 0, Output{}); err == nil {
			t.Errorf("%T.ForwardSlot on slot 2 of 2 did not fail", r)
		}
	}
	if _, err := NewGPU(dev, m, GPUOptions{Context: 16, Batch: 4, Slots: 5}); err == nil || !strings.Contains(err.Error(), "5 slots") {
		t.Errorf("NewGPU with 5 slots and a batch of 4: %v, want an error naming the slots", err)
	}
}

// TestBatcherMatchesOneAtATime runs four greedy generations at once
// through a batcher on a four-slot CPU runner, the test's goroutine
// serving the calls as the engine does, and checks each against the same
// prompt generated alone on a one-slot runner: the CPU's batched decode
// is each sequence's own forward, so the tokens must be the same. Four
// sessions reuse the slots afterwards, continuing the first ones' turns.
func TestBatcherMatchesOneAtATime(t *testing.T) {
	m := synthModel(t, "tiny-llama", "F32")
	const slots = 4
	prompts := make([][]int32, slots)
	for s := range prompts {
		for i := range 5 + 6*s {
			prompts[s] = append(prompts[s], int32((i*13+s*29+1)%m.Config.Vocab))
		}
	}
	req := func(p []int32) Request {
		return Request{Prompt: p, MaxTokens: 12, Sampling: sample.Options{Temperature: 0}, Progress: func(int, int) {}}
	}
	alone, err := NewCPU(m, 128)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]int32, slots)
	for s, p := range prompts {
		if want[s], _, err = generated(NewSession(alone), req(p)); err != nil {
			t.Fatal(err)
		}
	}

	r, err := NewCPUSlots(m, 128, slots)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(r)
	sessions := make([]*Session, slots)
	for s := range sessions {
		sessions[s] = b.Session(s)
	}
	run := func(prompts [][]int32) ([][]int32, []Stats) {
		got := make([][]int32, slots)
		stats := make([]Stats, slots)
		errs := make([]error, slots)
		var wg sync.WaitGroup
		finished := make(chan struct{})
		for s := range slots {
			wg.Go(func() { got[s], stats[s], errs[s] = generated(sessions[s], req(prompts[s])) })
		}
		go func() { wg.Wait(); close(finished) }()
		// Serve whatever waits, a call per slot at most per round, until
		// every generation is done.
		for {
			select {
			case <-finished:
				for _, err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
				return got, stats
			case c := <-b.Calls():
				calls := []*Call{c}
				for len(calls) < slots {
					select {
					case c := <-b.Calls():
						calls = append(calls, c)
						continue
					default:
					}
					break
				}
				_ = b.Run(calls)
			}
		}
	}
	got, _ := run(prompts)
	for s := range slots {
		if !slices.Equal(got[s], want[s]) {
			t.Errorf("slot %d: %v at once, %v alone", s, got[s], want[s])
		}
	}
	// The next turn of each conversation extends its prompt and reply:
	// each session finds its own tokens in its slot's cache.
	next := make([][]int32, slots)
	for s := range next {
		next[s] = append(append(slices.Clone(prompts[s]), want[s]...), 3, 4)
	}
	got, stats := run(next)
	for s := range slots {
		w, _, err := generated(NewSession(alone), req(next[s]))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[s], w) {
			t.Errorf("second turn, slot %d: %v at once, %v alone", s, got[s], w)
		}
		// The first turn's prompt and all but its last token are cached.
		if c, least := stats[s].CachedTokens, len(prompts[s])+len(want[s])-1; c < least {
			t.Errorf("second turn, slot %d: %d tokens cached, want at least %d", s, c, least)
		}
	}

	b.Stop(nil)
	if _, _, err := generated(sessions[0], req(prompts[0])); !errors.Is(err, ErrBatcherStopped) {
		t.Errorf("a generation after Stop: %v, want ErrBatcherStopped", err)
	}
}

// generated is the token ids s generates for req, and the statistics.
func generated(s *Session, req Request) ([]int32, Stats, error) {
	var ids []int32
	st, err := s.Generate(context.Background(), req, func(t Token) error {
		ids = append(ids, t.ID)
		return nil
	})
	if err != nil {
		return nil, st, fmt.Errorf("slot %d: %w", s.Slot(), err)
	}
	return ids, st, nil
}
