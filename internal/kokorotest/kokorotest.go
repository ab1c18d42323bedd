// Package kokorotest writes a Kokoro directory for tests of the code that
// loads one (the engine's speech job, hearth speak): config.json and
// random weights of the small committed fixture
// (vocoder/kokoro/testdata/torch/forward-small.json, whose weights
// make_forward_fixture.py draws from a hash of each tensor's name), saved
// as kokoro-v1_0.safetensors, and the real voice packs from
// shared/testdata/kokoro/voices in voices/. The model speaks noise, in
// the real file layout and through the same loading code as a user's.
package kokorotest

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/hearthstudio/hearth/internal/sharedtest"
)

type fixture struct {
	Config  json.RawMessage `json:"config"`
	Weights []FixtureTensor `json:"weights"`
}

// FixtureTensor is a weight as a forward fixture's JSON lists it: element
// i is Param(Seed(Name), i, Scale, Offset).
type FixtureTensor struct {
	Name   string  `json:"name"`
	Shape  []int   `json:"shape"`
	Scale  float64 `json:"scale"`
	Offset float64 `json:"offset"`
}

// WriteDir fills dir (made if missing) as a Kokoro directory and returns
// it. The weights are about 256 MB of f32.
func WriteDir(tb testing.TB, dir string) string {
	tb.Helper()
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "vocoder", "kokoro", "testdata", "torch", "forward-small.json")
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		tb.Fatalf("%s: %v", src, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "voices"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), fx.Config, 0o644); err != nil {
		tb.Fatal(err)
	}
	voices := filepath.Join(sharedtest.Dir(tb, "kokoro"), "voices")
	for _, v := range []string{"af_heart", "am_adam", "bf_emma"} {
		data, err := os.ReadFile(filepath.Join(voices, v+".bin"))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "voices", v+".bin"), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}

	// safetensors: an 8-byte header length, the JSON header, the data.
	sort.Slice(fx.Weights, func(i, j int) bool { return fx.Weights[i].Name < fx.Weights[j].Name })
	hdr := map[string]any{}
	var total int
	for _, w := range fx.Weights {
		n := 4
		for _, d := range w.Shape {
			n *= d
		}
		hdr[w.Name] = map[string]any{"dtype": "F32", "shape": w.Shape, "data_offsets": []int{total, total + n}}
		total += n
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		tb.Fatal(err)
	}
	// Streamed, not built in memory: the tests that use this run in
	// parallel packages on 2-core CI machines.
	f, err := os.Create(filepath.Join(dir, "kokoro-v1_0.safetensors"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var word [8]byte
	binary.LittleEndian.PutUint64(word[:], uint64(len(h)))
	w.Write(word[:])
	w.Write(h)
	for _, t := range fx.Weights {
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		seed := Seed(t.Name)
		for i := range n {
			binary.LittleEndian.PutUint32(word[:4], math.Float32bits(Param(seed, i, t.Scale, t.Offset)))
			w.Write(word[:4])
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// Seed is make_forward_fixture.py's seed for the tensor named name: the
// FNV-1a 64-bit hash of the name.
func Seed(name string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range []byte(name) {
		h = (h ^ uint64(c)) * 0x100000001b3
	}
	return h
}

// Uniform is the script's generator: the top 24 bits of
// splitmix64(seed + (i+1)·golden) as a uniform in [-1, 1).
func Uniform(seed uint64, i int) float64 {
	z := seed + uint64(i+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return float64(z>>40)/8388608.0 - 1
}

// Param is element i of the fixture tensor whose seed is seed, as the
// script (numpy) computes it: f32(offset + scale·u), the product rounded
// on its own (no fused multiply-add, which numpy does not do either).
func Param(seed uint64, i int, scale, offset float64) float32 {
	p := float64(scale * Uniform(seed, i))
	return float32(offset + p)
}
