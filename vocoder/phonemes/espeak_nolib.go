//go:build !(cgo && (linux || darwin || freebsd))

package phonemes

import "errors"

// Without cgo (or on Windows) the library is not loaded; the espeak-ng
// command is used instead.
func openEspeakLib() (espeakBackend, error) {
	return nil, errors.New("libespeak-ng is loaded only in cgo builds for Linux, macOS and FreeBSD")
}
