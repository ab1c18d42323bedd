package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/sample"
)

func greedyRequest(prompt []int32, n int) Request {
	return Request{Prompt: prompt, MaxTokens: n, Sampling: sample.Options{Temperature: 0}}
}

func collect(t *testing.T, s *Session, req Request) ([]int32, Stats) {
	t.Helper()
	var ids []int32
	st, err := s.Generate(context.Background(), req, func(tok Token) error {
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, st
}

// TestSessionReusesCache: a second turn that extends the first evaluates
// only its new tokens, and continues exactly as a fresh session that
// evaluates everything.
func TestSessionReusesCache(t *testing.T) {
	m := synthModel(t, "tiny-gemma2", "Q8_0")
	g, err := NewGPU(dev, m, GPUOptions{Context: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s := NewSession(g)
	first := []int32{2, 10, 20, 30, 40, 50}
	reply, _ := collect(t, s, greedyRequest(first, 5))
	second := append(append(slices.Clone(first), reply...), 60, 70, 80)
	got, st := collect(t, s, greedyRequest(second, 8))
	// The cache holds the prompt and the reply but the last reply token,
	// which was sampled and never evaluated.
	if want := len(first) + len(reply) - 1; st.CachedTokens != want {
		t.Errorf("second turn reused %d tokens, want %d", st.CachedTokens, want)
	}
	fresh, _ := collect(t, NewSession(g), greedyRequest(second, 8))
	if !slices.Equal(got, fresh) {
		t.Errorf("with the cache %v, fresh %v", got, fresh)
	}
	// A prompt that diverges early drops the rest of the cache (fresh is
	// the session the runner served last).
	other := []int32{2, 10, 99, 98}
	_, st = collect(t, NewSession(g), greedyRequest(other, 2))
	if st.CachedTokens != 0 {
		t.Errorf("a new session reused %d tokens of another's cache", st.CachedTokens)
	}
	s = NewSession(g)
	collect(t, s, greedyRequest(second, 1))
	_, st = collect(t, s, greedyRequest(other, 2))
	if st.CachedTokens != 2 {
		t.Errorf("diverging prompt reused %d tokens, want 2", st.CachedTokens)
	}
}

// TestSessionGreedyMatchesCPU: greedy generation on the GPU gives the CPU
// reference's tokens.
func TestSessionGreedyMatchesCPU(t *testing.T) {
	m := synthModel(t, "tiny-phi3", "F16")
	cpu, err := NewCPU(m, 64)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGPU(dev, m, GPUOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	prompt := []int32{1, 5, 9, 200, 300, 17, 23}
	want, _ := collect(t, NewSession(cpu), greedyRequest(prompt, 24))
	got, _ := collect(t, NewSession(g), greedyRequest(prompt, 24))
	if !slices.Equal(got, want) {
		t.Errorf("GPU %v\nCPU %v", got, want)
	}
}

// TestSessionOverflow: refusing stops at the context's end; shifting keeps
// going past it.
func TestSessionOverflow(t *testing.T) {
	m := synthModel(t, "tiny-qwen2", "Q8_0")
	g, err := NewGPU(dev, m, GPUOptions{Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	ids, st := collect(t, NewSession(g), greedyRequest(prompt, 50))
	if st.Stop != "length" || len(prompt)+len(ids) != 17 {
		t.Errorf("refuse: %d tokens after a %d-token prompt in a 16-token context, stop %q", len(ids), len(prompt), st.Stop)
	}
	req := greedyRequest(prompt, 40)
	req.Overflow, req.Keep = OverflowShift, 2
	ids, st = collect(t, NewSession(g), req)
	if len(ids) != 40 || st.Stop != "length" {
		t.Errorf("shift: %d tokens, stop %q; want 40", len(ids), st.Stop)
	}
	// A prompt longer than the context is shifted too.
	req.Prompt = make([]int32, 30)
	if ids, _ = collect(t, NewSession(g), req); len(ids) != 40 {
		t.Errorf("shift of a long prompt: %d tokens", len(ids))
	}
}

func TestStopFilter(t *testing.T) {
	cases := []struct {
		stops  []string
		pieces []string
		want   string
		hit    bool
	}{
		{[]string{"</s>"}, []string{"Hello", " wor", "ld</", "s> more"}, "Hello world", true},
		{[]string{"</s>"}, []string{"a<", "/b", "c"}, "a</bc", false}, // a false start is released
		{[]string{"\n\n", "User:"}, []string{"ok", "\nUs", "er: hi"}, "ok\n", true},
		{nil, []string{"x", "y"}, "xy", false},
	}
	for _, tc := range cases {
		f := newStopFilter(tc.stops)
		var got string
		hit := false
		for _, p := range tc.pieces {
			s, h := f.push(p)
			got += s
			if h {
				hit = true
				break
			}
		}
		if !hit {
			got += f.flush()
		}
		if got != tc.want || hit != tc.hit {
			t.Errorf("stops %q pieces %q: got %q hit %v, want %q %v", tc.stops, tc.pieces, got, hit, tc.want, tc.hit)
		}
	}
}

// TestStreamCancel: cancelling the context ends the stream at a token
// boundary with Stop "canceled".
func TestStreamCancel(t *testing.T) {
	m := synthModel(t, "tiny-llama", "Q4_0")
	g, err := NewGPU(dev, m, GPUOptions{Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var final *Stats
	for ev := range NewSession(g).Stream(ctx, greedyRequest([]int32{1, 2, 3}, 200)) {
		switch {
		case ev.Token != nil:
			if n++; n == 3 {
				cancel()
			}
		case ev.Err != nil:
			t.Fatal(ev.Err)
		default:
			final = ev.Stats
		}
	}
	if final == nil || final.Stop != "canceled" || final.Generated > 5 {
		t.Errorf("stats %+v after cancelling at token 3", final)
	}
}

// scripted is a Runner whose greedy answer after position p is next[p]
// (the token the script wants there), so session logic is tested without a
// model. It records the positions it was asked to evaluate; embedding
// rows count scriptedWidth floats each, and their calls are recorded with
// the first float of their first row in images.
type scripted struct {
	own    *Session // the one slot's owner
	ctx    int
	next   func(pos int) int32
	calls  [][2]int // (pos, tokens)
	images []float32
}

const scriptedWidth = 2

func (r *scripted) ForwardEmbeds(slot int, rows []float32, pos int, out Output) (Result, error) {
	if len(rows)%scriptedWidth != 0 {
		return Result{}, fmt.Errorf("%d floats of %d-wide rows", len(rows), scriptedWidth)
	}
	r.images = append(r.images, rows[0])
	return r.ForwardSlot(slot, make([]int32, len(rows)/scriptedWidth), pos, out)
}

func (r *scripted) Forward(tokens []int32, pos int, out Output) (Result, error) {
	r.calls = append(r.calls, [2]int{pos, len(tokens)})
	if pos < 0 || pos+len(tokens) > r.ctx {
		return Result{}, fmt.Errorf("positions %d+%d outside %d", pos, len(tokens), r.ctx)
	}
	return Result{IDs: []uint32{uint32(r.next(pos + len(tokens) - 1))}, Values: []float32{0}}, nil
}
func (r *scripted) ForwardSlot(slot int, tokens []int32, pos int, out Output) (Result, error) {
	if slot != 0 {
		return Result{}, fmt.Errorf("slot %d of 1", slot)
	}
	return r.Forward(tokens, pos, out)
}
func (r *scripted) Decode(steps []Step) ([]Result, error) {
	return nil, fmt.Errorf("scripted runners decode one sequence")
}
func (r *scripted) Slots() int                 { return 1 }
func (r *scripted) owner(int) *Session         { return r.own }
func (r *scripted) setOwner(_ int, s *Session) { r.own = s }
func (r *scripted) forget()                    { r.own = nil }
func (r *scripted) Context() int               { return r.ctx }
func (r *scripted) SetAdapters([]LoRA) error   { return nil }
func (r *scripted) Model() *Model              { return nil }
func (r *scripted) Close()                     {}

// pieces decodes token i as texts[i].
type pieces []string

func (p pieces) Next(id int32) (string, error) { return p[id], nil }
func (p pieces) Flush() string                 { return "" }

func replyText(t *testing.T, s *Session, req Request) (string, Stats) {
	t.Helper()
	var b strings.Builder
	st, err := s.Generate(context.Background(), req, func(tok Token) error {
		b.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), st
}

func TestSessionStops(t *testing.T) {
	texts := pieces{"", "Hi", "\n", "User:", "\n\n", "<eos>", "ok"}
	cases := []struct {
		name   string
		script []int32 // tokens sampled in order
		stops  []string
		want   string
		stop   string
	}{
		// A stop token releases what the stop filter held back.
		{"stop id flushes held text", []int32{1, 2, 5}, []string{"\nUser:"}, "Hi\n", "stop"},
		// The earliest stop string in the text wins, whatever the list order.
		{"earliest stop string", []int32{6, 4, 3, 1}, []string{"User:", "\n\n"}, "ok", "stop"},
		{"length flushes held text", []int32{1, 2, 2, 2}, []string{"\nUser:"}, "Hi\n\n\n", "length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &scripted{ctx: 64, next: func(pos int) int32 { return tc.script[min(pos, len(tc.script)-1)] }}
			req := greedyRequest([]int32{0}, len(tc.script))
			req.StopIDs, req.StopStrings, req.Decoder = []int32{5}, tc.stops, texts
			got, st := replyText(t, NewSession(r), req)
			if got != tc.want || st.Stop != tc.stop {
				t.Errorf("reply %q stop %q, want %q %q", got, st.Stop, tc.want, tc.stop)
			}
		})
	}
}

// TestSessionShiftEdges: shifting never drops the newest token, keeps at
// most half the context, and refuses a context too small to shift.
func TestSessionShiftEdges(t *testing.T) {
	for _, tc := range []struct{ ctx, keep int }{{8, 4}, {8, 100}, {2, 0}, {3, 1}} {
		r := &scripted{ctx: tc.ctx, next: func(pos int) int32 { return int32(pos % 7) }}
		req := greedyRequest([]int32{1, 2}, 20)
		req.Overflow, req.Keep = OverflowShift, tc.keep
		ids, _ := collect(t, NewSession(r), req)
		if len(ids) != 20 {
			t.Errorf("ctx %d keep %d: %d tokens, want 20", tc.ctx, tc.keep, len(ids))
		}
		for _, c := range r.calls {
			if c[0]+c[1] > tc.ctx {
				t.Errorf("ctx %d keep %d: evaluated %d+%d", tc.ctx, tc.keep, c[0], c[1])
			}
		}
	}
	r := &scripted{ctx: 1, next: func(int) int32 { return 0 }}
	req := greedyRequest([]int32{1, 2, 3}, 2)
	req.Overflow = OverflowShift
	if _, err := NewSession(r).Generate(context.Background(), req, func(Token) error { return nil }); !errors.Is(err, ErrContextFull) {
		t.Errorf("shifting a 1-token context: %v", err)
	}
}

// TestSessionsShareARunner: a session whose runner served another session
// since evaluates its whole prompt again instead of trusting the cache.
func TestSessionsShareARunner(t *testing.T) {
	r := &scripted{ctx: 64, next: func(pos int) int32 { return 9 }}
	a, b := NewSession(r), NewSession(r)
	collect(t, a, greedyRequest([]int32{1, 2, 3, 4}, 2))
	collect(t, b, greedyRequest([]int32{5, 6}, 2))
	_, st := collect(t, a, greedyRequest([]int32{1, 2, 3, 4, 9, 9, 7}, 1))
	if st.CachedTokens != 0 {
		t.Errorf("session a reused %d tokens after b used the runner", st.CachedTokens)
	}
	_, st = collect(t, a, greedyRequest([]int32{1, 2, 3, 4, 9, 9, 7, 9, 8}, 1))
	if st.CachedTokens != 7 {
		t.Errorf("session a's own next turn reused %d tokens, want its 7", st.CachedTokens)
	}
}

func TestForwardAfterClose(t *testing.T) {
	m := synthModel(t, "tiny-qwen2", "Q8_0")
	g, err := NewGPU(dev, m, GPUOptions{Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if _, err := g.Forward([]int32{1}, 0, Output{TopK: 1}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Forward after Close: %v", err)
	}
	g.Close() // twice is harmless
}

// TestSessionPrefillProgress: with Progress set, a long prompt goes through
// in PrefillChunk pieces, each reported, covering exactly the new tokens;
// a cancellation between chunks ends the prefill with Stop "canceled" and
// a cache that holds the chunks evaluated.
func TestSessionPrefillProgress(t *testing.T) {
	r := &scripted{ctx: 4096, next: func(int) int32 { return 1 }}
	s := NewSession(r)
	prompt := make([]int32, 2*PrefillChunk+10)
	var reports [][2]int
	req := greedyRequest(prompt, 1)
	req.Progress = func(done, total int) { reports = append(reports, [2]int{done, total}) }
	collect(t, s, req)
	n := len(prompt)
	want := [][2]int{{0, n}, {PrefillChunk, n}, {2 * PrefillChunk, n}, {n, n}}
	if !slices.Equal(reports, want) {
		t.Errorf("progress %v, want %v", reports, want)
	}
	if !slices.Equal(r.calls, [][2]int{{0, PrefillChunk}, {PrefillChunk, PrefillChunk}, {2 * PrefillChunk, 10}}) {
		t.Errorf("forward calls %v", r.calls)
	}

	// Cancel after the first chunk: the rest is not evaluated.
	r = &scripted{ctx: 4096, next: func(int) int32 { return 1 }}
	s = NewSession(r)
	ctx, cancel := context.WithCancel(context.Background())
	req.Progress = func(done, total int) {
		if done > 0 {
			cancel()
		}
	}
	st, err := s.Generate(ctx, req, func(Token) error { t.Error("a token was emitted after cancelling the prefill"); return nil })
	if err != nil || st.Stop != "canceled" {
		t.Fatalf("stats %+v, error %v; want a canceled prefill", st, err)
	}
	if len(r.calls) != 1 || s.Cached() != PrefillChunk {
		t.Errorf("%d forward calls, %d tokens cached; want 1 and %d", len(r.calls), s.Cached(), PrefillChunk)
	}
}

// imageAt is an image of n positions at pos whose rows all hold v.
func imageAt(pos, n int, key string, v float32) Image {
	rows := make([]float32, n*scriptedWidth)
	for i := range rows {
		rows[i] = v
	}
	return Image{Pos: pos, Len: n, Key: key, Embeds: rows}
}

// TestSessionImages: a prompt's images go in as embedding rows between
// its runs of text; a later turn reuses the cache through an image of the
// same key and position, needs no rows for it, and evaluates again from an
// image whose key changed.
func TestSessionImages(t *testing.T) {
	r := &scripted{ctx: 64, next: func(pos int) int32 { return 30 }}
	s := NewSession(r)
	prompt := make([]int32, 20)
	for i := range prompt {
		prompt[i] = int32(i + 1)
	}
	for i := 5; i < 9; i++ {
		prompt[i] = 99 // the image's placeholders
	}
	req := greedyRequest(prompt, 2)
	req.Images = []Image{imageAt(5, 4, "a", 7)}
	collect(t, s, req)
	want := [][2]int{{0, 5}, {5, 4}, {9, 11}, {20, 1}}
	if !slices.Equal(r.calls, want) || !slices.Equal(r.images, []float32{7}) {
		t.Fatalf("first turn: calls %v images %v, want %v [7]", r.calls, r.images, want)
	}

	// The next turn extends it; the image is held, so it needs no rows.
	next := append(slices.Clone(prompt), 30, 30, 40, 41)
	held := Image{Pos: 5, Len: 4, Key: "a"}
	if got := s.Reuse(next, []Image{held}); got != 21 {
		t.Fatalf("Reuse of the next turn: %d, want 21 (the prompt and the reply's first token)", got)
	}
	r.calls, r.images = nil, nil
	req = greedyRequest(next, 1)
	req.Images = []Image{held}
	collect(t, s, req)
	if want := [][2]int{{21, 3}}; !slices.Equal(r.calls, want) || r.images != nil {
		t.Fatalf("second turn: calls %v images %v, want %v and no image", r.calls, r.images, want)
	}

	// Another image at the same place: evaluated again from there.
	if got := s.Reuse(next, []Image{{Pos: 5, Len: 4, Key: "b"}}); got != 5 {
		t.Fatalf("Reuse with the image changed: %d, want 5", got)
	}
	r.calls, r.images = nil, nil
	req.Images = []Image{imageAt(5, 4, "b", 8)}
	collect(t, s, req)
	if want := [][2]int{{5, 4}, {9, 15}}; !slices.Equal(r.calls, want) || !slices.Equal(r.images, []float32{8}) {
		t.Fatalf("changed image: calls %v images %v, want %v [8]", r.calls, r.images, want)
	}
	// A prompt without the image is cut before it, too.
	if got := s.Reuse(next, nil); got != 5 {
		t.Errorf("Reuse without the image: %d, want 5", got)
	}

	// A held image asked for elsewhere, or a new one without rows, fails.
	r.calls = nil
	req.Images = []Image{{Pos: 6, Len: 4, Key: "b"}}
	if _, err := s.Generate(context.Background(), req, func(Token) error { return nil }); err == nil || !strings.Contains(err.Error(), "without its embeddings") {
		t.Errorf("an image without rows outside the cache: %v", err)
	}
}

// TestSessionRefusesBadImages: images that overlap, leave the prompt, end
// it, or would need a shift are refused by name.
func TestSessionRefusesBadImages(t *testing.T) {
	prompt := make([]int32, 12)
	for _, tc := range []struct {
		name   string
		images []Image
		ctx    int
		want   string
	}{
		{"overlapping", []Image{imageAt(2, 4, "a", 1), imageAt(5, 2, "b", 1)}, 64, "overlaps"},
		{"out of order", []Image{imageAt(6, 2, "a", 1), imageAt(2, 2, "b", 1)}, 64, "overlaps"},
		{"past the prompt", []Image{imageAt(10, 4, "a", 1)}, 64, "leaves the 12-token prompt"},
		{"ending the prompt", []Image{imageAt(8, 4, "a", 1)}, 64, "ends the prompt"},
		{"no positions", []Image{{Pos: 3, Key: "a"}}, 64, "0 positions"},
		{"shifted", []Image{imageAt(2, 2, "a", 1)}, 8, "not shifted"},
	} {
		r := &scripted{ctx: tc.ctx, next: func(int) int32 { return 0 }}
		req := greedyRequest(prompt, 1)
		req.Images, req.Overflow = tc.images, OverflowShift
		_, err := NewSession(r).Generate(context.Background(), req, func(Token) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if len(r.calls) > 0 {
			t.Errorf("%s: evaluated %v before refusing", tc.name, r.calls)
		}
	}
}
