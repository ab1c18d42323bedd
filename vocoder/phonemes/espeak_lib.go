//go:build cgo && (linux || darwin || freebsd)

package phonemes

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// The few entry points of libespeak-ng that phonemizing needs, declared
// here and bound with dlsym so that building Hearth needs no espeak-ng
// headers and running it needs the library only when it speaks
// (speak_lib.h and espeak_ng.h of espeak-ng 1.49 and later).
static void (*p_InitializePath)(const char *path);
static int (*p_Initialize)(void **context);
static int (*p_InitializeOutput)(int mode, int buffer_length, const char *device);
static int (*p_SetVoiceByName)(const char *name);
static const char *(*p_TextToPhonemes)(const void **textptr, int textmode, int phonememode);

static const char *hearth_espeak_open(const char *name) {
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!lib) return dlerror();
	p_InitializePath = dlsym(lib, "espeak_ng_InitializePath");
	p_Initialize = dlsym(lib, "espeak_ng_Initialize");
	p_InitializeOutput = dlsym(lib, "espeak_ng_InitializeOutput");
	p_SetVoiceByName = dlsym(lib, "espeak_ng_SetVoiceByName");
	p_TextToPhonemes = dlsym(lib, "espeak_TextToPhonemes");
	if (!p_InitializePath || !p_Initialize || !p_InitializeOutput || !p_SetVoiceByName || !p_TextToPhonemes) {
		dlclose(lib);
		return "the library lacks the espeak_ng_* entry points (espeak-ng older than 1.49?)";
	}
	return NULL;
}

// hearth_espeak_init loads the phoneme data. The espeak_ng_* calls return
// a status instead of exiting the process as espeak_Initialize does when
// its data is missing. Output mode 1 is ENOUTPUT_MODE_SYNCHRONOUS without
// ENOUTPUT_MODE_SPEAK_AUDIO: no audio device is opened.
static int hearth_espeak_init(void) {
	void *ctx = NULL;
	p_InitializePath(NULL);
	int st = p_Initialize(&ctx);
	if (st != 0) return st;
	return p_InitializeOutput(1, 0, NULL);
}

static int hearth_espeak_voice(const char *name) { return p_SetVoiceByName(name); }

// hearth_espeak_clause phonemizes the clause at *text and advances *text
// past it (NULL at the end). Mode: bit 1 IPA, bit 7 and bits 8-15 a tie
// character '^' inside multi-letter phonemes, as phonemizer's
// EspeakBackend(tie='^') asks for, which misaki's tables expect.
static const char *hearth_espeak_clause(const void **text) {
	return p_TextToPhonemes(text, 1, 0x02 | 0x80 | ('^' << 8));
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// espeakLib is libespeak-ng loaded at run time. The library keeps one
// global state (the loaded voice, the translator's buffers), so every use
// holds libMu: concurrent Phonemizers take turns, which costs little since
// a 100 KB text phonemizes in a fraction of a second.
type espeakLib struct{}

var (
	libOnce sync.Once
	libErr  error
	libMu   sync.Mutex
)

// libNames are where the library is looked for: HEARTH_ESPEAK_LIB, then the
// sonames of Debian's libespeak-ng1 and of Homebrew's espeak-ng.
func libNames() []string {
	names := []string{}
	if p := os.Getenv("HEARTH_ESPEAK_LIB"); p != "" {
		names = append(names, p)
	}
	if runtime.GOOS == "darwin" {
		return append(names, "libespeak-ng.1.dylib", "/opt/homebrew/lib/libespeak-ng.1.dylib", "/usr/local/lib/libespeak-ng.1.dylib")
	}
	return append(names, "libespeak-ng.so.1", "libespeak-ng.so")
}

func openEspeakLib() (espeakBackend, error) {
	libOnce.Do(func() {
		var errs []string
		for _, n := range libNames() {
			cn := C.CString(n)
			msg := C.hearth_espeak_open(cn)
			C.free(unsafe.Pointer(cn))
			if msg == nil {
				if st := C.hearth_espeak_init(); st != 0 {
					libErr = fmt.Errorf("%s: initialising espeak-ng failed (status %#x): is espeak-ng-data installed?", n, int(st))
				}
				return
			}
			errs = append(errs, C.GoString(msg))
		}
		libErr = fmt.Errorf("libespeak-ng not loaded: %s", strings.Join(errs, "; "))
	})
	if libErr != nil {
		return nil, libErr
	}
	return espeakLib{}, nil
}

// libVoiceAliases are other names of a voice for espeak_ng_SetVoiceByName,
// which matches voice names and files but not languages: espeak-ng's
// British English is the file gmw/en (language en-gb), where American is
// gmw/en-US. The command line's -v resolves languages itself.
var libVoiceAliases = map[string][]string{"en-gb": {"en"}}

func (espeakLib) name() string { return "libespeak-ng" }

func (espeakLib) phonemes(voice string, lines []string) ([]string, error) {
	libMu.Lock()
	defer libMu.Unlock()
	var st C.int
	for _, v := range append([]string{voice}, libVoiceAliases[voice]...) {
		cv := C.CString(v)
		st = C.hearth_espeak_voice(cv)
		C.free(unsafe.Pointer(cv))
		if st == 0 {
			break
		}
	}
	if st != 0 {
		return nil, fmt.Errorf("espeak-ng has no voice %q (status %#x)", voice, int(st))
	}
	out := make([]string, len(lines))
	var sb strings.Builder
	for i, line := range lines {
		sb.Reset()
		ct := C.CString(line)
		p := unsafe.Pointer(ct)
		// One call per clause; a long line may be more than one.
		for p != nil {
			ph := C.GoString(C.hearth_espeak_clause(&p))
			if ph = strings.TrimSpace(ph); ph != "" {
				if sb.Len() > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(ph)
			}
		}
		C.free(unsafe.Pointer(ct))
		out[i] = sb.String()
	}
	return out, nil
}
