// Package settings keeps the studio's preferences in one JSON file in the
// user's config folder, written atomically so a crash never leaves half a
// file.
package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/internal/atomicfile"
	"github.com/hearthstudio/hearth/internal/units"
)

// Settings are the studio's preferences.
type Settings struct {
	// Backend is "auto", "gpu" or "cpu"; Adapter a substring of the
	// adapter's name to prefer ("" lets Hearth choose).
	Backend string `json:"backend"`
	Adapter string `json:"adapter,omitempty"`
	// Context is the KV cache's length (0: the model's, at most 8192).
	Context int `json:"context,omitempty"`
	// GPUMemory bounds a model's estimate, as `--gpu-memory` takes it.
	GPUMemory string `json:"gpu_memory,omitempty"`
	// Parallel is how many replies are generated at once, the studio's
	// and API clients' (`hearth serve --parallel`); 0 is 1.
	Parallel int `json:"parallel,omitempty"`
	// Folders are model folders the user added to the library.
	Folders []string `json:"folders,omitempty"`
	// Files are single models the user dropped on the window, listed
	// beside the folders' models.
	Files []string `json:"files,omitempty"`
	// LastModel is loaded again at start.
	LastModel string `json:"last_model,omitempty"`
	// System is the system prompt of new chats.
	System   string   `json:"system,omitempty"`
	Sampling Sampling `json:"sampling"`
	// Serve starts the API server with the studio, on ServerAddr.
	Serve      bool   `json:"serve,omitempty"`
	ServerAddr string `json:"server_addr,omitempty"`
	// Tune are the Tune tab's last choices. Settings files written before
	// the tab existed have none, which leaves the tab at its defaults.
	Tune Tune `json:"tune,omitzero"`
	// Voice are the Voice tab's last choices, which the chat's read-aloud
	// speaks with too; none leaves the tab at its defaults.
	Voice Voice `json:"voice,omitzero"`
}

// Voice are the Voice tab's choices.
type Voice struct {
	// Voice is the voice or blend as hearth speak's --voice takes it
	// (af_heart, af_heart:0.6,am_adam:0.4); "" is the tab's default.
	Voice string `json:"voice,omitempty"`
	// Speed is the tab's speed, VoiceSpeedMin to VoiceSpeedMax; 0 is 1.
	Speed float64 `json:"speed,omitempty"`
	// Float exports 32-bit float WAV rather than 16-bit PCM.
	Float bool `json:"float,omitempty"`
}

// The Voice tab's speed range (the engine takes 0.25 to 4; the tab's
// slider offers what sounds natural).
const (
	VoiceSpeedMin = 0.5
	VoiceSpeedMax = 2
)

// Tune are the Tune tab's choices: what to train, from what, into where,
// and how. A zero number means "the preset's".
type Tune struct {
	// Model is the base model's library name; Data the dataset file.
	Model string `json:"model,omitempty"`
	Data  string `json:"data,omitempty"`
	// OutDir is the folder adapters are written to ("": the studio's
	// adapters folder); Out the adapter's file name in it, when the user
	// chose one ("": <dataset>-<model>.gguf).
	OutDir string `json:"out_dir,omitempty"`
	Out    string `json:"out,omitempty"`
	// Preset names one of training.Presets.
	Preset string `json:"preset,omitempty"`
	// The advanced values, as the Tune tab's fields and hearth train's
	// flags name them.
	Rank   int     `json:"rank,omitempty"`
	Alpha  float32 `json:"alpha,omitempty"`
	LR     float64 `json:"lr,omitempty"`
	Epochs float64 `json:"epochs,omitempty"`
	SeqLen int     `json:"seq_len,omitempty"`
	Batch  int     `json:"batch,omitempty"`
	Accum  int     `json:"accum,omitempty"`
	// Valid is the validation share; 0 is the default (5%), negative none.
	Valid float64 `json:"valid,omitempty"`
}

// Sampling are the chat's sampler settings, as llama.cpp names them.
type Sampling struct {
	Temperature   float32 `json:"temperature"`
	TopK          int     `json:"top_k"`
	TopP          float32 `json:"top_p"`
	MinP          float32 `json:"min_p"`
	RepeatPenalty float32 `json:"repeat_penalty"`
	// MaxTokens bounds a reply; 0 is until the end of the turn.
	MaxTokens int `json:"max_tokens"`
}

// Options are the sampler options these settings give, with seed.
func (s Sampling) Options(seed uint64) sample.Options {
	o := sample.Defaults()
	o.Temperature, o.TopK, o.TopP, o.MinP, o.RepeatPenalty = s.Temperature, s.TopK, s.TopP, s.MinP, s.RepeatPenalty
	o.Seed = seed
	return o
}

// Defaults are the settings of a first start: llama.cpp's sampler defaults.
func Defaults() Settings {
	d := sample.Defaults()
	return Settings{
		Backend:    "auto",
		Sampling:   Sampling{Temperature: d.Temperature, TopK: d.TopK, TopP: d.TopP, MinP: d.MinP, RepeatPenalty: d.RepeatPenalty},
		ServerAddr: "127.0.0.1:11435",
	}
}

// Dir is Hearth's folder in the user's config folder (~/.config/hearth on
// Linux), where settings and chat histories live.
func Dir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("settings: %w", err)
	}
	return filepath.Join(base, "hearth"), nil
}

// Load reads the settings at path. A missing file gives the defaults. A
// file that cannot be parsed also gives the defaults, with an error that
// says so; the file is left as it is until the next Save, so nothing the
// user wrote by hand is lost silently before they are told.
func Load(path string) (Settings, error) {
	s := Defaults()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("settings: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return Defaults(), fmt.Errorf("settings: %s is not valid settings JSON (%v); using the defaults", path, err)
	}
	if v := s.Voice.Speed; v != 0 && !(v >= VoiceSpeedMin && v <= VoiceSpeedMax) {
		s.Voice.Speed = 0
		return s, fmt.Errorf("settings: %s: voice speed %v is outside %v..%v; using 1", path, v, VoiceSpeedMin, VoiceSpeedMax)
	}
	if err := s.Sampling.Options(0).Validate(); err != nil {
		s.Sampling = Defaults().Sampling
		return s, fmt.Errorf("settings: %s: sampling: %v; using the default sampling", path, err)
	}
	return s, nil
}

// Save writes s to path atomically, creating its folder.
func Save(path string, s Settings) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	return atomicfile.Write(path, append(data, '\n'), 0o644)
}

// FormatSize is a byte count as the studio shows it: units.Bytes ("512 B",
// "906 KiB", "1.5 GiB"), and "–" for none.
func FormatSize(n int64) string {
	if n <= 0 {
		return "–"
	}
	return units.Bytes(uint64(n))
}

// ParseSize reads a size in bytes as --gpu-memory, --max-body and the
// studio's memory limit take it: a positive number with an optional unit,
// binary (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB, TB, B), in any case
// and with or without a space: "8GiB", "7.5 GB", "512mib", "1048576".
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		scale  float64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	scale := 1.0
	for _, u := range units {
		// Longer suffixes come first, so "GiB" never matches as "B".
		if strings.HasSuffix(strings.ToUpper(t), u.suffix) {
			t, scale = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.scale
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || v*scale >= math.MaxUint64 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with a unit, such as 6GiB, 8000 MB or 1048576", s)
	}
	return uint64(v * scale), nil
}
