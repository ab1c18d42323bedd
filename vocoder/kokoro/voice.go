package kokoro

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hearthstudio/hearth/pth"
)

// A Kokoro voice pack holds one style vector per utterance length: row
// n-1 is used for an utterance of n phonemes (kokoro's pipeline calls the
// model with pack[len(ps)-1]). Of each 256-value row the first 128
// condition the decoder (timbre) and the last 128 the prosody predictor.
const (
	VoiceRows = 510
	VoiceDim  = 256
)

// A Voice is a voice pack, VoiceRows×VoiceDim values row-major.
type Voice struct {
	Name string
	Pack []float32
}

// LoadVoice reads a voice pack: a raw .bin (VoiceRows×VoiceDim
// little-endian f32, as kokoro.js distributes them) or a released .pt
// (torch.save of a [510, 1, 256] tensor, any float dtype).
func LoadVoice(path string) (*Voice, error) {
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("voice pack: %w", err)
	}
	var pack []float32
	if bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		pack, err = voiceFromPT(data)
	} else {
		pack, err = voiceFromBin(data)
	}
	if err != nil {
		return nil, fmt.Errorf("voice pack %s: %w", path, err)
	}
	for i, x := range pack {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("voice pack %s: value %g at row %d, column %d", path, x, i/VoiceDim, i%VoiceDim)
		}
	}
	return &Voice{Name: name, Pack: pack}, nil
}

func voiceFromBin(data []byte) ([]float32, error) {
	const want = VoiceRows * VoiceDim * 4
	if len(data) != want {
		return nil, fmt.Errorf("%d bytes, want %d (%d×%d float32): not a Kokoro voice pack", len(data), want, VoiceRows, VoiceDim)
	}
	pack := make([]float32, VoiceRows*VoiceDim)
	for i := range pack {
		pack[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return pack, nil
}

func voiceFromPT(data []byte) ([]float32, error) {
	obj, err := pth.Load(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	pt, ok := obj.(*pth.View)
	if !ok {
		return nil, fmt.Errorf("holds a %T, want one tensor", obj)
	}
	t, err := pt.Materialize("voice")
	if err != nil {
		return nil, err
	}
	// [510, 1, 256] as released; [510, 256] is the same data.
	if !shapeMatches(t.Shape, []int{VoiceRows, 1, VoiceDim}) && !shapeMatches(t.Shape, []int{VoiceRows, VoiceDim}) {
		return nil, fmt.Errorf("tensor of shape %v, want [%d 1 %d]", t.Shape, VoiceRows, VoiceDim)
	}
	return t.Data, nil
}

// Style returns the style vector for an utterance of n phoneme tokens
// (not counting the two pads): row n-1 of the pack, a copy.
func (v *Voice) Style(n int) ([]float32, error) {
	if n < 1 || n > VoiceRows {
		return nil, fmt.Errorf("voice pack %s: no style for %d phonemes (1 to %d)", v.Name, n, VoiceRows)
	}
	return slices.Clone(v.Pack[(n-1)*VoiceDim : n*VoiceDim]), nil
}

// voiceExts are the pack formats a voice directory may hold, in order of
// preference when a name has both.
var voiceExts = []string{".pt", ".bin"}

// ListVoices names the voice packs in dir (af_heart for af_heart.pt or
// af_heart.bin), sorted.
func ListVoices(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("voice packs: %w", err)
	}
	seen := map[string]bool{}
	var names []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || !slices.Contains(voiceExts, ext) {
			continue
		}
		n := strings.TrimSuffix(e.Name(), ext)
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// A VoiceWeight is one term of a blend.
type VoiceWeight struct {
	Name   string
	Weight float64
}

// ParseVoiceSpec reads "af_heart", "af_heart,am_adam" or
// "af_heart:0.6,am_adam:0.4": voice names (or paths to .pt/.bin packs),
// each with an optional positive weight (1 when left out).
func ParseVoiceSpec(spec string) ([]VoiceWeight, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New("empty voice: name one, such as af_heart, or a blend such as af_heart:0.6,am_adam:0.4")
	}
	var out []VoiceWeight
	for _, term := range strings.Split(spec, ",") {
		term = strings.TrimSpace(term)
		name, w, hasW := term, 1.0, false
		// A weight follows the last colon, unless that colon is part of
		// a Windows drive letter (C:\voices\x.pt).
		if i := strings.LastIndex(term, ":"); i >= 0 && !strings.ContainsAny(term[i+1:], `/\`) {
			name, hasW = strings.TrimSpace(term[:i]), true
			var err error
			w, err = strconv.ParseFloat(strings.TrimSpace(term[i+1:]), 64)
			if err != nil {
				return nil, fmt.Errorf("voice spec %q: weight %q of %q is not a number", spec, term[i+1:], name)
			}
		}
		if name == "" {
			return nil, fmt.Errorf("voice spec %q: a term without a voice name", spec)
		}
		if hasW && (!(w > 0) || math.IsInf(w, 0)) {
			return nil, fmt.Errorf("voice spec %q: weight %g of %q must be a positive number", spec, w, name)
		}
		for _, o := range out {
			if o.Name == name {
				return nil, fmt.Errorf("voice spec %q: %q named twice", spec, name)
			}
		}
		out = append(out, VoiceWeight{name, w})
	}
	return out, nil
}

// OpenVoice loads the voice spec names (see ParseVoiceSpec) from dir and
// blends them. A single name is that pack as it is. An unknown name is an
// error that lists the voices dir has.
func OpenVoice(dir, spec string) (*Voice, error) {
	terms, err := ParseVoiceSpec(spec)
	if err != nil {
		return nil, err
	}
	voices := make([]*Voice, len(terms))
	weights := make([]float64, len(terms))
	for i, t := range terms {
		path, err := findVoice(dir, t.Name)
		if err != nil {
			return nil, err
		}
		if voices[i], err = LoadVoice(path); err != nil {
			return nil, err
		}
		weights[i] = t.Weight
	}
	if len(voices) == 1 {
		return voices[0], nil
	}
	v, err := BlendVoices(voices, weights)
	if err != nil {
		return nil, err
	}
	v.Name = spec
	return v, nil
}

func findVoice(dir, name string) (string, error) {
	if ext := filepath.Ext(name); slices.Contains(voiceExts, ext) || strings.ContainsAny(name, `/\`) {
		return name, nil // a path, as kokoro's load_single_voice takes one ending in .pt
	}
	for _, ext := range voiceExts {
		p := filepath.Join(dir, name+ext)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	have, err := ListVoices(dir)
	if err != nil {
		return "", fmt.Errorf("voice %q: %w", name, err)
	}
	if len(have) == 0 {
		return "", missingf("voice %q: %s has no voice packs (*.pt, *.bin)", name, dir)
	}
	return "", fmt.Errorf("unknown voice %q; %s has %s", name, dir, strings.Join(have, ", "))
}

// BlendVoices is the weighted mean of packs, the weights normalised to sum
// to 1. With equal weights it is kokoro's blend exactly: KPipeline.load_voice
// takes "af_bella,af_jessica" to torch.mean(torch.stack(packs), dim=0).
// The "name:weight" form is ours (kokoro's own spec has no weights); the
// normalisation makes "a:3,b:1" and "a:0.75,b:0.25" the same voice, and
// keeps a blend a point between its packs, inside the region the
// predictor and decoder were trained on.
func BlendVoices(voices []*Voice, weights []float64) (*Voice, error) {
	if len(voices) == 0 || len(voices) != len(weights) {
		return nil, fmt.Errorf("kokoro: blend of %d voices with %d weights", len(voices), len(weights))
	}
	var total float64
	for i, w := range weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("kokoro: blend: weight %g of %s must be a positive number", w, voices[i].Name)
		}
		total += w
	}
	acc := make([]float64, VoiceRows*VoiceDim)
	for i, v := range voices {
		if len(v.Pack) != len(acc) {
			return nil, fmt.Errorf("kokoro: blend: voice %s has %d values, want %d", v.Name, len(v.Pack), len(acc))
		}
		w := weights[i] / total
		for j, x := range v.Pack {
			acc[j] += w * float64(x)
		}
	}
	out := &Voice{Pack: make([]float32, len(acc))}
	for j, x := range acc {
		out.Pack[j] = float32(x)
	}
	return out, nil
}
