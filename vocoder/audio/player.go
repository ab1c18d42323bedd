package audio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// ErrNoAudioDevice is wrapped by NewPlayer's error when there is no sound
// card to play on (a server, CI) or the sound system refused to open it.
var ErrNoAudioDevice = errors.New("audio: no audio device")

// Playback latencies. The device buffer is what ALSA (or the platform's
// mixer) holds between oto and the speaker; the player buffer is what oto
// reads ahead of that from the queue. Together they are the delay from
// Enqueue to sound when nothing was playing (~0.2 s, below the pause
// between two sentences) and the stretch a hiccup of the program can
// absorb without a click: oto's own default of 0.5 s per player would
// make a chunk arriving during silence wait that long.
const (
	deviceBuffer = 100 * time.Millisecond
	playerBuffer = 100 * time.Millisecond
	// silenceRead is the most silence one Read returns when the queue is
	// empty: little, so speech enqueued during a gap waits behind at
	// most that much more than the buffers hold.
	silenceRead = SampleRate / 100 // 10 ms
)

// sink is what a Player needs of oto's player, so that the queue can be
// tested without a sound card: oto's *Player has these methods.
type sink interface {
	Play()
	IsPlaying() bool
	Reset()
	BufferedSize() int // bytes read from the queue and not yet played
	Err() error        // why playback failed (the device went away), or nil
}

// A Player plays SampleRate Hz mono audio on the sound card as it is
// queued: Enqueue while the first part plays, Wait for the end, Stop to
// cut it short. Its methods are safe for concurrent use.
type Player struct {
	q   *sampleQueue
	out sink
	// drainDelay is the device buffer: how long sound goes on after oto
	// has handed over the last sample.
	drainDelay time.Duration

	mu     sync.Mutex // serialises Stop and Enqueue against each other
	closed bool
}

// newPlayer plays q through out.
func newPlayer(q *sampleQueue, out sink, drainDelay time.Duration) *Player {
	return &Player{q: q, out: out, drainDelay: drainDelay}
}

// Enqueue appends samples (SampleRate Hz mono) to what is to be played,
// copying them, and starts playing if nothing was.
func (p *Player) Enqueue(samples []float32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(samples) == 0 {
		return
	}
	p.q.push(samples)
	if !p.out.IsPlaying() {
		p.out.Play()
	}
}

// Stop drops everything queued and not yet played, at once, and starts
// Position again from zero for what is enqueued next.
func (p *Player) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.q.drop()
	p.out.Reset()
	p.q.restart()
}

// Position is how much of the enqueued audio has been heard since the
// player was made or last stopped; silence played while the queue was
// empty does not count, so it is a position in the speech, for
// following the words. What the device itself still buffers (drainDelay)
// is counted as not yet heard.
func (p *Player) Position() time.Duration {
	device := int(p.drainDelay.Seconds() * SampleRate)
	return time.Duration(p.q.speechAt(p.out.BufferedSize()/4+device)) * time.Second / SampleRate
}

// Wait blocks until everything enqueued has been played, or ctx ends
// (its error is returned; the audio plays on: Stop cuts it), or playback
// fails (an error wrapping ErrNoAudioDevice).
func (p *Player) Wait(ctx context.Context) error {
	// oto has no end-of-stream callback: poll, at a period far below a
	// word's length.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.q.speechAt(p.out.BufferedSize()/4) >= p.q.enqueued() {
			break
		}
		if err := p.out.Err(); err != nil {
			// Nothing more will play: a wait for the end would never end.
			return fmt.Errorf("%w: %v", ErrNoAudioDevice, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	// The device's buffer still holds the tail.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(p.drainDelay):
		return nil
	}
}

// Close stops playback and drops the queue; the player is unusable after.
// The sound card stays open for the next NewPlayer (see audioContext).
func (p *Player) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.q.close()
	p.out.Reset()
	return nil
}

// sampleQueue is the io.Reader oto's player reads: queued speech as
// little-endian f32, and while nothing is queued, short stretches of
// silence, so the player never sees the end of its stream and never has
// to be restarted (oto stops reading a source for good after io.EOF until
// a Reset, which would drop what it had read ahead). It records how much
// of what it handed out was speech, so the player's position in the
// speech can be told from how much oto still buffers.
type sampleQueue struct {
	mu     sync.Mutex
	chunks [][]float32
	head   int      // samples of chunks[0] already read
	part   [4]byte  // the rest of a sample split by a short Read
	partN  int      // bytes of part left to hand out
	segs   []segLog // what Read handed out, in order, since the last restart
	handed int64    // samples handed out since the last restart
	speech int64    // of them, speech
	queued int64    // speech samples enqueued since the last restart
	closed bool
}

// segLog is one Read's output: speech or silence, ending at handed
// samples with speech samples of speech before its end.
type segLog struct {
	end, speechEnd int64
	isSpeech       bool
}

func (q *sampleQueue) push(s []float32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.chunks = append(q.chunks, append([]float32(nil), s...))
	q.queued += int64(len(s))
}

// drop forgets what is queued and not yet read.
func (q *sampleQueue) drop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.chunks, q.head, q.partN = nil, 0, 0
}

// restart counts positions from zero again, after the player's buffer
// was emptied.
func (q *sampleQueue) restart() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.segs, q.handed, q.speech, q.queued = nil, 0, 0, 0
}

func (q *sampleQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.chunks, q.head, q.partN = nil, 0, 0
}

func (q *sampleQueue) enqueued() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// speechAt is how many speech samples have been played when the last
// buffered samples handed out are still unplayed.
func (q *sampleQueue) speechAt(buffered int) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	at := q.handed - int64(buffered)
	if at < 0 {
		at = 0
	}
	// Segments wholly before at are never needed again: what oto buffers
	// only shrinks from the front.
	for len(q.segs) > 1 && q.segs[0].end <= at {
		q.segs = q.segs[1:]
	}
	for _, s := range q.segs {
		if at <= s.end {
			if !s.isSpeech {
				return s.speechEnd
			}
			return s.speechEnd - (s.end - at)
		}
	}
	return q.speech
}

// Read hands out whole samples: speech while there is some, else up to
// silenceRead samples of silence; io.EOF once closed.
func (q *sampleQueue) Read(b []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, io.EOF
	}
	n := 0
	if q.partN > 0 {
		n = copy(b, q.part[4-q.partN:])
		q.partN -= n
		if q.partN > 0 || n == len(b) {
			return n, nil
		}
	}
	want := (len(b) - n) / 4
	if want == 0 {
		// Less room than one sample: split the next one.
		var one [4]byte
		q.next(one[:])
		q.part = one
		q.partN = 4
		k := copy(b[n:], q.part[:])
		q.partN -= k
		return n + k, nil
	}
	k := q.next(b[n : n+4*want])
	return n + 4*k, nil
}

// next writes up to len(b)/4 samples into b, speech or silence but not
// both, logs them and returns how many.
func (q *sampleQueue) next(b []byte) int {
	want := len(b) / 4
	if len(q.chunks) == 0 {
		k := min(want, silenceRead)
		clear(b[:4*k])
		q.log(k, false)
		return k
	}
	k := 0
	for k < want && len(q.chunks) > 0 {
		c := q.chunks[0][q.head:]
		m := min(len(c), want-k)
		for i, x := range c[:m] {
			binary.LittleEndian.PutUint32(b[4*(k+i):], math.Float32bits(x))
		}
		k += m
		q.head += m
		if q.head == len(q.chunks[0]) {
			q.chunks[0] = nil
			q.chunks, q.head = q.chunks[1:], 0
		}
	}
	q.log(k, true)
	return k
}

func (q *sampleQueue) log(k int, isSpeech bool) {
	q.handed += int64(k)
	if isSpeech {
		q.speech += int64(k)
	}
	if n := len(q.segs); n > 0 && q.segs[n-1].isSpeech == isSpeech {
		q.segs[n-1].end, q.segs[n-1].speechEnd = q.handed, q.speech
		return
	}
	q.segs = append(q.segs, segLog{end: q.handed, speechEnd: q.speech, isSpeech: isSpeech})
}
