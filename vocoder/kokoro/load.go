package kokoro

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A Kokoro directory is laid out as hexgrad/Kokoro-82M publishes it:
//
//	config.json
//	kokoro-v1_0.pth      (or the same weights as .safetensors)
//	voices/af_heart.pt   (or .bin, as kokoro.js has them)
const (
	ConfigFile  = "config.json"
	WeightsFile = "kokoro-v1_0.pth"
	VoicesDir   = "voices"
)

// weightExts are the weight formats OpenWeights reads.
var weightExts = []string{".pth", ".safetensors"}

// LoadModel loads Kokoro from path: a Kokoro directory, or a .pth or
// .safetensors file with config.json beside it. The errors name the file
// that is missing or bad and what belongs there; they are a user's to
// read, so the ones about the directory carry no package name (the
// caller says how to get the model).
func LoadModel(path string) (*Model, error) {
	weights, cfgPath, err := ModelFiles(path)
	if err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	w, err := OpenWeights(weights)
	if err != nil {
		return nil, err
	}
	m, err := NewModel(cfg, w)
	if err != nil {
		return nil, fmt.Errorf("%w (weights %s, config %s)", err, weights, cfgPath)
	}
	return m, nil
}

// ModelFiles finds the weights and the config.json that LoadModel reads
// from path, without reading them: a quick check that the model is there,
// with LoadModel's errors for a missing file.
func ModelFiles(path string) (weights, config string, err error) {
	weights, err = findWeights(path)
	if err != nil {
		return "", "", err
	}
	config = filepath.Join(filepath.Dir(weights), ConfigFile)
	if _, err := os.Stat(config); errors.Is(err, fs.ErrNotExist) {
		return "", "", missingf("no %s beside %s: Kokoro-82M's %s goes in %s", ConfigFile, weights, ConfigFile, filepath.Dir(weights))
	}
	return weights, config, nil
}

// findWeights is the weights file path names: path itself when it is a
// file, else the directory's kokoro-v1_0.pth, else its one .pth or
// .safetensors file.
func findWeights(path string) (string, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", missingf("%s does not exist (a Kokoro directory holds %s, %s and %s/)", path, ConfigFile, WeightsFile, VoicesDir)
	}
	if err != nil {
		return "", fmt.Errorf("the Kokoro directory: %w", err)
	}
	if !info.IsDir() {
		if !slices.Contains(weightExts, strings.ToLower(filepath.Ext(path))) {
			return "", fmt.Errorf("%s: want Kokoro's weights as .pth or .safetensors, or the directory that holds them", path)
		}
		return path, nil
	}
	if p := filepath.Join(path, WeightsFile); fileExists(p) {
		return p, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return "", fmt.Errorf("the Kokoro directory: %w", err)
	}
	var found []string
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(weightExts, strings.ToLower(filepath.Ext(e.Name()))) {
			found = append(found, filepath.Join(path, e.Name()))
		}
	}
	switch len(found) {
	case 0:
		return "", missingf("no %s (nor another .pth or .safetensors) in %s, which should hold Kokoro-82M's %s, %s and voice packs in %s",
			WeightsFile, path, WeightsFile, ConfigFile, filepath.Join(path, VoicesDir))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s holds several weight files (%s) and no %s: name one", path, strings.Join(found, ", "), WeightsFile)
}

func fileExists(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir()
}

// VoicesIn is the folder of dir's voice packs: dir/voices when it exists,
// else dir itself (a folder of packs given directly).
func VoicesIn(dir string) string {
	if info, err := os.Stat(filepath.Join(dir, VoicesDir)); err == nil && info.IsDir() {
		return filepath.Join(dir, VoicesDir)
	}
	return dir
}

// ListVoicesIn names the voice packs of a Kokoro directory (VoicesIn),
// with an error that says where to put them when there are none.
func ListVoicesIn(dir string) ([]string, error) {
	vd := VoicesIn(dir)
	names, err := ListVoices(vd)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, missingf("no voices: %s is not there (Kokoro's voice packs, af_heart.pt and the others, go in %s)", vd, filepath.Join(dir, VoicesDir))
	case err != nil:
		// The folder is there (or something else is in its place): telling
		// the user to put files in it would not help. The cause is kept,
		// so a permission error still matches fs.ErrPermission.
		return nil, fmt.Errorf("the voices folder %s cannot be read: %w", vd, unwrapped(err))
	}
	if len(names) == 0 {
		return nil, missingf("no voice packs (*.pt, *.bin) in %s (Kokoro's voice packs, af_heart.pt and the others, go in %s)", vd, filepath.Join(dir, VoicesDir))
	}
	return names, nil
}

// unwrapped is err's cause when it wraps one, else err.
func unwrapped(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// missingf is an error for a file of the model that is not there: it
// matches fs.ErrNotExist, which the engine turns into its "no voice
// model" error, apart from files that are there and bad.
func missingf(format string, args ...any) error {
	return &missingError{fmt.Sprintf(format, args...)}
}

type missingError struct{ msg string }

func (e *missingError) Error() string        { return e.msg }
func (e *missingError) Is(target error) bool { return target == fs.ErrNotExist }
