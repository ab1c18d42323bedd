package phonemes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// espeak-ng turns words into IPA. Two ways to reach it, tried in order:
//
//   - libespeak-ng, loaded with dlopen (espeak_lib.go): espeak_TextToPhonemes
//     is what misaki's EspeakFallback calls through phonemizer, and it is
//     fast: 18k words in 0.25 s on one core, where the command line,
//     which runs the synthesiser for every clause even with -q, took
//     9.7 s. Loading it at run time keeps the hearth binary free of a
//     link-time dependency, so the studio starts without espeak-ng and
//     only speaking needs it.
//   - the espeak-ng command (Windows, builds without cgo, or a library
//     that would not load): the same IPA, line by line through one process.
//
// Debian's espeak-ng package brings both (libespeak-ng1 and the command).

// espeakBackend phonemizes lines of words (no punctuation) with one
// espeak-ng voice: one IPA string per line, words separated by spaces.
type espeakBackend interface {
	name() string
	phonemes(voice string, lines []string) ([]string, error)
}

// ErrNoEspeak is wrapped by NewPhonemizer's error when neither the
// library nor the command is on the machine.
var ErrNoEspeak = errors.New("espeak-ng is not installed: speech needs it for phonemes (Debian/Ubuntu: apt-get install espeak-ng; macOS: brew install espeak-ng)")

var (
	backendOnce sync.Once
	backend     espeakBackend
	backendErr  error
)

// findEspeak picks the backend once per process.
func findEspeak() (espeakBackend, error) {
	backendOnce.Do(func() {
		lib, libErr := openEspeakLib()
		if libErr == nil {
			backend = lib
			return
		}
		path, err := findEspeakCommand()
		if err == nil {
			backend = &espeakCLI{path: path}
			return
		}
		backendErr = fmt.Errorf("%w (%v; no espeak-ng command on PATH)", ErrNoEspeak, libErr)
	})
	return backend, backendErr
}

// espeakCLI runs the espeak-ng command: it reads standard input one line
// at a time and writes one line of IPA for each.
type espeakCLI struct{ path string }

func (c *espeakCLI) name() string { return c.path }

func (c *espeakCLI) phonemes(voice string, lines []string) ([]string, error) {
	if len(lines) == 0 {
		return nil, nil
	}
	cmd := exec.CommandContext(context.Background(), c.path, "-q", "--ipa", "--tie=^", "-v", voice)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", c.path, err, strings.TrimSpace(stderr.String()))
	}
	out := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	if len(out) != len(lines) {
		return nil, fmt.Errorf("%s: %d lines of phonemes for %d lines of text", c.path, len(out), len(lines))
	}
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out, nil
}

func findEspeakCommand() (string, error) { return exec.LookPath("espeak-ng") }
