//go:build !linux

package vocoder

// quietALSA does nothing where sound does not go through ALSA.
func quietALSA() {}
