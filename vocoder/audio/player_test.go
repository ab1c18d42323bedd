package audio

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDevice plays a Player's queue as oto would, without a sound card:
// while playing it keeps its buffer topped up from the source to bufSize
// bytes, and each tick moves samples from the buffer to the speaker.
type fakeDevice struct {
	mu      sync.Mutex
	src     io.Reader
	bufSize int
	buf     []byte
	playing bool
	heard   []float32 // what reached the speaker
	err     error     // set: the device failed
}

func (d *fakeDevice) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *fakeDevice) Play() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.playing = true
	d.fill()
}

func (d *fakeDevice) IsPlaying() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.playing
}

func (d *fakeDevice) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.playing, d.buf = false, nil
}

func (d *fakeDevice) BufferedSize() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.buf)
}

// fill reads as oto's mux does, in pieces of odd sizes, so that samples
// split across reads are exercised.
func (d *fakeDevice) fill() {
	tmp := make([]byte, 4*97+3)
	for len(d.buf) < d.bufSize {
		n, err := d.src.Read(tmp[:min(len(tmp), d.bufSize-len(d.buf))])
		d.buf = append(d.buf, tmp[:n]...)
		if err != nil || n == 0 {
			return
		}
	}
}

// tick plays n samples.
func (d *fakeDevice) tick(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.playing {
		return
	}
	for range n {
		d.fill()
		if len(d.buf) < 4 {
			return
		}
		d.heard = append(d.heard, math.Float32frombits(binary.LittleEndian.Uint32(d.buf)))
		d.buf = d.buf[4:]
	}
	d.fill()
}

func (d *fakeDevice) speech() []float32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []float32
	for _, x := range d.heard {
		if x != 0 {
			out = append(out, x)
		}
	}
	return out
}

func newFakePlayer() (*Player, *fakeDevice) {
	q := &sampleQueue{}
	d := &fakeDevice{src: q, bufSize: 4 * 1000}
	return newPlayer(q, d, 0), d
}

// ramp is n nonzero samples starting at from, so order is visible and
// silence (0) is told apart.
func ramp(from, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(from + i)
	}
	return s
}

func samples(n int) time.Duration { return time.Duration(n) * time.Second / SampleRate }

func TestPlayerPlaysInOrderAcrossGaps(t *testing.T) {
	p, d := newFakePlayer()
	p.Enqueue(ramp(1, 2500))
	if !d.IsPlaying() {
		t.Fatal("Enqueue did not start playback")
	}
	if got := p.Position(); got != 0 {
		t.Errorf("position %v before anything played", got)
	}
	d.tick(1200)
	if got := p.Position(); got != samples(1200) {
		t.Errorf("position %v after 1200 samples, want %v", got, samples(1200))
	}
	p.Enqueue(ramp(2501, 500))
	d.tick(3000) // past the end: 1300 more, then silence
	if got := p.Position(); got != samples(3000) {
		t.Errorf("position %v after all 3000, want %v", got, samples(3000))
	}
	// A chunk that comes during the silence plays after it; the silence
	// is not counted in the position.
	enqueuedAt := len(d.heard)
	p.Enqueue(ramp(3001, 700))
	d.tick(2000)
	if got := p.Position(); got != samples(3700) {
		t.Errorf("position %v, want %v: the gap's silence was counted", got, samples(3700))
	}
	want := ramp(1, 3700)
	got := d.speech()
	if len(got) != len(want) {
		t.Fatalf("heard %d speech samples, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sample %d is %g, want %g", i, got[i], want[i])
		}
	}
	// The delay is bounded: between the Enqueue and the chunk's first
	// sample only the silence already buffered (1000) and read (one
	// silenceRead) played.
	idx := 0
	for i, x := range d.heard {
		if x == 3001 {
			idx = i
		}
	}
	if gap := idx - enqueuedAt; gap > 1000+silenceRead {
		t.Errorf("%d samples of silence before the late chunk, more than the buffer (1000) and one read (%d)", gap, silenceRead)
	}
}

func TestPlayerStopDropsQueue(t *testing.T) {
	p, d := newFakePlayer()
	p.Enqueue(ramp(1, 5000))
	d.tick(1500)
	p.Stop()
	if got := p.Position(); got != 0 {
		t.Errorf("position %v after Stop, want 0", got)
	}
	d.tick(3000)
	if n := len(d.speech()); n != 1500 {
		t.Errorf("%d samples heard: Stop let %d more through", n, n-1500)
	}
	p.Enqueue(ramp(10001, 300))
	d.tick(300)
	got := d.speech()
	if len(got) != 1800 || got[1500] != 10001 || got[1799] != 10300 {
		t.Errorf("after Stop and Enqueue: %d samples, [1500] %g, last %g", len(got), got[min(1500, len(got)-1)], got[len(got)-1])
	}
	if pos := p.Position(); pos != samples(300) {
		t.Errorf("position %v, want %v from the Stop", pos, samples(300))
	}
}

func TestPlayerWait(t *testing.T) {
	p, d := newFakePlayer()
	p.Enqueue(ramp(1, 4800))
	done := make(chan struct{})
	go func() { // the device plays 10 ms of audio per ms
		defer close(done)
		for range 200 {
			d.tick(240)
			time.Sleep(time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(d.speech()); n != 4800 {
		t.Errorf("Wait returned with %d of 4800 samples played", n)
	}
	<-done

	// A Wait that cannot end (nothing plays) ends with its context.
	p2, _ := newFakePlayer()
	p2.Enqueue(ramp(1, 100))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	if err := p2.Wait(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a stalled device: %v", err)
	}
	// A device that fails mid-speech ends the Wait with an error at once.
	d2 := p2.out.(*fakeDevice)
	d2.mu.Lock()
	d2.err = errors.New("device unplugged")
	d2.mu.Unlock()
	if err := p2.Wait(context.Background()); !errors.Is(err, ErrNoAudioDevice) || !strings.Contains(err.Error(), "unplugged") {
		t.Errorf("Wait on a failed device: %v", err)
	}

	// The device's own buffer is not heard yet: with 10 ms of it, the
	// position trails what left the player's buffer by 10 ms.
	q := &sampleQueue{}
	d3 := &fakeDevice{src: q, bufSize: 4 * 1000}
	p3 := newPlayer(q, d3, 10*time.Millisecond)
	p3.Enqueue(ramp(1, 2000))
	d3.tick(1000)
	if got, want := p3.Position(), samples(1000-SampleRate/100); got != want {
		t.Errorf("position %v with a 10 ms device buffer, want %v", got, want)
	}
	// Close drops the rest; Enqueue after it does nothing.
	p2.Close()
	p2.Enqueue(ramp(1, 10))
	if n, err := p2.q.Read(make([]byte, 64)); n != 0 || err != io.EOF {
		t.Errorf("read after Close: %d, %v", n, err)
	}
}

func TestSampleQueueShortReads(t *testing.T) {
	q := &sampleQueue{}
	want := ramp(1, 50)
	q.push(want)
	var raw []byte
	for _, n := range []int{1, 2, 3, 5, 7, 1, 4, 13, 1000} {
		b := make([]byte, n)
		k, err := q.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b[:k]...)
	}
	for i := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want[i] {
			t.Fatalf("sample %d: %g, want %g", i, got, want[i])
		}
	}
	// What follows the speech is silence, never the end of the stream.
	if len(raw) != 4*len(want) {
		t.Errorf("%d bytes of speech, want %d", len(raw), 4*len(want))
	}
	b := make([]byte, 4*SampleRate)
	n, err := q.Read(b)
	if err != nil || n != 4*silenceRead {
		t.Errorf("empty queue read %d bytes, %v; want %d of silence", n, err, 4*silenceRead)
	}
}

// TestNewPlayerWithoutDevice: CI and this machine have no sound card;
// there NewPlayer must fail cleanly, with ErrNoAudioDevice, every time.
// Where a card exists it must play a moment of silence.
func TestNewPlayerWithoutDevice(t *testing.T) {
	for range 2 {
		p, err := NewPlayer()
		if err != nil {
			if !errors.Is(err, ErrNoAudioDevice) || !strings.Contains(err.Error(), "no audio device") {
				t.Fatalf("NewPlayer: %v, want it to wrap ErrNoAudioDevice", err)
			}
			continue
		}
		p.Enqueue(make([]float32, SampleRate/50))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = p.Wait(ctx)
		cancel()
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
		p.Close()
	}
}
