package audio

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// wavBytes writes a RIFF/WAVE of interleaved frames by hand: format 1
// (PCM) or 3 (float), or wrapped in WAVE_FORMAT_EXTENSIBLE.
func wavBytes(format, channels, rate, bits int, extensible bool, data []byte) []byte {
	le := binary.LittleEndian
	var fmtc bytes.Buffer
	tag := format
	if extensible {
		tag = 0xFFFE
	}
	binary.Write(&fmtc, le, uint16(tag))
	binary.Write(&fmtc, le, uint16(channels))
	binary.Write(&fmtc, le, uint32(rate))
	binary.Write(&fmtc, le, uint32(rate*channels*bits/8))
	binary.Write(&fmtc, le, uint16(channels*bits/8))
	binary.Write(&fmtc, le, uint16(bits))
	if extensible {
		binary.Write(&fmtc, le, uint16(22))
		binary.Write(&fmtc, le, uint16(bits))
		binary.Write(&fmtc, le, uint32(3))
		binary.Write(&fmtc, le, uint16(format)) // the SubFormat GUID's first two bytes
		fmtc.Write([]byte{0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xAA, 0, 0x38, 0x9B, 0x71})
	}
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, le, uint32(4+8+fmtc.Len()+8+8+len(data)))
	b.WriteString("WAVEfmt ")
	binary.Write(&b, le, uint32(fmtc.Len()))
	b.Write(fmtc.Bytes())
	b.WriteString("LIST")
	binary.Write(&b, le, uint32(3))
	b.Write([]byte{1, 2, 3, 0}) // odd size, padded
	b.WriteString("data")
	binary.Write(&b, le, uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

func TestReadRecording(t *testing.T) {
	le := binary.LittleEndian
	// Two stereo frames, (0.5, -0.25) and (-1, 1): mono 0.125 and 0.
	want := []float64{0.125, 0}
	frames := [][2]float64{{0.5, -0.25}, {-1, 1}}
	enc := map[string]func(v float64) []byte{
		"pcm8": func(v float64) []byte { return []byte{byte(int(math.Round(v*128)) + 128 - boolInt(v == 1))} },
		"pcm16": func(v float64) []byte {
			return le.AppendUint16(nil, uint16(int16(max(-32768, math.Min(32767, v*32768)))))
		},
		"pcm24": func(v float64) []byte {
			i := int32(max(-8388608, math.Min(8388607, v*8388608)))
			return []byte{byte(i), byte(i >> 8), byte(i >> 16)}
		},
		"pcm32": func(v float64) []byte {
			return le.AppendUint32(nil, uint32(int32(max(-2147483648, math.Min(2147483647, v*2147483648)))))
		},
		"f32": func(v float64) []byte { return le.AppendUint32(nil, math.Float32bits(float32(v))) },
		"f64": func(v float64) []byte { return le.AppendUint64(nil, math.Float64bits(v)) },
	}
	for _, tc := range []struct {
		name         string
		format, bits int
		ext          bool
	}{
		{"pcm8", 1, 8, false}, {"pcm16", 1, 16, false}, {"pcm24", 1, 24, true}, {"pcm32", 1, 32, false},
		{"f32", 3, 32, false}, {"f64", 3, 64, true},
	} {
		var data []byte
		for _, f := range frames {
			data = append(data, enc[tc.name](f[0])...)
			data = append(data, enc[tc.name](f[1])...)
		}
		got, rate, err := ReadRecording(bytes.NewReader(wavBytes(tc.format, 2, 44100, tc.bits, tc.ext, data)))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rate != 44100 || len(got) != 2 {
			t.Fatalf("%s: %d samples at %d Hz", tc.name, len(got), rate)
		}
		// Full scale +1 clips to the top code, one step short of it
		// (32767/32768 at 16 bits): half a step off after averaging.
		tol := 1e-6
		if tc.format == 1 {
			tol = math.Ldexp(1, 1-tc.bits)
		}
		for i, w := range want {
			if math.Abs(float64(got[i])-w) > tol {
				t.Errorf("%s: sample %d = %g, want %g", tc.name, i, got[i], w)
			}
		}
	}
	for _, bad := range [][]byte{
		[]byte("RIFX0000WAVE"),
		wavBytes(2, 1, 8000, 4, false, []byte{0, 0}),  // ADPCM
		wavBytes(1, 0, 8000, 16, false, []byte{0, 0}), // no channels
		wavBytes(1, 1, 0, 16, false, []byte{0, 0}),    // no rate
		wavBytes(3, 1, 8000, 16, false, []byte{0, 0}), // 16-bit float
		[]byte("RIFF\x04\x00\x00\x00WAVE"),            // no chunks
	} {
		if _, _, err := ReadRecording(bytes.NewReader(bad)); err == nil {
			t.Errorf("%q…: no error", bad[:min(len(bad), 24)])
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
