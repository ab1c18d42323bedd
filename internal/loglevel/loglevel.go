// Package loglevel reads HEARTH_LOG, how much of the native libraries'
// diagnostics (wgpu-native's log, the GPU driver's) reaches stderr. The
// default, error, keeps routine warnings such as a missing Vulkan extension
// out of every command's output and still shows real failures; hearth's
// --verbose flag is HEARTH_LOG=debug.
package loglevel

import (
	"fmt"
	"os"
	"strings"
)

// Env is the environment variable that sets the level.
const Env = "HEARTH_LOG"

// Level is how much is logged: each level includes the ones before it.
type Level int

// The levels, quietest first.
const (
	Error Level = iota
	Warn
	Info
	Debug
)

var names = [...]string{Error: "error", Warn: "warn", Info: "info", Debug: "debug"}

// String is the level's name as HEARTH_LOG spells it.
func (l Level) String() string {
	if l < Error || l > Debug {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return names[l]
}

// Parse reads a level's name; empty is the default, Error.
func Parse(s string) (Level, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Error, nil
	}
	if s == "warning" {
		return Warn, nil
	}
	for l, name := range names {
		if s == name {
			return Level(l), nil
		}
	}
	return Error, fmt.Errorf("%s %q: want debug, info, warn or error", Env, s)
}

// FromEnv is the level HEARTH_LOG sets.
func FromEnv() (Level, error) { return Parse(os.Getenv(Env)) }
