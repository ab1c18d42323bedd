//go:build linux && !cgo

package audio

import "fmt"

// NewPlayer fails in a build without cgo: on Linux oto reaches ALSA
// through cgo.
func NewPlayer() (*Player, error) {
	return nil, fmt.Errorf("%w: this hearth was built without cgo, which playback through ALSA needs", ErrNoAudioDevice)
}
