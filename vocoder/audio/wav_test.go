package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWAVPCM16(t *testing.T) {
	in := []float32{0, 0.5, -0.5, 1, -1, 1.7, -3, float32(math.NaN()), 1.0 / 32767, 0.4 / 32767, -1.6 / 32767}
	// x·32767 rounded half away from zero, clipped to ±32767.
	want := []int16{0, 16384, -16384, 32767, -32767, 32767, -32767, 0, 1, 0, -2}
	var buf bytes.Buffer
	if err := WriteWAV(&buf, in, SampleRate, PCM16); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) != 44+2*len(in) || string(b[0:4]) != "RIFF" || binary.LittleEndian.Uint32(b[4:]) != uint32(len(b)-8) ||
		binary.LittleEndian.Uint16(b[20:]) != 1 || binary.LittleEndian.Uint32(b[24:]) != 24000 ||
		binary.LittleEndian.Uint32(b[28:]) != 48000 || binary.LittleEndian.Uint32(b[40:]) != uint32(2*len(in)) {
		t.Fatalf("header % x", b[:44])
	}
	for i, w := range want {
		if got := int16(binary.LittleEndian.Uint16(b[44+2*i:])); got != w {
			t.Errorf("sample %d (%g) = %d, want %d", i, in[i], got, w)
		}
	}
	out, rate, err := ReadWAV(bytes.NewReader(b))
	if err != nil || rate != SampleRate || len(out) != len(in) || out[1] != 16384.0/32767 {
		t.Errorf("ReadWAV: %v rate %d, %v", err, rate, out)
	}
}

func TestWAVFloat32(t *testing.T) {
	in := []float32{0, 0.25, -1.5, 3e-8, 1}
	var buf bytes.Buffer
	if err := WriteWAV(&buf, in, SampleRate, Float32); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// RIFF(12) fmt(8+18) fact(8+4) data(8) = 58 bytes of header.
	if len(b) != 58+4*len(in) || binary.LittleEndian.Uint32(b[16:]) != 18 || binary.LittleEndian.Uint16(b[20:]) != 3 ||
		binary.LittleEndian.Uint16(b[34:]) != 32 || binary.LittleEndian.Uint16(b[36:]) != 0 ||
		string(b[38:42]) != "fact" || binary.LittleEndian.Uint32(b[46:]) != uint32(len(in)) ||
		string(b[50:54]) != "data" || binary.LittleEndian.Uint32(b[54:]) != uint32(4*len(in)) ||
		binary.LittleEndian.Uint32(b[4:]) != uint32(len(b)-8) {
		t.Fatalf("header % x", b[:58])
	}
	out, _, err := ReadWAV(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("sample %d = %g, want %g", i, out[i], in[i])
		}
	}
}

// Streaming into a file with the length unknown: the sizes are patched at
// Close, and the file is byte for byte what WriteWAV makes.
func TestWAVStreamingPatch(t *testing.T) {
	in := make([]float32, 1000)
	for i := range in {
		in[i] = float32(math.Sin(float64(i) / 10))
	}
	for _, f := range []WAVFormat{PCM16, Float32} {
		path := filepath.Join(t.TempDir(), "out.wav")
		file, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		ww, err := NewWAVWriter(file, SampleRate, f, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range [][]float32{in[:1], in[1:500], in[500:]} {
			if err := ww.Write(part); err != nil {
				t.Fatal(err)
			}
		}
		if err := ww.Close(); err != nil {
			t.Fatal(err)
		}
		file.Close()
		got, _ := os.ReadFile(path)
		var want bytes.Buffer
		WriteWAV(&want, in, SampleRate, f)
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("format %d: streamed file differs from WriteWAV's", f)
		}
	}
}

// failAfter accepts n bytes, then fails as a full disk does.
type failAfter struct{ n int }

var errFull = errors.New("no space left on device")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWAVErrors(t *testing.T) {
	// A full disk during the header and during the samples.
	if _, err := NewWAVWriter(&failAfter{10}, SampleRate, PCM16, 5); !errors.Is(err, errFull) {
		t.Errorf("header on a full disk: %v", err)
	}
	ww, err := NewWAVWriter(&failAfter{50}, SampleRate, PCM16, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := ww.Write(make([]float32, 100)); !errors.Is(err, errFull) {
		t.Errorf("samples on a full disk: %v", err)
	}
	if err := ww.Close(); !errors.Is(err, errFull) {
		t.Errorf("Close after the failure: %v", err)
	}
	if f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0); err == nil {
		if err := WriteWAV(f, make([]float32, 10), SampleRate, Float32); err == nil || !strings.Contains(err.Error(), "no space") {
			t.Errorf("/dev/full: %v", err)
		}
		f.Close()
	}
	var buf bytes.Buffer
	if _, err := NewWAVWriter(&buf, SampleRate, PCM16, -1); err == nil {
		t.Error("unknown length to a writer that cannot seek: no error")
	}
	ww, _ = NewWAVWriter(&buf, SampleRate, PCM16, 3)
	if err := ww.Write(make([]float32, 4)); err == nil {
		t.Error("more samples than declared: no error")
	}
	ww, _ = NewWAVWriter(&buf, SampleRate, PCM16, 3)
	ww.Write(make([]float32, 2))
	if err := ww.Close(); err == nil {
		t.Error("fewer samples than declared: no error")
	}
	if _, err := NewWAVWriter(&buf, 0, PCM16, 1); err == nil {
		t.Error("rate 0: no error")
	}
	if _, err := NewWAVWriter(&buf, SampleRate, PCM16, 3<<30); err == nil {
		t.Error("over 4 GiB: no error")
	}
	var good bytes.Buffer
	WriteWAV(&good, make([]float32, 8), SampleRate, PCM16)
	for _, n := range []int{0, 11, 30, 44, 50} {
		if _, _, err := ReadWAV(bytes.NewReader(good.Bytes()[:n])); err == nil {
			t.Errorf("ReadWAV of %d bytes: no error", n)
		}
	}
}
