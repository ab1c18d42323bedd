package gguf_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

func quantVector(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ggmlTestdataDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func quantVectorF32(t testing.TB, name string) []float32 {
	t.Helper()
	b := quantVector(t, name)
	if len(b)%4 != 0 {
		t.Fatalf("%s: %d bytes is not a whole number of float32s", name, len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// manifestType is one entry of quant_manifest.json.
type manifestType struct {
	Name       string `json:"name"`
	GGMLType   uint32 `json:"ggml_type"`
	BlockSize  int    `json:"block_size"`
	TypeSize   int    `json:"type_size"`
	RowSize    int    `json:"row_size"`
	Quant      string `json:"quant"`
	Dequant    string `json:"dequant"`
	VecDotType string `json:"vec_dot_type"`
	VecDotAct  string `json:"vec_dot_activation"`
	VecDot     string `json:"vecdot"`
}

type manifest struct {
	Rows  int            `json:"rows"`
	Cols  int            `json:"cols"`
	Types []manifestType `json:"types"`
}

func quantManifest(t testing.TB) manifest {
	t.Helper()
	var m manifest
	if err := json.Unmarshal(quantVector(t, "quant_manifest.json"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Rows != 8 || m.Cols != 512 || len(m.Types) == 0 {
		t.Fatalf("quant_manifest.json: %d×%d with %d types, want 8×512", m.Rows, m.Cols, len(m.Types))
	}
	return m
}

// Types that must reproduce ggml's vectors bit for bit. The tests below
// check every type in the manifest: these must pass, every other one must be
// refused with ErrUnsupportedType. Listing them keeps a broken codec from
// quietly turning into a refusal.
var (
	wantDequantExact = []gguf.Type{gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
		gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeMXFP4}
	wantQuantExact = wantDequantExact
)

func manifestTypeOf(t *testing.T, mt manifestType) gguf.Type {
	t.Helper()
	typ, err := gguf.ParseType(mt.Name)
	if err != nil {
		t.Fatal(err)
	}
	if rs, _ := typ.RowSize(512); uint32(typ) != mt.GGMLType || typ.BlockSize() != mt.BlockSize || typ.TypeSize() != mt.TypeSize || rs != int64(mt.RowSize) {
		t.Fatalf("%s: types.go says id %d, %d elements in %d bytes; ggml says id %d, %d in %d",
			mt.Name, typ, typ.BlockSize(), typ.TypeSize(), mt.GGMLType, mt.BlockSize, mt.TypeSize)
	}
	return typ
}

// firstBitDiff returns the index of the first value whose bits differ, or -1.
func firstBitDiff(got, want []float32) int {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}

func TestDequantizeMatchesGGML(t *testing.T) {
	m := quantManifest(t)
	exact := map[gguf.Type]bool{}
	for _, mt := range m.Types {
		t.Run(mt.Name, func(t *testing.T) {
			typ := manifestTypeOf(t, mt)
			src := quantVector(t, mt.Quant)
			want := quantVectorF32(t, mt.Dequant)
			got := make([]float32, len(want))
			err := gguf.Dequantize(typ, src, got)
			if !gguf.CanDequantize(typ) {
				if !errors.Is(err, gguf.ErrUnsupportedType) || !strings.Contains(err.Error(), mt.Name) {
					t.Fatalf("Dequantize(%s) = %v, want an ErrUnsupportedType naming the type", mt.Name, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if i := firstBitDiff(got, want); i >= 0 {
				t.Fatalf("row %d col %d (block %d): got %g (%#08x), ggml %g (%#08x)",
					i/m.Cols, i%m.Cols, i%m.Cols/typ.BlockSize(), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			// Row by row and in parallel must give the same bits.
			rowBytes := len(src) / m.Rows
			for r := range m.Rows {
				row := make([]float32, m.Cols)
				if err := gguf.DequantizeParallel(typ, src[r*rowBytes:(r+1)*rowBytes], row); err != nil {
					t.Fatal(err)
				}
				if i := firstBitDiff(row, want[r*m.Cols:(r+1)*m.Cols]); i >= 0 {
					t.Fatalf("row %d alone: col %d differs", r, i)
				}
			}
			exact[typ] = true
		})
	}
	for _, typ := range wantDequantExact {
		if !exact[typ] {
			t.Errorf("%v: no bit-exact dequantize against ggml's vector", typ)
		}
	}
}

func TestQuantizeMatchesGGML(t *testing.T) {
	m := quantManifest(t)
	input := quantVectorF32(t, "input.f32")
	exact := map[gguf.Type]bool{}
	for _, mt := range m.Types {
		t.Run(mt.Name, func(t *testing.T) {
			typ := manifestTypeOf(t, mt)
			want := quantVector(t, mt.Quant)
			if !gguf.CanQuantize(typ) {
				err := gguf.Quantize(typ, input, make([]byte, len(want)))
				if !errors.Is(err, gguf.ErrUnsupportedType) || !strings.Contains(err.Error(), mt.Name) {
					t.Fatalf("Quantize(%s) = %v, want an ErrUnsupportedType naming the type", mt.Name, err)
				}
				return
			}
			for r := range m.Rows {
				got := bytes.Repeat([]byte{0xa5}, mt.RowSize) // every byte must be written
				if err := gguf.Quantize(typ, input[r*m.Cols:(r+1)*m.Cols], got); err != nil {
					t.Fatal(err)
				}
				w := want[r*mt.RowSize : (r+1)*mt.RowSize]
				if i := firstByteDiff(got, w); i >= 0 {
					blk := i / typ.TypeSize()
					lo := blk * typ.TypeSize()
					t.Errorf("row %d: byte %d (block %d, offset %d) = %#02x, ggml %#02x\n got block %x\nggml block %x",
						r, i, blk, i-lo, got[i], w[i], got[lo:lo+typ.TypeSize()], w[lo:lo+typ.TypeSize()])
				}
			}
			if t.Failed() {
				return
			}
			all := make([]byte, len(want))
			if err := gguf.QuantizeParallel(typ, input, all); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(all, want) {
				t.Fatal("QuantizeParallel of all rows differs from ggml")
			}
			exact[typ] = true
		})
	}
	for _, typ := range wantQuantExact {
		if !exact[typ] {
			t.Errorf("%v: no byte-exact quantize against ggml's vector", typ)
		}
	}
}

func firstByteDiff(got, want []byte) int {
	for i := range want {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

// The activation encodings of ggml's vec_dot (act.<V>.bin) come from
// quantize_row_q8_0_ref, q8_1_ref, q8_K_ref and the F16/BF16 row converters.
func TestQuantizeActivationsMatchGGML(t *testing.T) {
	act := quantVectorF32(t, "act.f32")
	for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ8_1, gguf.TypeQ8_K, gguf.TypeF16, gguf.TypeBF16} {
		t.Run(typ.String(), func(t *testing.T) {
			want := quantVector(t, "act."+typ.String()+".bin")
			got := make([]byte, len(want))
			if err := gguf.Quantize(typ, act, got); err != nil {
				t.Fatal(err)
			}
			if i := firstByteDiff(got, want); i >= 0 {
				t.Fatalf("byte %d (block %d) = %#02x, ggml %#02x", i, i/typ.TypeSize(), got[i], want[i])
			}
		})
	}
}

// roundTripBound is the largest relative RMS error, sqrt(Σ(x−x̂)²/Σx²), that
// quantizing standard-normal data may leave, per type. Each bound is about
// 1.4× the error measured with the seed below (noted after it), and the
// measurement agrees with the estimate step/√12 for the uniform grids; a
// broken codec (swapped nibbles, a wrong scale or offset) leaves 30–100 %.
var roundTripBound = map[gguf.Type]float64{
	gguf.TypeF32:    0,      // exact
	gguf.TypeF16:    4e-4,   // 2.1e-4: 11-bit significand, relative spacing 2^-11…2^-10, RMS spacing/√12
	gguf.TypeBF16:   2.5e-3, // 1.6e-3: 8-bit significand, 8× F16's
	gguf.TypeQ8_0:   8e-3,   // 5.4e-3: 255 levels over ±amax of 32 values (≈2σ): step 0.016σ
	gguf.TypeQ8_1:   8e-3,   // 5.4e-3: the same levels as Q8_0
	gguf.TypeQ8_K:   0.01,   // 6.9e-3: 255 levels over ±amax of 256 values (≈2.9σ): step 0.023σ
	gguf.TypeQ6_K:   0.025,  // 0.018: 64 levels per 16 values, int8 sub-scales
	gguf.TypeQ5_1:   0.055,  // 0.038: 32 levels over [min, max] of 32 values
	gguf.TypeQ5_0:   0.06,   // 0.042: 31 usable levels over ±amax
	gguf.TypeQ5_K:   0.05,   // 0.036: 32 levels per 32 values, 6-bit scales and mins, fitted
	gguf.TypeQ4_K:   0.10,   // 0.071: 16 levels per 32 values, 6-bit scales and mins, fitted
	gguf.TypeQ4_1:   0.11,   // 0.078: 16 levels over [min, max]
	gguf.TypeQ4_0:   0.12,   // 0.086: 15 usable levels over ±amax (d = max/−8 leaves +8 unused)
	gguf.TypeIQ4_NL: 0.11,   // 0.077: 16 non-uniform levels with a least-squares scale
	gguf.TypeIQ4_XS: 0.11,   // 0.077: IQ4_NL levels under 6-bit sub-block scales
	gguf.TypeMXFP4:  0.16,   // 0.115: E2M1 levels under a power-of-two scale
	gguf.TypeQ3_K:   0.21,   // 0.152: 8 levels per 16 values
	gguf.TypeQ2_K:   0.40,   // 0.294: 4 levels per 16 values, 4-bit scales and mins
	gguf.TypeTQ1_0:  0.85,   // 0.803: the same ternary levels as TQ2_0, packed 5 per byte
	gguf.TypeTQ2_0:  0.85,   // 0.803: {−d, 0, d} with d = amax (≈2.9σ) zeroes most gaussian values; all zeros would be 1.0
}

func TestQuantizeRoundTripError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 64 * 256 // 64 super-blocks
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	for id := gguf.Type(0); id < 64; id++ {
		if !gguf.CanQuantize(id) {
			continue
		}
		t.Run(id.String(), func(t *testing.T) {
			bound, ok := roundTripBound[id]
			if !ok {
				t.Fatalf("no round-trip bound for quantizable type %v", id)
			}
			size, _ := id.RowSize(n)
			q := make([]byte, size)
			if err := gguf.Quantize(id, src, q); err != nil {
				t.Fatal(err)
			}
			back := make([]float32, n)
			if err := gguf.Dequantize(id, q, back); err != nil {
				t.Fatal(err)
			}
			var num, den float64
			for i, x := range src {
				d := float64(back[i]) - float64(x)
				num += d * d
				den += float64(x) * float64(x)
			}
			rel := math.Sqrt(num / den)
			t.Logf("relative RMS error %.3g (bound %.3g)", rel, bound)
			if rel > bound {
				t.Fatalf("relative RMS error %.4g exceeds %.3g", rel, bound)
			}
		})
	}
}

func TestQuantUnsupportedTypesAreRefused(t *testing.T) {
	for id := gguf.Type(0); id < 64; id++ {
		if !id.Known() {
			continue
		}
		n := id.BlockSize()
		src := make([]byte, id.TypeSize())
		vals := make([]float32, n)
		if !gguf.CanDequantize(id) {
			err := gguf.Dequantize(id, src, vals)
			if !errors.Is(err, gguf.ErrUnsupportedType) || !strings.Contains(err.Error(), "dequantize "+id.String()+":") ||
				!strings.Contains(err.Error(), "supported: F32, F16") {
				t.Errorf("Dequantize(%v) = %v, want a refusal naming the type and the supported ones", id, err)
			}
			if _, err := gguf.DotF32(id, src, vals); !errors.Is(err, gguf.ErrUnsupportedType) {
				t.Errorf("DotF32(%v) = %v, want ErrUnsupportedType", id, err)
			}
		}
		if !gguf.CanQuantize(id) {
			err := gguf.Quantize(id, vals, src)
			if !errors.Is(err, gguf.ErrUnsupportedType) || !strings.Contains(err.Error(), "quantize "+id.String()+":") {
				t.Errorf("Quantize(%v) = %v, want a refusal naming the type", id, err)
			}
			needs := id == gguf.TypeIQ2_XXS || id == gguf.TypeIQ2_XS || id == gguf.TypeIQ1_S
			if got := err != nil && strings.Contains(err.Error(), "importance matrix"); got != needs {
				t.Errorf("Quantize(%v) = %v: mentions an importance matrix %v, want %v", id, err, got, needs)
			}
		}
	}
	for _, id := range []gguf.Type{gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S, gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeI64, gguf.TypeF64} {
		if gguf.CanDequantize(id) {
			t.Errorf("CanDequantize(%v) = true; the refusal list above expects false", id)
		}
	}
	unknown := gguf.Type(5)
	if err := gguf.Dequantize(unknown, nil, nil); err == nil || !strings.Contains(err.Error(), "type(5)") {
		t.Errorf("Dequantize(type 5) = %v, want an unknown-type error", err)
	}
	if err := gguf.Quantize(gguf.Type(1000), nil, nil); err == nil || !strings.Contains(err.Error(), "type(1000)") {
		t.Errorf("Quantize(type 1000) = %v, want an unknown-type error", err)
	}
}

// Bad sizes must come back as errors naming the type and the sizes, never a
// panic or a partial write.
func TestQuantBadSizesAreErrors(t *testing.T) {
	for id := gguf.Type(0); id < 64; id++ {
		if !id.Known() {
			continue
		}
		bs, ts := id.BlockSize(), id.TypeSize()
		t.Run(id.String(), func(t *testing.T) {
			type call struct {
				name string
				fn   func() error
			}
			var calls []call
			if gguf.CanDequantize(id) {
				for _, c := range []struct{ srcLen, n int }{
					{2 * ts, 2*bs + 1}, // values not a multiple of the block size
					{2*ts - 1, 2 * bs}, // src one byte short
					{2*ts + 1, 2 * bs}, // src one byte long
					{0, bs},            // no src at all
					{ts, 0},            // no dst at all
				} {
					if c.n%bs == 0 && c.srcLen == c.n/bs*ts {
						continue // a valid pair (bs = 1 makes some of these valid)
					}
					src, dst := make([]byte, c.srcLen), make([]float32, c.n)
					calls = append(calls,
						call{fmt.Sprintf("Dequantize(%d bytes, %d values)", c.srcLen, c.n), func() error { return gguf.Dequantize(id, src, dst) }},
						call{fmt.Sprintf("DequantizeParallel(%d bytes, %d values)", c.srcLen, c.n), func() error { return gguf.DequantizeParallel(id, src, dst) }},
						call{fmt.Sprintf("DotF32(%d bytes, %d values)", c.srcLen, c.n), func() error { _, err := gguf.DotF32(id, src, dst); return err }},
					)
				}
				if err := gguf.Dequantize(id, nil, nil); err != nil {
					t.Errorf("Dequantize of nothing = %v, want nil", err)
				}
			}
			if gguf.CanQuantize(id) {
				for _, c := range []struct{ n, dstLen int }{
					{2*bs + 1, 2 * ts},
					{2 * bs, 2*ts - 1},
					{2 * bs, 2*ts + 1},
					{bs, 0},
				} {
					if c.n%bs == 0 && c.dstLen == c.n/bs*ts {
						continue
					}
					src, dst := make([]float32, c.n), make([]byte, c.dstLen)
					calls = append(calls,
						call{fmt.Sprintf("Quantize(%d values, %d bytes)", c.n, c.dstLen), func() error { return gguf.Quantize(id, src, dst) }},
						call{fmt.Sprintf("QuantizeParallel(%d values, %d bytes)", c.n, c.dstLen), func() error { return gguf.QuantizeParallel(id, src, dst) }},
					)
				}
			}
			for _, c := range calls {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("%s panicked: %v", c.name, r)
						}
					}()
					err := c.fn()
					if err == nil {
						t.Errorf("%s: no error", c.name)
					} else if !strings.Contains(err.Error(), id.String()) {
						t.Errorf("%s: error %q does not name the type", c.name, err)
					}
				}()
			}
		})
	}
}

// Random blocks (including NaN and Inf scales) decode to the same bits
// serially and in parallel, and every codec survives arbitrary bytes.
func TestDequantizeParallelMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for id := gguf.Type(0); id < 64; id++ {
		if !gguf.CanDequantize(id) {
			continue
		}
		t.Run(id.String(), func(t *testing.T) {
			n := 1 << 19 // enough for several goroutines (DequantizeParallel splits from 64K values)
			n -= n % id.BlockSize()
			size, _ := id.RowSize(int64(n))
			src := make([]byte, size)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			a, b := make([]float32, n), make([]float32, n)
			if err := gguf.Dequantize(id, src, a); err != nil {
				t.Fatal(err)
			}
			if err := gguf.DequantizeParallel(id, src, b); err != nil {
				t.Fatal(err)
			}
			if i := firstBitDiff(b, a); i >= 0 {
				t.Fatalf("value %d: parallel %#08x, serial %#08x", i, math.Float32bits(b[i]), math.Float32bits(a[i]))
			}
		})
	}
}

func TestQuantizeParallelMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 1 << 18
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Exp(4*rng.NormFloat64()))
	}
	for id := gguf.Type(0); id < 64; id++ {
		if !gguf.CanQuantize(id) {
			continue
		}
		t.Run(id.String(), func(t *testing.T) {
			size, _ := id.RowSize(int64(n))
			a, b := make([]byte, size), make([]byte, size)
			if err := gguf.Quantize(id, src, a); err != nil {
				t.Fatal(err)
			}
			if err := gguf.QuantizeParallel(id, src, b); err != nil {
				t.Fatal(err)
			}
			if i := firstByteDiff(b, a); i >= 0 {
				t.Fatalf("byte %d: parallel %#02x, serial %#02x", i, b[i], a[i])
			}
		})
	}
}

// Quantizers must take any float32 input, NaN and infinities included,
// without panicking: their level indices come from clamps and searches that
// a NaN must not push out of range.
func TestQuantizeSurvivesExtremeValues(t *testing.T) {
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32,
		-math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 0, 1e-30, 65504, 65520}
	rng := rand.New(rand.NewPCG(13, 14))
	const n = 16 * 256
	// Each special value alone in the first half, mixed with ordinary
	// values in the second.
	var inputs [][]float32
	for _, v := range special {
		x := make([]float32, n)
		for i := range x {
			x[i] = v
			if i >= n/2 {
				x[i] = float32(rng.NormFloat64())
				if rng.IntN(4) == 0 {
					x[i] = special[rng.IntN(len(special))]
				}
			}
		}
		inputs = append(inputs, x)
	}
	for id := gguf.Type(0); id < 64; id++ {
		if !gguf.CanQuantize(id) {
			continue
		}
		size, _ := id.RowSize(n)
		for _, x := range inputs {
			q := make([]byte, size)
			if err := gguf.Quantize(id, x, q); err != nil {
				t.Fatalf("%v: %v", id, err)
			}
			if err := gguf.Dequantize(id, q, make([]float32, n)); err != nil {
				t.Fatalf("%v: %v", id, err)
			}
		}
	}
}

// DotF32 against ggml's vec_dot. ggml dots with the activations quantized to
// the type's vec_dot_type (act.<V>.bin), so the test dequantizes those and
// passes them as x: what remains is summation order and rounding, float32
// against DotF32's float64. The bound is 1e-5 of Σ|w·x| (ggml's own AVX2
// kernels differ from these scalar values by up to 2.9e-6 of the result),
// measured against the absolute sum because row 2's outliers cancel.
func TestQuantDotF32MatchesGGML(t *testing.T) {
	m := quantManifest(t)
	actTypes := map[string]gguf.Type{"Q8_0": gguf.TypeQ8_0, "Q8_1": gguf.TypeQ8_1, "Q8_K": gguf.TypeQ8_K, "F16": gguf.TypeF16, "BF16": gguf.TypeBF16}
	for _, mt := range m.Types {
		typ := manifestTypeOf(t, mt)
		if !gguf.CanDequantize(typ) {
			continue
		}
		t.Run(mt.Name, func(t *testing.T) {
			at, ok := actTypes[mt.VecDotType]
			if !ok {
				t.Fatalf("unknown vec_dot_type %q", mt.VecDotType)
			}
			act := quantVector(t, mt.VecDotAct)
			x := make([]float32, m.Cols)
			if err := gguf.Dequantize(at, act, x); err != nil {
				t.Fatal(err)
			}
			src := quantVector(t, mt.Quant)
			want := quantVectorF32(t, mt.VecDot)
			w := make([]float32, m.Cols)
			for r := range m.Rows {
				row := src[r*mt.RowSize : (r+1)*mt.RowSize]
				got, err := gguf.DotF32(typ, row, x)
				if err != nil {
					t.Fatal(err)
				}
				if at == gguf.TypeQ8_1 {
					got += q8_1SumCorrection(typ, row, act)
				}
				if err := gguf.Dequantize(typ, row, w); err != nil {
					t.Fatal(err)
				}
				var absSum float64
				for i := range w {
					absSum += math.Abs(float64(w[i]) * float64(x[i]))
				}
				if diff := math.Abs(float64(got) - float64(want[r])); diff > 1e-5*absSum {
					t.Errorf("row %d: DotF32 %g, ggml vec_dot %g (|diff| %.3g > 1e-5 × Σ|w·x| = %.3g)", r, got, want[r], diff, 1e-5*absSum)
				}
			}
		})
	}
}

// q8_1SumCorrection accounts for the one place where ggml's vec_dot does not
// use the dequantized activations: the Q4_1 and Q5_1 kernels add m·s for
// each block, where s is the Q8_1 block's stored f16 of d·Σq, computed from
// the unrounded d, instead of m·(f16 d)·Σq. The difference, Σ m·(s − d·Σq),
// is up to 0.2 on row 2's outliers, far above rounding.
func q8_1SumCorrection(t gguf.Type, row, act []byte) float32 {
	f16 := func(b []byte) float64 {
		var v [1]float32
		if err := gguf.Dequantize(gguf.TypeF16, b[:2], v[:]); err != nil {
			panic(err)
		}
		return float64(v[0])
	}
	var corr float64
	for b := range len(act) / 36 {
		ab := act[36*b:]
		d, s := f16(ab), f16(ab[2:])
		var sum int
		for _, q := range ab[4:36] {
			sum += int(int8(q))
		}
		m := f16(row[t.TypeSize()*b+2:]) // Q4_1 and Q5_1 keep m at byte 2
		corr += m * (s - d*float64(sum))
	}
	return float32(corr)
}
