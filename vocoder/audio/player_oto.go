//go:build !linux || cgo

package audio

import (
	"fmt"
	"sync"

	"github.com/ebitengine/oto/v3"
)

// oto allows one context per process (a second NewContext fails with
// "context is already created", even after the first failed) and its
// context has one sample rate. So the context is made once, lazily, by
// the first NewPlayer, at Kokoro's 24 kHz, and kept: a process-wide
// variable that oto forces on us. A failure to open the device is kept
// too: it cannot be retried within the process.
var audio struct {
	once sync.Once
	ctx  *oto.Context
	err  error
}

func audioContext() (*oto.Context, error) {
	audio.once.Do(func() {
		quietALSA()
		ctx, ready, err := oto.NewContext(&oto.NewContextOptions{
			SampleRate: SampleRate, ChannelCount: 1, Format: oto.FormatFloat32LE, BufferSize: deviceBuffer,
		})
		if err != nil {
			audio.err = fmt.Errorf("%w: %v", ErrNoAudioDevice, err)
			return
		}
		<-ready // the device is opened in the background; its error comes after
		if err := ctx.Err(); err != nil {
			audio.err = fmt.Errorf("%w: %v", ErrNoAudioDevice, err)
			return
		}
		audio.ctx = ctx
	})
	return audio.ctx, audio.err
}

// NewPlayer opens the sound card (once per process) and returns a player
// on it. Without one it returns an error wrapping ErrNoAudioDevice;
// synthesis and WAV output do not need it.
func NewPlayer() (*Player, error) {
	ctx, err := audioContext()
	if err != nil {
		return nil, err
	}
	q := &sampleQueue{}
	op := ctx.NewPlayer(q)
	op.SetBufferSize(int(playerBuffer.Seconds()*SampleRate) * 4)
	return newPlayer(q, op, deviceBuffer), nil
}
