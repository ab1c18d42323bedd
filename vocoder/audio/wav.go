package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// WAV output: RIFF/WAVE with a "fmt " chunk and a "data" chunk, mono, 16-bit
// PCM (WAVE_FORMAT_PCM) or 32-bit float (WAVE_FORMAT_IEEE_FLOAT, which
// needs the "fact" chunk with the sample count and an 18-byte fmt with
// cbSize, per Microsoft's WAVEFORMATEX rules for non-PCM formats).

// WAVFormat is a sample encoding.
type WAVFormat int

const (
	PCM16   WAVFormat = 1 // WAVE_FORMAT_PCM, 16-bit signed
	Float32 WAVFormat = 3 // WAVE_FORMAT_IEEE_FLOAT
)

func (f WAVFormat) bytesPerSample() int {
	if f == Float32 {
		return 4
	}
	return 2
}

// A WAVWriter streams samples into a WAV file: the header first with
// sizes to be patched, samples as they come, and the sizes written by Close
// when the destination can seek (an *os.File). To a plain io.Writer (a
// pipe, an HTTP response) the sizes must be known up front: give the
// sample count to NewWAVWriter, and Close checks that it was met.
type WAVWriter struct {
	w        io.Writer
	format   WAVFormat
	rate     int
	declared int64 // samples promised in the header; -1 when patched at Close
	written  int64
	headLen  int64
	buf      []byte
	err      error
}

// NewWAVWriter writes the header of a mono WAV at rate Hz. samples is the
// number of samples that will follow, or -1 if unknown, in which case w
// must be an io.WriteSeeker (Close seeks back to fill in the sizes).
func NewWAVWriter(w io.Writer, rate int, format WAVFormat, samples int64) (*WAVWriter, error) {
	if format != PCM16 && format != Float32 {
		return nil, fmt.Errorf("audio: wav: unknown format %d", format)
	}
	if rate <= 0 {
		return nil, fmt.Errorf("audio: wav: sample rate %d", rate)
	}
	if samples < 0 {
		if _, ok := w.(io.WriteSeeker); !ok {
			return nil, errors.New("audio: wav: the sample count must be given when the destination cannot seek")
		}
	}
	ww := &WAVWriter{w: w, format: format, rate: rate, declared: samples}
	n := samples
	if n < 0 {
		n = 0
	}
	if err := ww.header(n); err != nil {
		return nil, err
	}
	return ww, nil
}

// maxWAVData is the most data bytes a RIFF's 32-bit sizes can describe.
const maxWAVData = math.MaxUint32 - 64

func (ww *WAVWriter) header(samples int64) error {
	bps := ww.format.bytesPerSample()
	data := samples * int64(bps)
	if data > maxWAVData {
		return fmt.Errorf("audio: wav: %d samples do not fit a WAV file's 4 GiB", samples)
	}
	fmtLen := 16
	if ww.format == Float32 {
		fmtLen = 18
	}
	h := make([]byte, 0, 64)
	le := binary.LittleEndian
	h = append(h, "RIFF"...)
	riff := 4 + (8 + fmtLen) + 8 + int(data)
	if ww.format == Float32 {
		riff += 12
	}
	h = le.AppendUint32(h, uint32(riff))
	h = append(h, "WAVE"...)
	h = append(h, "fmt "...)
	h = le.AppendUint32(h, uint32(fmtLen))
	h = le.AppendUint16(h, uint16(ww.format))
	h = le.AppendUint16(h, 1) // mono
	h = le.AppendUint32(h, uint32(ww.rate))
	h = le.AppendUint32(h, uint32(ww.rate*bps))
	h = le.AppendUint16(h, uint16(bps))
	h = le.AppendUint16(h, uint16(8*bps))
	if ww.format == Float32 {
		h = le.AppendUint16(h, 0) // cbSize
		h = append(h, "fact"...)
		h = le.AppendUint32(h, 4)
		h = le.AppendUint32(h, uint32(samples))
	}
	h = append(h, "data"...)
	h = le.AppendUint32(h, uint32(data))
	ww.headLen = int64(len(h))
	_, err := ww.w.Write(h)
	if err != nil {
		return fmt.Errorf("audio: wav: writing the header: %w", err)
	}
	return nil
}

// Write appends samples in [-1, 1]; PCM16 clips what lies outside and
// rounds to the nearest step (x·32767). NaN is written as silence.
func (ww *WAVWriter) Write(samples []float32) error {
	if ww.err != nil {
		return ww.err
	}
	if ww.declared >= 0 && ww.written+int64(len(samples)) > ww.declared {
		ww.err = fmt.Errorf("audio: wav: %d samples past the %d declared", ww.written+int64(len(samples)), ww.declared)
		return ww.err
	}
	if (ww.written+int64(len(samples)))*int64(ww.format.bytesPerSample()) > maxWAVData {
		ww.err = errors.New("audio: wav: over a WAV file's 4 GiB")
		return ww.err
	}
	bps := ww.format.bytesPerSample()
	if cap(ww.buf) < len(samples)*bps {
		ww.buf = make([]byte, len(samples)*bps)
	}
	b := ww.buf[:len(samples)*bps]
	for i, x := range samples {
		if ww.format == Float32 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		} else {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(pcm16(x)))
		}
	}
	if _, err := ww.w.Write(b); err != nil {
		ww.err = fmt.Errorf("audio: wav: %w", err)
		return ww.err
	}
	ww.written += int64(len(samples))
	return nil
}

// pcm16 is x scaled by 32767, clipped and rounded half away from zero.
func pcm16(x float32) int16 {
	switch {
	case x != x:
		return 0
	case x >= 1:
		return math.MaxInt16
	case x <= -1:
		return -math.MaxInt16
	}
	return int16(math.Round(float64(x) * math.MaxInt16))
}

// Close completes the file: with a declared count it checks that all the
// samples came; otherwise it seeks back and writes the sizes. It does not
// close the underlying writer.
func (ww *WAVWriter) Close() error {
	if ww.err != nil {
		return ww.err
	}
	if ww.declared >= 0 {
		if ww.written != ww.declared {
			return fmt.Errorf("audio: wav: %d samples written of the %d declared", ww.written, ww.declared)
		}
		return nil
	}
	ws := ww.w.(io.WriteSeeker)
	end, err := ws.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = ws.Seek(0, io.SeekStart)
	}
	if err == nil {
		err = ww.header(ww.written)
	}
	if err == nil {
		_, err = ws.Seek(end, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("audio: wav: patching the sizes: %w", err)
	}
	return nil
}

// WriteWAV writes samples as one mono WAV file to w.
func WriteWAV(w io.Writer, samples []float32, rate int, format WAVFormat) error {
	ww, err := NewWAVWriter(w, rate, format, int64(len(samples)))
	if err != nil {
		return err
	}
	if err := ww.Write(samples); err != nil {
		return err
	}
	return ww.Close()
}

// readRIFF walks the chunks of a RIFF/WAVE stream: fmt gets the fmt
// chunk's bytes, data the data chunk's declared size and the stream
// positioned at it (whatever data returns ends the walk), and every other
// chunk (LIST, fact) is skipped. Chunks are padded to an even size.
func readRIFF(r io.Reader, fmtChunk func(b []byte) error, data func(size int64, r io.Reader) error) error {
	le := binary.LittleEndian
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("audio: wav: header: %w", err)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return errors.New("audio: wav: not a RIFF/WAVE file")
	}
	sawFmt := false
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return fmt.Errorf("audio: wav: no data chunk: %w", err)
		}
		id, size := string(ch[0:4]), int64(le.Uint32(ch[4:8]))
		switch id {
		case "fmt ":
			if size < 16 || size > 1<<16 {
				return fmt.Errorf("audio: wav: fmt chunk of %d bytes", size)
			}
			b := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, b); err != nil {
				return fmt.Errorf("audio: wav: fmt: %w", err)
			}
			if err := fmtChunk(b[:size]); err != nil {
				return err
			}
			sawFmt = true
		case "data":
			if !sawFmt {
				return errors.New("audio: wav: data before fmt")
			}
			return data(size, r)
		default:
			if _, err := io.CopyN(io.Discard, r, size+size%2); err != nil {
				return fmt.Errorf("audio: wav: chunk %q: %w", id, err)
			}
		}
	}
}

// ReadWAV reads a mono 16-bit PCM or 32-bit float WAV into samples in
// [-1, 1] (PCM divided by 32767) and its rate. It reads what WAVWriter
// writes and skips chunks it does not need (LIST, fact).
func ReadWAV(r io.Reader) (samples []float32, rate int, err error) {
	le := binary.LittleEndian
	var format WAVFormat
	var bits int
	err = readRIFF(r, func(b []byte) error {
		format, rate, bits = WAVFormat(le.Uint16(b[0:])), int(le.Uint32(b[4:])), int(le.Uint16(b[14:]))
		if ch := le.Uint16(b[2:]); ch != 1 {
			return fmt.Errorf("audio: wav: %d channels, want mono", ch)
		}
		if !(format == PCM16 && bits == 16) && !(format == Float32 && bits == 32) {
			return fmt.Errorf("audio: wav: format %d with %d bits: only 16-bit PCM and 32-bit float are read", format, bits)
		}
		return nil
	}, func(size int64, r io.Reader) error {
		bps := int64(bits / 8)
		b, err := io.ReadAll(io.LimitReader(r, size))
		if err != nil {
			return fmt.Errorf("audio: wav: data: %w", err)
		}
		if int64(len(b)) != size || size%bps != 0 {
			return fmt.Errorf("audio: wav: data chunk of %d bytes holds %d (truncated?)", size, len(b))
		}
		samples = make([]float32, size/bps)
		for i := range samples {
			if format == Float32 {
				samples[i] = math.Float32frombits(le.Uint32(b[4*i:]))
			} else {
				samples[i] = float32(int16(le.Uint16(b[2*i:]))) / math.MaxInt16
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return samples, rate, nil
}
