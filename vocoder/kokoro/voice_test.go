package kokoro

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/internal/sharedtest"
	"github.com/hearthstudio/hearth/pth/pthtest"
	"github.com/x448/float16"
)

// voicesDir is shared/testdata/kokoro/voices: the real af_heart, am_adam
// and bf_emma packs (see its README).
func voicesDir(tb testing.TB) string {
	return filepath.Join(sharedtest.Dir(tb, "kokoro"), "voices")
}

func TestLoadVoiceBin(t *testing.T) {
	dir := voicesDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "af_heart.bin"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVoice(filepath.Join(dir, "af_heart.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "af_heart" || len(v.Pack) != VoiceRows*VoiceDim {
		t.Fatalf("name %q, %d values", v.Name, len(v.Pack))
	}
	at := func(row, col int) float32 {
		return math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(row*VoiceDim+col):]))
	}
	for _, n := range []int{1, 2, 37, VoiceRows} {
		s, err := v.Style(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, col := range []int{0, 127, 128, 255} {
			if s[col] != at(n-1, col) {
				t.Errorf("Style(%d)[%d] = %g, want row %d's %g", n, col, s[col], n-1, at(n-1, col))
			}
		}
	}
	// Rows differ: the pack really is indexed by length.
	s1, _ := v.Style(1)
	s2, _ := v.Style(200)
	if slices.Equal(s1, s2) {
		t.Error("rows 0 and 199 are equal")
	}
	for _, n := range []int{0, -1, VoiceRows + 1} {
		if _, err := v.Style(n); err == nil || !strings.Contains(err.Error(), "af_heart") {
			t.Errorf("Style(%d): %v", n, err)
		}
	}
}

// A released .pt pack (torch.save of a [510, 1, 256] tensor) loads to the
// same values as the .bin, in f32 and (rounded) in f16.
func TestLoadVoicePT(t *testing.T) {
	bin, err := LoadVoice(filepath.Join(voicesDir(t), "am_adam.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dtype := range []string{"F32", "F16"} {
		f := &pthtest.File{
			Archive:  "am_adam",
			Storages: map[string]pthtest.Storage{"0": {DType: dtype, Data: bin.Pack}},
			Top:      &pthtest.Tensor{Storage: "0", Size: []int{VoiceRows, 1, VoiceDim}},
		}
		path := writeTemp(t, "am_adam.pt", f.Bytes(t))
		pt, err := LoadVoice(path)
		if err != nil {
			t.Fatal(err)
		}
		if pt.Name != "am_adam" {
			t.Errorf("name %q", pt.Name)
		}
		for i, x := range bin.Pack {
			want := x
			if dtype == "F16" {
				want = float16.Fromfloat32(x).Float32()
			}
			if pt.Pack[i] != want {
				t.Fatalf("%s: value %d = %g, want %g", dtype, i, pt.Pack[i], want)
			}
		}
	}
	wrong := &pthtest.File{Archive: "x", Storages: map[string]pthtest.Storage{"0": {DType: "F32", Data: make([]float32, 512)}},
		Top: &pthtest.Tensor{Storage: "0", Size: []int{2, 256}}}
	if _, err := LoadVoice(writeTemp(t, "x.pt", wrong.Bytes(t))); err == nil || !strings.Contains(err.Error(), "shape [2 256], want [510 1 256]") {
		t.Errorf("wrong shape: %v", err)
	}
}

func TestListVoices(t *testing.T) {
	got, err := ListVoices(voicesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"af_heart", "am_adam", "bf_emma"}; !slices.Equal(got, want) {
		t.Errorf("ListVoices = %v, want %v", got, want)
	}
}

func TestOpenVoiceBlend(t *testing.T) {
	dir := voicesDir(t)
	a, _ := LoadVoice(filepath.Join(dir, "af_heart.bin"))
	b, _ := LoadVoice(filepath.Join(dir, "am_adam.bin"))
	cases := []struct {
		spec   string
		wa, wb float64
	}{
		{"af_heart:0.6,am_adam:0.4", 0.6, 0.4},
		{" af_heart : 3 , am_adam : 2 ", 0.6, 0.4}, // normalised
		{"af_heart,am_adam", 0.5, 0.5},             // kokoro's torch.mean
		{"af_heart", 1, 0},
		{filepath.Join(dir, "am_adam.bin"), 0, 1},
	}
	for _, c := range cases {
		v, err := OpenVoice(dir, c.spec)
		if err != nil {
			t.Fatalf("%q: %v", c.spec, err)
		}
		for _, i := range []int{0, 1000, VoiceRows*VoiceDim - 1} {
			want := c.wa*float64(a.Pack[i]) + c.wb*float64(b.Pack[i])
			// Accumulated in f64 and rounded once to f32.
			if d := math.Abs(float64(v.Pack[i]) - want); d > 1e-6*math.Abs(want)+1e-7 {
				t.Errorf("%q: value %d = %g, want %g", c.spec, i, v.Pack[i], want)
			}
		}
	}
}

func TestOpenVoiceErrors(t *testing.T) {
	dir := voicesDir(t)
	tmp := t.TempDir()
	os.WriteFile(filepath.Join(tmp, "short.bin"), make([]byte, 1000), 0o644)
	nan := make([]byte, VoiceRows*VoiceDim*4)
	binary.LittleEndian.PutUint32(nan[4*(3*VoiceDim+5):], math.Float32bits(float32(math.NaN())))
	os.WriteFile(filepath.Join(tmp, "nan.bin"), nan, 0o644)
	cases := []struct{ dir, spec, want string }{
		{dir, "af_bella", `unknown voice "af_bella"; ` + dir + " has af_heart, am_adam, bf_emma"},
		{dir, "", "empty voice"},
		{dir, "af_heart:x", `weight "x" of "af_heart" is not a number`},
		{dir, "af_heart:-1,am_adam", `weight -1 of "af_heart" must be a positive number`},
		{dir, "af_heart:0", `weight 0 of "af_heart"`},
		{dir, "af_heart:NaN", `weight NaN`},
		{dir, "af_heart,,am_adam", "a term without a voice name"},
		{dir, "af_heart,af_heart", `"af_heart" named twice`},
		{tmp, "short", "1000 bytes, want 522240 (510×256 float32)"},
		{tmp, "nan", "value NaN at row 3, column 5"},
		{t.TempDir(), "af_heart", "has no voice packs"},
	}
	for _, c := range cases {
		_, err := OpenVoice(c.dir, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenVoice(%q): %v, want %q", c.spec, err, c.want)
		}
	}
}
