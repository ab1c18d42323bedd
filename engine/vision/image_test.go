package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// bitWriter packs fields least significant bit first, as a VP8L
// bitstream holds them.
type bitWriter struct {
	b    []byte
	nbit uint
}

func (w *bitWriter) bits(v uint32, n uint) *bitWriter {
	for i := range n {
		if w.nbit%8 == 0 {
			w.b = append(w.b, 0)
		}
		w.b[len(w.b)-1] |= byte(v>>i&1) << (w.nbit % 8)
		w.nbit++
	}
	return w
}

// simpleCode appends a VP8L "simple" prefix code of one or two 8-bit
// symbols; one symbol takes no bits to read.
func (w *bitWriter) simpleCode(symbols ...uint32) *bitWriter {
	w.bits(1, 1).bits(uint32(len(symbols)-1), 1).bits(1, 1) // simple, count-1, first symbol is 8 bits
	for _, s := range symbols {
		w.bits(s, 8)
	}
	return w
}

// riff wraps one chunk in a WebP file.
func riff(fourcc string, data []byte) []byte {
	if len(data)%2 == 1 {
		data = append(data, 0)
	}
	b := []byte("RIFF")
	b = binary.LittleEndian.AppendUint32(b, uint32(4+8+len(data)))
	b = append(b, "WEBP"+fourcc...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// losslessWebP builds a 2×2 VP8L image by the WebP lossless spec: no
// transforms, no colour cache, one group of prefix codes. Red, blue and
// alpha are one-symbol codes (200, 30, 255); green is a two-symbol code,
// 10 and 250 with codes 0 and 1 (canonical order), so each pixel is one
// bit: 0, 1 / 1, 0.
func losslessWebP() []byte {
	w := &bitWriter{}
	w.bits(0x2f, 8)                    // signature
	w.bits(2-1, 14).bits(2-1, 14)      // width-1, height-1
	w.bits(0, 1).bits(0, 3)            // alpha_is_used hint, version 0
	w.bits(0, 1)                       // no transform
	w.bits(0, 1)                       // no colour cache
	w.bits(0, 1)                       // no meta prefix codes
	w.simpleCode(10, 250)              // green (and lengths, cache)
	w.simpleCode(200)                  // red
	w.simpleCode(30)                   // blue
	w.simpleCode(255)                  // alpha
	w.bits(1, 1).bits(0, 1).bits(0, 1) // distance: simple, one symbol, 1 bit wide,
	w.bits(0, 1)                       // symbol 0
	w.bits(0, 1).bits(1, 1).bits(1, 1).bits(0, 1)
	return riff("VP8L", w.b)
}

// pngChunk appends one PNG chunk with its CRC.
func pngChunk(b []byte, typ string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// pngHeader is a PNG's signature and IHDR alone: 8-bit RGB of w×h.
func pngHeader(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	return pngChunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr)
}

// transparentGIF is a 3×1 GIF89a whose global colour table is
// (1,2,3), (200,100,50), whose index 0 is transparent, and whose one
// frame covers only the left 2 pixels with indices 0, 1.
func transparentGIF() []byte {
	b := []byte("GIF89a")
	b = append(b, 3, 0, 1, 0, 0x80, 0, 0) // screen 3×1, global table of 2
	b = append(b, 1, 2, 3, 200, 100, 50)
	b = append(b, 0x21, 0xf9, 4, 1, 0, 0, 0, 0)    // graphic control: index 0 transparent
	b = append(b, 0x2c, 0, 0, 0, 0, 2, 0, 1, 0, 0) // frame at 0,0, 2×1
	b = append(b, 2, 2, 0x44, 0x0a, 0)             // LZW, 3-bit codes: clear(4), 0, 1, end(5)
	return append(b, 0x3b)
}

func encode(t *testing.T, img image.Image, enc func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := enc(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pattern is a w×h opaque image whose pixels all differ.
func pattern(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, color.NRGBA{uint8(40 * x), uint8(60 * y), uint8(100 + 10*x + 20*y), 255})
		}
	}
	return m
}

func TestDecodeFormats(t *testing.T) {
	pat := pattern(3, 2)
	solid := image.NewNRGBA(image.Rect(0, 0, 4, 3))
	for i := 0; i < len(solid.Pix); i += 4 {
		copy(solid.Pix[i:], []uint8{40, 60, 130, 255})
	}
	palette := color.Palette{color.RGBA{0, 0, 0, 255}, color.RGBA{250, 10, 20, 255}, color.RGBA{5, 200, 90, 255}}
	pal := image.NewPaletted(image.Rect(0, 0, 3, 1), palette)
	pal.Pix = []uint8{2, 0, 1}
	tests := []struct {
		name   string
		file   []byte
		want   []uint8 // RGB, row by row
		jpegly bool    // JPEG is lossy: within 2 levels
	}{
		{"png", encode(t, pat, func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) }),
			[]uint8{0, 0, 100, 40, 0, 110, 80, 0, 120, 0, 60, 120, 40, 60, 130, 80, 60, 140}, false},
		{"gif", encode(t, pal, func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) }),
			[]uint8{5, 200, 90, 0, 0, 0, 250, 10, 20}, false},
		{"jpeg", encode(t, solid, func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, &jpeg.Options{Quality: 100}) }),
			bytes.Repeat([]uint8{40, 60, 130}, 4*3), true},
		{"webp lossless", losslessWebP(),
			[]uint8{200, 10, 30, 200, 250, 30, 200, 250, 30, 200, 10, 30}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := Decode(tt.file, tt.name)
			if err != nil {
				t.Fatal(err)
			}
			got := toRGB(img).pix
			if len(got) != len(tt.want) {
				t.Fatalf("%d samples, want %d", len(got), len(tt.want))
			}
			for i := range got {
				d := int(got[i]) - int(tt.want[i])
				if d != 0 && !(tt.jpegly && d >= -2 && d <= 2) {
					t.Fatalf("RGB %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestDecodeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.png")
	if err := os.WriteFile(path, encode(t, pattern(3, 2), func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) }), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := DecodeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 3 || b.Dy() != 2 {
		t.Errorf("bounds %v, want 3x2", b)
	}

	// A sparse file over the limit is refused by its size, unread.
	big := filepath.Join(dir, "big.png")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := DecodeFile(big); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "67108865 bytes") {
		t.Errorf("big file: %v", err)
	}
	if _, err := DecodeFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if _, err := DecodeFile(filepath.Join(dir, "missing.png")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	whole := encode(t, pattern(30, 20), func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) })
	// A JPEG whose SOF0 claims 60000×60000 (3.6 Gpixels), then SOS.
	jpegBomb := []byte{0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0xea, 0x60, 0xea, 0x60, 1, 1, 0x11, 0, 0xff, 0xda, 0, 8}
	// A WebP whose VP8X canvas is 16384×16384.
	webpBomb := riff("VP8X", []byte{0, 0, 0, 0, 0xff, 0x3f, 0, 0xff, 0x3f, 0})
	// A GIF whose logical screen is 0×5.
	gifEmpty := append([]byte("GIF89a"), 0, 0, 5, 0, 0, 0, 0, 0x3b)
	tests := []struct {
		name string
		file []byte
		is   error  // nil: check the message only
		want string // a substring of the error; every error names the file
	}{
		{"empty", nil, ErrNotImage, "empty: not a PNG, JPEG, GIF or WebP image: the file is empty"},
		{"text", []byte("hello, world\n"), ErrNotImage, `(it starts with "hello, w")`},
		{"gguf", []byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00"), ErrNotImage, `(it starts with "GGUF\x03\x00\x00\x00")`},
		{"truncated png", whole[:len(whole)/2], ErrNotImage, "truncated png: not a valid PNG image: png: invalid format"},
		{"png bomb", pngHeader(100000, 100000), ErrTooLarge, "the image is 100000x100000 (10000000000 pixels), more than the 50000000"},
		{"jpeg bomb", jpegBomb, ErrTooLarge, "the image is 60000x60000"},
		{"webp bomb", webpBomb, ErrTooLarge, "the image is 16384x16384"},
		{"png zero width", pngHeader(0, 10), ErrNotImage, "zero width: not a valid PNG image"},
		{"gif zero width", gifEmpty, nil, "gif zero width: the image is 0x5: it has no pixels"},
		{"over 64 MiB", make([]byte, MaxBytes+1), ErrTooLarge, "the file is 67108865 bytes, more than the 67108864 (64 MiB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			img, err := Decode(tt.file, tt.name)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatalf("decoded a %v image", img.Bounds())
			}
			if !strings.Contains(err.Error(), tt.name+":") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to name the file and say %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
			// Refusing must not allocate the image it refuses: 1 MiB is a
			// decoder's buffers, far from any of these images.
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("allocated %d bytes refusing it", n)
			}
		})
	}
}

func TestGIFTransparentIndexKeepsItsColour(t *testing.T) {
	img, err := Decode(transparentGIF(), "t.gif")
	if err != nil {
		t.Fatal(err)
	}
	// PIL: the frame on a 3×1 screen filled with the transparent index,
	// whose colour convert("RGB") keeps.
	want := []uint8{1, 2, 3, 200, 100, 50, 1, 2, 3}
	if got := toRGB(img).pix; !bytes.Equal(got, want) {
		t.Errorf("RGB %v, want %v", got, want)
	}
}

func TestToRGBMatchesPILConvert(t *testing.T) {
	one := image.Rect(0, 0, 1, 1)
	tests := []struct {
		name string
		img  image.Image
		want [3]uint8
	}{
		// rgba2rgb drops alpha: the stored colour stays, even at alpha 0.
		{"NRGBA alpha 0", &image.NRGBA{Pix: []uint8{200, 100, 50, 0}, Stride: 4, Rect: one}, [3]uint8{200, 100, 50}},
		{"NRGBA64", &image.NRGBA64{Pix: []uint8{0xab, 0xff, 0x12, 0, 0x80, 0x01, 0x10, 0}, Stride: 8, Rect: one}, [3]uint8{0xab, 0x12, 0x80}},
		{"Gray", &image.Gray{Pix: []uint8{77}, Stride: 1, Rect: one}, [3]uint8{77, 77, 77}},
		// PIL would clamp 0x1234 to 255; the top byte is kept instead.
		{"Gray16", &image.Gray16{Pix: []uint8{0x12, 0x34}, Stride: 2, Rect: one}, [3]uint8{0x12, 0x12, 0x12}},
		{"Paletted transparent entry", &image.Paletted{Pix: []uint8{1}, Stride: 1, Rect: one,
			Palette: color.Palette{color.RGBA{}, color.NRGBA{9, 8, 7, 0}}}, [3]uint8{9, 8, 7}},
		// cmyk2rgb, nk = 255-64 = 191: R = 191 - MULDIV255(0, 191) = 191;
		// G = 191 - ((24576>>8)+24576)>>8 = 191-96 = 95 (t = 128·191+128);
		// B = 191 - ((48833>>8)+48833)>>8 = 191-191 = 0 (t = 255·191+128).
		{"CMYK", &image.CMYK{Pix: []uint8{0, 128, 255, 64}, Stride: 4, Rect: one}, [3]uint8{191, 95, 0}},
		{"RGBA opaque", &image.RGBA{Pix: []uint8{1, 2, 3, 255}, Stride: 4, Rect: one}, [3]uint8{1, 2, 3}},
		// Premultiplied: the colour is unpremultiplied first.
		{"RGBA half", &image.RGBA{Pix: []uint8{50, 25, 0, 128}, Stride: 4, Rect: one}, [3]uint8{99, 49, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toRGB(tt.img).pix; !bytes.Equal(got, tt.want[:]) {
				t.Errorf("RGB %v, want %v", got, tt.want)
			}
		})
	}
}

// TestJPEGChromaUpsampling checks libjpeg-turbo's h2v2 fancy upsampling and
// its colour tables on a 6×2 4:2:0 image, worked by hand: Y = 100, Cb =
// 128, Cr = 128, 192, 128 over 3×1 chroma samples.
//
// With one chroma row both vertical neighbours are that row, so the column
// sums are 4·Cr = 512, 768, 512 and h2v2_fancy_upsample gives
// (3·512+512+8)>>4 = 128, (3·512+768+7)>>4 = 144, (3·768+512+8)>>4 = 176,
// (3·768+512+7)>>4 = 176, (3·512+768+8)>>4 = 144, (3·512+512+7)>>4 = 128.
// Then R = Y + (91881·(Cr-128) + 2^15)>>16: 100, 122, 167, 167, 122, 100;
// G = Y + (-46802·(Cr-128) + 2^15)>>16: 100, 89, 66, 66, 89, 100; B = 100.
// (Go's own YCbCr colour model replicates the chroma: R would be 100, 100,
// 171, 171, 100, 100.)
func TestJPEGChromaUpsampling(t *testing.T) {
	m := image.NewYCbCr(image.Rect(0, 0, 6, 2), image.YCbCrSubsampleRatio420)
	for i := range m.Y {
		m.Y[i] = 100
	}
	copy(m.Cb, []uint8{128, 128, 128})
	copy(m.Cr, []uint8{128, 192, 128})
	row := []uint8{100, 100, 100, 122, 89, 100, 167, 66, 100, 167, 66, 100, 122, 89, 100, 100, 100, 100}
	want := append(append([]uint8(nil), row...), row...)
	if got := toRGB(m).pix; !bytes.Equal(got, want) {
		t.Errorf("RGB\n%v, want\n%v", got, want)
	}
}

// TestWebPLimitedRange checks libwebp's VP8YuvToRgb on the ends of
// BT.601's range: Y 16 is black and Y 235 white (with U = V = 128:
// (MultHi(16, 19077) + MultHi(128, 26149) - 14234)>>6 = (1192+13074-14234)>>6 = 0,
// and (17512+13074-14234)>>6 = 16352>>6 = 255), where JPEG's full-range
// model, which x/image/webp's YCbCr carries, would say 16 and 235.
func TestWebPLimitedRange(t *testing.T) {
	m := image.NewYCbCr(image.Rect(0, 0, 2, 2), image.YCbCrSubsampleRatio420)
	copy(m.Y, []uint8{16, 235, 235, 16})
	m.Cb[0], m.Cr[0] = 128, 128
	want := []uint8{0, 0, 0, 255, 255, 255, 255, 255, 255, 0, 0, 0}
	if got := toRGB(webpRGB(m, nil, 0)).pix; !bytes.Equal(got, want) {
		t.Errorf("RGB %v, want %v", got, want)
	}
}

var resamplers = []Resampler{Torchvision, TorchvisionUint8, PIL, TorchvisionBicubic, TorchvisionBicubicUint8}

// randomRGB is a w×h image of levels drawn from lo..hi.
func randomRGB(rng *rand.Rand, w, h int, lo, hi uint8) rgb8 {
	m := rgb8{w: w, h: h, pix: make([]uint8, 3*w*h)}
	for i := range m.pix {
		m.pix[i] = lo + uint8(rng.IntN(int(hi-lo)+1))
	}
	return m
}

func TestResizeIdentity(t *testing.T) {
	src := randomRGB(rand.New(rand.NewPCG(1, 2)), 7, 5, 0, 255)
	for _, r := range resamplers {
		if got := resize(src, 7, 5, r); !bytes.Equal(got, src.pix) {
			t.Errorf("%v: resizing 7x5 to 7x5 changed the pixels", r)
		}
	}
}

// TestResizeKeepsConstant: each output's weights are normalized to sum to
// 1, so a constant image stays constant. In fixed point the rounded
// weights need not sum to exactly one unit (shrinking 3 → 1, the cubic's
// 7/23, 9/23, 7/23 become 19946, 25645, 19946 in 2^16ths: 65537). A level
// v comes out as v + floor(0.5 + v·excess/2^bits), and with a few units of
// excess and at least 14 bits, 255 times it stays far below half a level.
func TestResizeKeepsConstant(t *testing.T) {
	src := rgb8{w: 37, h: 23, pix: bytes.Repeat([]uint8{17, 200, 99}, 37*23)}
	for _, r := range resamplers {
		for _, size := range [][2]int{{1, 1}, {8, 8}, {36, 22}, {50, 50}, {37, 100}, {200, 3}, {896, 896}} {
			got := resize(src, size[0], size[1], r)
			if want := bytes.Repeat([]uint8{17, 200, 99}, size[0]*size[1]); !bytes.Equal(got, want) {
				t.Errorf("%v: a constant 37x23 image resized to %dx%d is not constant", r, size[0], size[1])
			}
		}
	}
	white := rgb8{w: 9, h: 7, pix: bytes.Repeat([]uint8{255}, 3*9*7)}
	for _, r := range resamplers {
		if got := resize(white, 40, 3, r); !bytes.Equal(got, bytes.Repeat([]uint8{255}, 3*40*3)) {
			t.Errorf("%v: a white 9x7 image resized to 40x3 is not white", r)
		}
	}
}

// TestResizeKeepsRamps: an output reproduces a linear ramp (input j
// holding the ramp at j + 0.5, the output the ramp at its centre) where
// its support lies wholly inside the image and its weights' first moment
// vanishes. Shrinking by a whole factor puts each centre on a pixel's
// corner (even factor) or centre (odd), so that its taps lie symmetrically
// about it; enlarging leaves the filter unstretched, and the triangle and
// Keys' cubic reproduce a linear function wherever they are centred. (A
// shrink by 64/23 does neither: the bilinear weights' mean lies up to
// 0.044 pixels off the centre, 0.13 levels on this ramp.)
// Only rounding is left: the result's, to the nearest level, and the
// fixed-point weights' (half a unit in 2^14 or finer each, under 0.04 of
// a level in all here). Once along a row (the horizontal pass) and once
// down a column (the vertical one).
func TestResizeKeepsRamps(t *testing.T) {
	ramp := func(x float64) float64 { return 10 + 3*(x-0.5) }
	for _, size := range [][2]int{{64, 16}, {63, 21}, {64, 150}} {
		n, out := size[0], size[1]
		row := rgb8{w: n, h: 1}
		for j := range n {
			v := uint8(ramp(float64(j) + 0.5))
			row.pix = append(row.pix, v, v, v)
		}
		col := rgb8{w: 1, h: n, pix: row.pix}
		for _, r := range resamplers {
			scale := float64(n) / float64(out)
			support := r.filter().support * max(scale, 1)
			checked := 0
			for _, got := range [][]uint8{resize(row, out, 1, r), resize(col, 1, out, r)} {
				for i := range out {
					c := (float64(i) + 0.5) * scale
					if c-support < 0 || c+support > float64(n) {
						continue
					}
					checked++
					if d := float64(got[3*i]) - ramp(c); math.Abs(d) > 0.5+1.0/16 {
						t.Errorf("%v: %d → %d: output %d (centre %.3f) is %d, want %.3f within half a level", r, n, out, i, c, got[3*i], ramp(c))
					}
				}
			}
			if checked < 10 {
				t.Fatalf("%v: %d → %d: only %d outputs away from the edges", r, n, out, checked)
			}
		}
	}
}

// TestResizeByHand checks the resize on cases worked out from PIL's
// precompute_coeffs (libImaging/Resample.c), one row high so that only the
// horizontal pass runs.
//
// 4 → 2: scale 2, so the triangle is 2 pixels wide each side. Output 0 is
// centred at 1.0 and reads inputs 0..2 (int(1-2+0.5) = 0 to int(1+2+0.5) =
// 3), weighted 1-|(x-1+0.5)/2|: 0.75, 0.75, 0.25, normalized 3/7, 3/7,
// 1/7. Output 1, centred at 3.0, reads 1..3 with 1/7, 3/7, 3/7. With
// 10, 20, 30, 41: (30+60+30)/7 = 17.14 and (20+90+123)/7 = 33.29. The
// cubic (TestBicubicWeightsByHand) weighs all four inputs, 111, 111, 29,
// -9 in 242nds: (1110+2220+870-369)/242 = 15.83 and (-90+580+3330+4551)/242
// = 34.59.
//
// 2 → 4: scale 0.5, the triangle 1 pixel wide. The outputs are centred at
// 0.25, 0.75, 1.25, 1.75; the first and last read one input only (weight
// 1), the middle two both inputs with 0.75, 0.25 and 0.25, 0.75. With 0, 2
// the second output is exactly 0.5: PIL's fixed point rounds it up (0.25
// is 2^20 in 22 bits, 2·2^20 + 2^21 = 2^22), and torch's uint8 kernel too
// (14 bits there), but torch's float path rounds half to even, to 0. The
// cubic's weights are 111/102, -9/102 and 111/140, 29/140, then mirrored:
// with 0, 255 the first output is 255·(-9/102) = -22.5 and the last
// 255·111/102 = 277.5, both clamped; the fixed point's are
// (2^13 - 255·1446)>>14 = -23 and (2^13 + 255·17830)>>14 = 278.
func TestResizeByHand(t *testing.T) {
	tests := []struct {
		in   []uint8 // one channel; the image is grey
		outW int
		want map[Resampler][]uint8
	}{
		{[]uint8{10, 20, 30, 41}, 2, map[Resampler][]uint8{
			PIL: {17, 33}, TorchvisionUint8: {17, 33}, Torchvision: {17, 33},
			TorchvisionBicubic: {16, 35}, TorchvisionBicubicUint8: {16, 35}}},
		{[]uint8{0, 70, 140, 210}, 2, map[Resampler][]uint8{
			PIL: {50, 160}, TorchvisionUint8: {50, 160}, Torchvision: {50, 160},
			TorchvisionBicubic: {41, 169}, TorchvisionBicubicUint8: {41, 169}}},
		{[]uint8{0, 255}, 4, map[Resampler][]uint8{
			PIL: {0, 64, 191, 255}, TorchvisionUint8: {0, 64, 191, 255}, Torchvision: {0, 64, 191, 255},
			TorchvisionBicubic: {0, 53, 202, 255}, TorchvisionBicubicUint8: {0, 53, 202, 255}}},
		{[]uint8{0, 2}, 4, map[Resampler][]uint8{
			PIL: {0, 1, 2, 2}, TorchvisionUint8: {0, 1, 2, 2}, Torchvision: {0, 0, 2, 2},
			TorchvisionBicubic: {0, 0, 2, 2}, TorchvisionBicubicUint8: {0, 0, 2, 2}}},
	}
	for _, tt := range tests {
		src := rgb8{w: len(tt.in), h: 1}
		for _, v := range tt.in {
			src.pix = append(src.pix, v, v, v)
		}
		for r, want := range tt.want {
			got := resize(src, tt.outW, 1, r)
			for x, v := range want {
				if got[3*x] != v || got[3*x+1] != v || got[3*x+2] != v {
					t.Errorf("%v: %v resized to %d: %v, want %v per channel", r, tt.in, tt.outW, got, want)
					break
				}
			}
		}
	}
}

// TestResizeWeights checks the fixed-point weights of the 4 → 2 case
// above: PIL's are 22-bit, round(3/7·2^22) = 1797559 and round(1/7·2^22)
// = 599186; torch's uint8 kernel takes 16 bits, the most that keep the
// largest weight (3/7·2^17 = 56173 would not fit an int16): 28087, 9362.
func TestResizeWeights(t *testing.T) {
	a := newAxis(4, 2, bilinear)
	if a.ksize != 5 || a.start[0] != 0 || a.n[0] != 3 || a.start[1] != 1 || a.n[1] != 3 {
		t.Fatalf("ksize %d, bounds %v %v, want 5, [0 1] [3 3]", a.ksize, a.start, a.n)
	}
	for _, tt := range []struct {
		r    Resampler
		bits uint
		want []int32
	}{
		{PIL, 22, []int32{1797559, 1797559, 599186}},
		{TorchvisionUint8, 16, []int32{28087, 28087, 9362}},
	} {
		k, bits := a.fixed(tt.r)
		if bits != tt.bits || !slices.Equal(k[:3], tt.want) || !slices.Equal(k[5:8], []int32{tt.want[2], tt.want[0], tt.want[1]}) {
			t.Errorf("%v: %d bits, weights %v, want %d bits, %v", tt.r, bits, k, tt.bits, tt.want)
		}
	}
}

// TestBicubicWeightsByHand checks the cubic's weights, in float64, float32
// and int16, on the two smallest cases, worked from torch's
// _compute_indices_min_size_weights_aa and Keys' kernel with a = -0.5:
// 1.5|x|³ - 2.5|x|² + 1 within 1, -0.5|x|³ + 2.5|x|² - 4|x| + 2 within 2.
// At the distances below every value of it is a short binary fraction, so
// that nothing rounds before the normalizing division, which rounds
// num/den once.
//
// 4 → 2: scale 2, so the support is 2·2 = 4 input pixels each side and
// ksize is 2·4+1 = 9. Output 0 is centred at 1.0 and reads inputs
// max(int(1-4+0.5), 0) = 0 to min(int(1+4+0.5), 4) = 4, at distances
// (j+0.5-1)/2 = -0.25, 0.25, 0.75, 1.25, where the kernel is 0.8671875,
// 0.8671875, 0.2265625, -0.0703125: 55.5, 55.5, 14.5, -4.5 in 64ths,
// summing to 121 of them. Normalized: 111, 111, 29, -9 in 242nds. Output
// 1 (centre 3.0, inputs int(-0.5) = 0 to 4) is its mirror image. The
// largest weight, 111/242 = 0.4587, takes 16 bits (round(111/242·2^17) =
// 60120 is past an int16): 111/242·2^16 = 30059.9 rounds to 30060,
// 7853.49 to 7853, and -2437.29 away from zero to -2437.
//
// 2 → 4: scale 0.5, so the support stays 2 and ksize is 5. Output 0
// (centre 0.25) reads inputs 0 and 1 at distances 0.25 and 1.25: 55.5 and
// -4.5 64ths, normalized 111/102 and -9/102; output 1 (centre 0.75) at
// -0.25 and 0.75: 111/140 and 29/140; outputs 2 and 3 mirror them.
// 111/102 = 1.088 takes 14 bits: 17830 and -1446 (-1445.6, away from
// zero), 12990 and 3394.
func TestBicubicWeightsByHand(t *testing.T) {
	type frac struct{ num, den int }
	tests := []struct {
		in, out, ksize int
		w              [][]frac // each output's, from input 0
		bits           uint
		fixed          [][]int32
	}{
		{4, 2, 9,
			[][]frac{{{111, 242}, {111, 242}, {29, 242}, {-9, 242}}, {{-9, 242}, {29, 242}, {111, 242}, {111, 242}}},
			16, [][]int32{{30060, 30060, 7853, -2437}, {-2437, 7853, 30060, 30060}}},
		{2, 4, 5,
			[][]frac{{{111, 102}, {-9, 102}}, {{111, 140}, {29, 140}}, {{29, 140}, {111, 140}}, {{-9, 102}, {111, 102}}},
			14, [][]int32{{17830, -1446}, {12990, 3394}, {3394, 12990}, {-1446, 17830}}},
	}
	for _, tt := range tests {
		a, fa := newAxis(tt.in, tt.out, bicubic), newFloatAxis(tt.in, tt.out, bicubic)
		k, bits := a.fixed(TorchvisionBicubicUint8)
		if a.ksize != tt.ksize || fa.ksize != tt.ksize || bits != tt.bits {
			t.Errorf("%d → %d: ksize %d and %d, %d bits, want %d, %d bits", tt.in, tt.out, a.ksize, fa.ksize, bits, tt.ksize, tt.bits)
			continue
		}
		for i, w := range tt.w {
			if a.start[i] != 0 || a.n[i] != len(w) || fa.start[i] != 0 || fa.n[i] != len(w) {
				t.Errorf("%d → %d: output %d reads %d+%d and %d+%d, want 0+%d", tt.in, tt.out, i, a.start[i], a.n[i], fa.start[i], fa.n[i], len(w))
				continue
			}
			for j, f := range w {
				got64, got32 := a.w[i*a.ksize+j], fa.w[i*fa.ksize+j]
				if got64 != float64(f.num)/float64(f.den) || got32 != float32(f.num)/float32(f.den) {
					t.Errorf("%d → %d: output %d weight %d is %v and %v, want %d/%d", tt.in, tt.out, i, j, got64, got32, f.num, f.den)
				}
			}
			if got := k[i*a.ksize:][:len(w)]; !slices.Equal(got, tt.fixed[i]) {
				t.Errorf("%d → %d: output %d's int16 weights %v, want %v", tt.in, tt.out, i, got, tt.fixed[i])
			}
		}
	}
}

func TestPixelsLayoutAndNormalization(t *testing.T) {
	// A 2×2 image at Size 2 is not resampled: every value is one pixel's.
	m := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	px := [4][3]uint8{{0, 255, 51}, {10, 20, 30}, {127, 128, 200}, {255, 0, 1}}
	for i, p := range px {
		m.SetNRGBA(i%2, i/2, color.NRGBA{p[0], p[1], p[2], 255})
	}
	p := Preprocess{Size: 2, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, Rescale: 1.0 / 255}
	got, err := p.Pixels(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*2*2 {
		t.Fatalf("%d values, want 12", len(got))
	}
	// Channels first: index c·H·W + y·W + x; the fused normalization is
	// (v - 127.5) / 127.5 in float32.
	for c := range 3 {
		for i, p := range px {
			want := (float32(p[c]) - 127.5) / 127.5
			if v := got[c*4+i]; v != want {
				t.Errorf("channel %d pixel %d: %v, want %v", c, i, v, want)
			}
		}
	}
	if got[0] != -1 || got[4+0] != 1 {
		t.Errorf("0 and 255 give %v and %v, want -1 and 1", got[0], got[4])
	}
}

// TestPixelsNonSquare: at Width×Height the values are 3×Height×Width,
// channels first, rows of Width. A 3×2 image at 3×2 is not resampled;
// Gemma 4's mean 0 and std 1 leave v/255.
func TestPixelsNonSquare(t *testing.T) {
	m := pattern(3, 2)
	p := Preprocess{Width: 3, Height: 2, Std: [3]float32{1, 1, 1}, Rescale: 1.0 / 255, Resample: TorchvisionBicubicUint8}
	got, err := p.Pixels(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*2*3 {
		t.Fatalf("%d values, want 18", len(got))
	}
	for c := range 3 {
		for y := range 2 {
			for x := range 3 {
				want := float32(m.Pix[m.PixOffset(x, y)+c]) / 255
				if v := got[(c*2+y)*3+x]; v != want {
					t.Errorf("channel %d at %d,%d: %v, want %v", c, x, y, v, want)
				}
			}
		}
	}
}

func TestPixelsGemma3Range(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 123, 77))
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range src.Pix {
		src.Pix[i] = uint8(rng.IntN(256))
	}
	// A sub-image: Bounds that do not start at 0,0.
	sub := src.SubImage(image.Rect(3, 5, 100, 70))
	for _, r := range resamplers {
		p := Preprocess{Size: 64, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, Rescale: 1.0 / 255, Resample: r}
		got, err := p.Pixels(sub)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3*64*64 {
			t.Fatalf("%v: %d values, want %d", r, len(got), 3*64*64)
		}
		for i, v := range got {
			if !(v >= -1 && v <= 1) {
				t.Fatalf("%v: value %d is %v, outside [-1, 1]", r, i, v)
			}
		}
	}
}

// TestPixelsGemma4: a 640×480 noise image through Gemma 4's preprocessing
// at its default budget: 912×672 (Gemma4Size), bicubic, every value in
// [0, 1] though the cubic overshoots on noise (the uint8 kernel clamps).
func TestPixelsGemma4(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 640, 480))
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range src.Pix {
		src.Pix[i] = uint8(rng.IntN(256))
	}
	w, h, err := Gemma4Size(640, 480, 16, 3, 280)
	if err != nil || w != 912 || h != 672 {
		t.Fatalf("Gemma4Size(640, 480) = %d, %d, %v; want 912, 672", w, h, err)
	}
	p := Preprocess{Width: w, Height: h, Std: [3]float32{1, 1, 1}, Rescale: 1.0 / 255, Resample: TorchvisionBicubicUint8}
	got, err := p.Pixels(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*912*672 {
		t.Fatalf("%d values, want %d", len(got), 3*912*672)
	}
	for i, v := range got {
		if !(v >= 0 && v <= 1) {
			t.Fatalf("value %d is %v, outside [0, 1]", i, v)
		}
	}
}

// TestResamplersAgreeWithinOneLevel: the references of one filter differ
// only in rounding, by at most one level. For the cubic the noise is kept
// within 64..191: its negative lobes overshoot by up to an eighth of a
// step, and the uint8 kernel clamps its horizontal pass to 0..255 where
// the float one does not (on full-range noise enlarged 4×, torch's two
// paths are up to 19 levels apart), so no pass may reach the clamp.
func TestResamplersAgreeWithinOneLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, size := range [][4]int{{37, 23, 32, 32}, {100, 61, 32, 32}, {300, 200, 89, 89}, {5, 3, 50, 50}, {64, 64, 13, 29}, {20, 27, 84, 108}} {
		for _, pair := range []struct {
			base   Resampler
			others []Resampler
			lo, hi uint8
		}{
			{PIL, []Resampler{Torchvision, TorchvisionUint8}, 0, 255},
			{TorchvisionBicubicUint8, []Resampler{TorchvisionBicubic}, 64, 191},
		} {
			src := randomRGB(rng, size[0], size[1], pair.lo, pair.hi)
			base := resize(src, size[2], size[3], pair.base)
			for _, r := range pair.others {
				got := resize(src, size[2], size[3], r)
				for i := range got {
					if d := int(got[i]) - int(base[i]); d < -1 || d > 1 {
						t.Fatalf("%v and %v differ by %d resizing %dx%d to %dx%d", r, pair.base, d, size[0], size[1], size[2], size[3])
					}
				}
			}
		}
	}
}

// TestGemma4Size checks the target sizes against transformers'
// get_aspect_ratio_preserving_size, which gave each of these. At 280
// tokens, patch 16 and pool 3, the budget is 280·9 patches of 16², and
// the sides are multiples of 48: 1024×1024 scales by sqrt(645120/1048576)
// to 803.2 a side, 16 multiples, 768; 640×480 by sqrt(2.1) to 927.4×695.6,
// 19×14 multiples, 912×672. The spec's fixture sizes use patch 4 and 70
// tokens. An image more than 280 times wider than high rounds its height
// to 0 multiples and takes one, and 280 across: 281×1 and 10000×20.
func TestGemma4Size(t *testing.T) {
	tests := []struct {
		w, h, patch, pool, tokens int
		wantW, wantH              int
	}{
		{1024, 1024, 16, 3, 280, 768, 768},
		{640, 480, 16, 3, 280, 912, 672},
		{1920, 1080, 16, 3, 280, 1056, 576},
		{4000, 3000, 16, 3, 1120, 1824, 1344},
		{1, 1, 16, 3, 70, 384, 384},
		{1, 1, 16, 3, 280, 768, 768},
		{1, 1, 16, 3, 1120, 1584, 1584},
		{32, 32, 4, 3, 70, 96, 96},
		{75, 50, 4, 3, 70, 120, 72},
		{20, 27, 4, 3, 70, 84, 108},
		{160, 120, 4, 3, 70, 108, 84},
		{5000, 20, 16, 3, 280, 12672, 48},
		{50000, 1000, 16, 3, 70, 2832, 48},
		{280, 1, 16, 3, 280, 13440, 48},
		{281, 1, 16, 3, 280, 13440, 48},
		{10000, 20, 16, 3, 280, 13440, 48},
		{20, 10000, 16, 3, 280, 48, 13440},
	}
	for _, tt := range tests {
		w, h, err := Gemma4Size(tt.w, tt.h, tt.patch, tt.pool, tt.tokens)
		if err != nil || w != tt.wantW || h != tt.wantH {
			t.Errorf("Gemma4Size(%d, %d, %d, %d, %d) = %d, %d, %v; want %d, %d", tt.w, tt.h, tt.patch, tt.pool, tt.tokens, w, h, err, tt.wantW, tt.wantH)
			continue
		}
		side := tt.patch * tt.pool
		if tokens := (w / side) * (h / side); w%side != 0 || h%side != 0 || tokens > tt.tokens {
			t.Errorf("%dx%d: %dx%d is not whole pools within %d tokens (%d)", tt.w, tt.h, w, h, tt.tokens, tokens)
		}
		if _, _, err := (Preprocess{Width: w, Height: h, Rescale: 1.0 / 255, Std: [3]float32{1, 1, 1}}).validate(); err != nil {
			t.Errorf("%dx%d: Preprocess refuses its Gemma 4 size: %v", tt.w, tt.h, err)
		}
	}
	for _, tt := range []struct {
		w, h, patch, pool, tokens int
		want                      string
	}{
		{640, 480, 16, 3, 256, "budget of 256 tokens is not one of [70 140 280 560 1120]"},
		{0, 480, 16, 3, 280, "0x480 image: it has no pixels"},
		{640, -1, 16, 3, 280, "640x-1 image: it has no pixels"},
		{640, 480, 0, 3, 280, "patch size 0 and pooling kernel 3 must be positive"},
		{640, 480, 16, 0, 280, "patch size 16 and pooling kernel 0 must be positive"},
	} {
		if w, h, err := Gemma4Size(tt.w, tt.h, tt.patch, tt.pool, tt.tokens); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Gemma4Size(%d, %d, %d, %d, %d) = %d, %d, %v; want an error saying %q", tt.w, tt.h, tt.patch, tt.pool, tt.tokens, w, h, err, tt.want)
		}
	}
}

func TestPreprocessRefuses(t *testing.T) {
	img := pattern(3, 3)
	ok := Preprocess{Size: 4, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, Rescale: 1.0 / 255}
	tests := []struct {
		name string
		edit func(*Preprocess)
		want string
	}{
		{"size 0", func(p *Preprocess) { p.Size = 0 }, "size 0 is outside 1..4096"},
		{"size too big", func(p *Preprocess) { p.Size = MaxSize + 1 }, "size 4097"},
		{"size and width", func(p *Preprocess) { p.Width, p.Height = 4, 4 }, "size 4 and width×height 4×4 are both set"},
		{"width alone", func(p *Preprocess) { p.Size, p.Width = 0, 4 }, "size 4x0: both sides must be positive"},
		{"height alone", func(p *Preprocess) { p.Size, p.Height = 0, 4 }, "size 0x4: both sides must be positive"},
		{"negative width", func(p *Preprocess) { p.Size, p.Width, p.Height = 0, -4, 4 }, "size -4x4"},
		{"area too big", func(p *Preprocess) { p.Size, p.Width, p.Height = 0, 2*MaxSize, MaxSize/2+1 }, "size 8192x2049: both sides must be positive and the area at most 16777216 pixels (4096²)"},
		{"overflowing area", func(p *Preprocess) { p.Size, p.Width, p.Height = 0, 1<<40, 1<<40 }, "the area at most"},
		{"rescale 0", func(p *Preprocess) { p.Rescale = 0 }, "rescale 0 must be a positive number"},
		{"std 0", func(p *Preprocess) { p.Std[1] = 0 }, "std[1] is 0"},
		{"resampler", func(p *Preprocess) { p.Resample = 7 }, "unknown resampler Resampler(7)"},
	}
	for _, tt := range tests {
		p := ok
		tt.edit(&p)
		if _, err := p.Pixels(img); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	// The largest area is allowed, whatever its shape.
	for _, wh := range [][2]int{{MaxSize, MaxSize}, {MaxSize * MaxSize, 1}, {48, 1120 * 48}} {
		p := ok
		p.Size, p.Width, p.Height = 0, wh[0], wh[1]
		if _, _, err := p.validate(); err != nil {
			t.Errorf("%dx%d: %v", wh[0], wh[1], err)
		}
	}
	if _, err := ok.Pixels(image.NewNRGBA(image.Rect(0, 0, 0, 3))); err == nil || !strings.Contains(err.Error(), "no pixels") {
		t.Errorf("empty image: error %v", err)
	}
}
