//go:build linux && cgo

package audio

// #cgo pkg-config: alsa
// #include <alsa/asoundlib.h>
//
// static void hearthQuietALSA(const char *file, int line, const char *function, int err, const char *fmt, ...) {}
// static void hearthSetQuietALSA(void) { snd_lib_error_set_handler(hearthQuietALSA); }
import "C"

// quietALSA stops libasound printing its own diagnostics to stderr:
// on a machine without a sound card, opening the device prints some
// twenty "ALSA lib confmisc.c: cannot find card '0'" lines, when oto's
// error (wrapped in ErrNoAudioDevice) already says what failed.
func quietALSA() { C.hearthSetQuietALSA() }
