package audio

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// ReadRecording reads a WAV file as a reference recording: integer PCM
// of 8, 16, 24 or 32 bits or IEEE float of 32 or 64, plain or
// WAVE_FORMAT_EXTENSIBLE, any number of channels, which are averaged to
// mono; it returns the samples in [-1, 1] and the rate. (ReadWAV reads
// only what Hearth writes: mono 16-bit or float.)
func ReadRecording(r io.Reader) (samples []float32, rate int, err error) {
	le := binary.LittleEndian
	var format, channels, bits int
	err = readRIFF(r, func(b []byte) error {
		format, channels, rate, bits = int(le.Uint16(b[0:])), int(le.Uint16(b[2:])), int(le.Uint32(b[4:])), int(le.Uint16(b[14:]))
		if format == 0xFFFE { // WAVE_FORMAT_EXTENSIBLE: the real format opens the SubFormat GUID
			if len(b) < 40 {
				return fmt.Errorf("audio: wav: extensible fmt chunk of %d bytes, want 40", len(b))
			}
			format = int(le.Uint16(b[24:]))
		}
		ok := (format == 1 && (bits == 8 || bits == 16 || bits == 24 || bits == 32)) || (format == 3 && (bits == 32 || bits == 64))
		if !ok {
			return fmt.Errorf("audio: wav: format %d with %d bits: only PCM of 8 to 32 bits and float of 32 or 64 are read", format, bits)
		}
		if channels < 1 || channels > 64 {
			return fmt.Errorf("audio: wav: %d channels", channels)
		}
		if rate <= 0 {
			return fmt.Errorf("audio: wav: sample rate %d", rate)
		}
		return nil
	}, func(size int64, r io.Reader) error {
		bps := bits / 8
		b, err := io.ReadAll(io.LimitReader(r, size))
		if err != nil {
			return fmt.Errorf("audio: wav: data: %w", err)
		}
		// A streamed WAV may declare more than it holds (a size
		// patched never, 0xFFFFFFFF): read the whole frames there are.
		frameBytes := bps * channels
		frames := len(b) / frameBytes
		samples = make([]float32, frames)
		for i := range samples {
			s := 0.0
			for c := range channels {
				s += wavSample(b[(i*channels+c)*bps:], format, bits)
			}
			samples[i] = float32(s / float64(channels))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return samples, rate, nil
}

// wavSample decodes one sample: integers scaled by 2^(bits-1) (8-bit is
// unsigned, offset 128), floats as they are.
func wavSample(b []byte, format, bits int) float64 {
	le := binary.LittleEndian
	if format == 3 {
		if bits == 64 {
			return math.Float64frombits(le.Uint64(b))
		}
		return float64(math.Float32frombits(le.Uint32(b)))
	}
	switch bits {
	case 8:
		return (float64(b[0]) - 128) / 128
	case 16:
		return float64(int16(le.Uint16(b))) / (1 << 15)
	case 24:
		v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
		return float64(v) / (1 << 23)
	}
	return float64(int32(le.Uint32(b))) / (1 << 31)
}
