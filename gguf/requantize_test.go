package gguf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// testTensor is one tensor of a test model: its values are drawn uniformly
// from [-scale, scale] (or 1±scale for a norm) and stored as typ.
type testTensor struct {
	name  string
	typ   Type
	shape []uint64
	norm  bool
}

// testModel is a llama-shaped model small enough to quantize in
// milliseconds: hidden size 256 (one K-quant super-block per row), 4 query
// heads of 64 sharing one KV head (GQA 4), FFN 512, vocabulary 96.
type testModel struct {
	layers int
	tied   bool // no output.weight
	// typeOf, if set, picks the stored type of a tensor; F32 otherwise.
	typeOf func(name string) Type
	extra  []testTensor
}

func (m testModel) tensors() []testTensor {
	typ := func(name string) Type {
		if m.typeOf != nil {
			if t := m.typeOf(name); t != 0 {
				return t
			}
		}
		return TypeF32
	}
	mat := func(name string, cols, rows uint64) testTensor {
		return testTensor{name: name, typ: typ(name), shape: []uint64{cols, rows}}
	}
	ts := []testTensor{mat("token_embd.weight", 256, 96)}
	for l := range m.layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			testTensor{name: p + "attn_norm.weight", typ: TypeF32, shape: []uint64{256}, norm: true},
			mat(p+"attn_q.weight", 256, 256),
			mat(p+"attn_k.weight", 256, 64),
			mat(p+"attn_v.weight", 256, 64),
			mat(p+"attn_output.weight", 256, 256),
			testTensor{name: p + "ffn_norm.weight", typ: TypeF32, shape: []uint64{256}, norm: true},
			mat(p+"ffn_gate.weight", 256, 512),
			mat(p+"ffn_up.weight", 256, 512),
			mat(p+"ffn_down.weight", 512, 256),
		)
	}
	ts = append(ts, testTensor{name: "output_norm.weight", typ: TypeF32, shape: []uint64{256}, norm: true})
	if !m.tied {
		ts = append(ts, mat("output.weight", 256, 96))
	}
	return append(ts, m.extra...)
}

// testMetadata is the model's metadata: general.file_type sits early, so
// that a test sees it replaced in place, and general.quantization_version
// is absent, so that it is appended.
func testMetadata(layers int) []KV {
	return []KV{
		{"general.architecture", ValueOf("llama")},
		{"general.name", ValueOf("requantize test")},
		{"general.file_type", ValueOf(uint32(fileTypeF32))},
		{"llama.block_count", ValueOf(uint32(layers))},
		{"llama.embedding_length", ValueOf(uint32(256))},
		{"llama.feed_forward_length", ValueOf(uint32(512))},
		{"llama.attention.head_count", ValueOf(uint32(4))},
		{"llama.attention.head_count_kv", ValueOf(uint32(1))},
		{"llama.rope.freq_base", ValueOf(float32(10000))},
		{"tokenizer.ggml.tokens", ArrayOf([]string{"<s>", "</s>", "a", "b"})},
		{"tokenizer.ggml.scores", ArrayOf([]float32{0, 0, -1, -2})},
	}
}

// writeTestModel writes m to dir/name and returns its path and each
// tensor's values as the file holds them (after rounding to the stored type),
// so that comparisons measure only what requantizing loses.
func writeTestModel(t *testing.T, dir, name string, m testModel) (string, map[string][]float32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(m.layers)))
	path := filepath.Join(dir, name)
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w := NewWriter(fh)
	for _, kv := range testMetadata(m.layers) {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	ts := m.tensors()
	for _, tt := range ts {
		if err := w.AddTensor(tt.name, tt.typ, tt.shape); err != nil {
			t.Fatal(err)
		}
	}
	values := map[string][]float32{}
	for i, tt := range ts {
		n := int(TensorInfo{Shape: tt.shape}.Elements())
		xs := make([]float32, n)
		// Different magnitudes per tensor, as in a real model (embeddings
		// ~1, projections ~0.02): the quantizers' scales must follow.
		scale := float32(0.02) * float32(1+i%5)
		for j := range xs {
			xs[j] = scale * (2*rng.Float32() - 1)
			if tt.norm {
				xs[j] += 1
			}
		}
		size, _ := tt.typ.RowSize(int64(n))
		data := make([]byte, size)
		if err := Quantize(tt.typ, xs, data); err != nil {
			t.Fatal(err)
		}
		stored := make([]float32, n)
		if err := Dequantize(tt.typ, data, stored); err != nil {
			t.Fatal(err)
		}
		values[tt.name] = stored
		if err := w.WriteTensorBytes(tt.name, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path, values
}

func openTest(t *testing.T, path string) *File {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func target(t *testing.T, name string) QuantTarget {
	t.Helper()
	q, err := ParseQuantTarget(name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// requantizeTo converts the model at in as opts say, writes the result next
// to it, and opens it.
func requantizeTo(t *testing.T, in string, opts RequantizeOptions) (*File, []TensorPlan) {
	t.Helper()
	src := openTest(t, in)
	plans, err := PlanRequantize(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(filepath.Dir(in), fmt.Sprintf("out-%s-%d.gguf", opts.Target.Name, len(opts.Keep)))
	if err := RequantizeFile(src, out, opts); err != nil {
		t.Fatal(err)
	}
	return openTest(t, out), plans
}

// relRMSError is ‖got−want‖₂ / ‖want‖₂.
func relRMSError(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// requantizeTolerance is the largest relative RMS error allowed for values
// uniform in [−a, a] stored as a type. A quantizer with step d rounds to
// within ±d/2, an RMS error of d/√12, against the values' RMS a/√3: a
// relative error of d/(2a). Q8_0's step is a/127 (0.39%), Q6_K's about a/32
// (1.6%), Q5_0's a/16 (3.1%), Q5_1's and Q5_K's an asymmetric 2a/31 (3.2%),
// Q4_0's a/8 (6.3%), Q4_K's an asymmetric 2a/15 (6.7% before its scale
// search). Each bound is that estimate with a margin of ~1.4× for the 6- and
// 8-bit block scales, which are quantized too (measured: 0.38%, 1.4%, 3.1%,
// 3.0%, 6.5%, 5.5%). F16 rounds each value to 11 significant bits, a
// relative error of at most 2⁻¹¹; BF16 to 8, at most 2⁻⁸.
var requantizeTolerance = map[Type]float64{
	TypeF32:  0,
	TypeF16:  math.Ldexp(1, -11),
	TypeBF16: math.Ldexp(1, -8),
	TypeQ8_0: 0.0055,
	TypeQ6_K: 0.022,
	TypeQ5_K: 0.045,
	TypeQ5_0: 0.045,
	TypeQ5_1: 0.045,
	TypeQ4_K: 0.09,
	TypeQ4_0: 0.09,
}

// checkValues compares every tensor of out with the values the input held.
func checkValues(t *testing.T, out *File, want map[string][]float32, slack float64) {
	t.Helper()
	for _, ti := range out.Tensors() {
		data, err := out.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, ti.Elements())
		if err := Dequantize(ti.Type, data, got); err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		tol, ok := requantizeTolerance[ti.Type]
		if !ok {
			t.Fatalf("%s: no tolerance for %v", ti.Name, ti.Type)
		}
		if e := relRMSError(got, want[ti.Name]); e > tol+slack {
			t.Errorf("%s (%v): relative RMS error %.5f, want ≤ %.5f", ti.Name, ti.Type, e, tol+slack)
		}
	}
}

// checkMetadata checks out has in's keys in order with their values, less
// the two keys requantizing sets.
func checkMetadata(t *testing.T, in, out *File, ft FileType) {
	t.Helper()
	wantKeys := append(in.Keys(), "general.quantization_version")
	if got := out.Keys(); !slices.Equal(got, wantKeys) {
		t.Errorf("keys %v\nwant %v", got, wantKeys)
	}
	for _, kv := range in.Metadata() {
		got, _ := out.Value(kv.Key)
		switch kv.Key {
		case "general.file_type":
			if got.Type() != ValueUint32 || got.Any() != uint32(ft) {
				t.Errorf("general.file_type = %v (%v), want %d", got.Any(), got.Type(), ft)
			}
		default:
			if got.Type() != kv.Value.Type() || !reflect.DeepEqual(got.Any(), kv.Value.Any()) {
				t.Errorf("%s = %v (%v), want %v (%v)", kv.Key, got.Any(), got.Type(), kv.Value.Any(), kv.Value.Type())
			}
		}
	}
	if v, _ := out.Value("general.quantization_version"); v.Any() != uint32(2) {
		t.Errorf("general.quantization_version = %v, want uint32 2", v.Any())
	}
}

// moreBitsLayers are the layers of an 8-layer model llama.cpp's
// use_more_bits picks: i < 8/8, i ≥ 7·8/8, and (i − 1) % 3 == 2.
var moreBitsLayers = []int{0, 3, 6, 7}

// wantQ4KM is the type llama.cpp's Q4_K_M gives each tensor of an 8-layer
// test model: Q6_K for the output and for attn_v and ffn_down in the layers
// that get more bits, Q4_K for the other matrices, norms as they are.
func wantQ4KM(name string) Type {
	l, inLayer := tensorLayer(name)
	switch {
	case strings.HasSuffix(name, "_norm.weight"):
		return TypeF32
	case name == "output.weight":
		return TypeQ6_K
	case inLayer && slices.Contains(moreBitsLayers, l) &&
		(strings.HasSuffix(name, "attn_v.weight") || strings.HasSuffix(name, "ffn_down.weight")):
		return TypeQ6_K
	}
	return TypeQ4_K
}

func TestRequantizeTypesValuesAndMetadata(t *testing.T) {
	dir := t.TempDir()
	// Sources of three float types: F16 and BF16 are dequantized on the way.
	in, want := writeTestModel(t, dir, "model.gguf", testModel{layers: 8, typeOf: func(name string) Type {
		switch name {
		case "token_embd.weight":
			return TypeF16
		case "blk.0.attn_q.weight":
			return TypeBF16
		}
		return 0
	}})
	src := openTest(t, in)
	norm := func(name string, def Type) Type {
		if strings.HasSuffix(name, "_norm.weight") {
			return TypeF32
		}
		return def
	}
	cases := []struct {
		target string
		ft     FileType
		want   func(name string) Type
	}{
		{"Q4_0", 2, func(name string) Type {
			if name == "output.weight" {
				return TypeQ6_K // llama.cpp's output rule for every quantized mix but Q8_0
			}
			return norm(name, TypeQ4_0)
		}},
		{"Q8_0", 7, func(name string) Type { return norm(name, TypeQ8_0) }},
		{"Q4_K_M", 15, wantQ4KM},
		{"F16", 1, func(name string) Type { return norm(name, TypeF16) }},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			out, plans := requantizeTo(t, in, RequantizeOptions{Target: target(t, c.target)})
			for i, ti := range out.Tensors() {
				if w := c.want(ti.Name); ti.Type != w {
					t.Errorf("%s: %v, want %v (note %q)", ti.Name, ti.Type, w, plans[i].Note)
				}
				if plans[i].To != ti.Type || plans[i].OutSize != ti.Size {
					t.Errorf("%s: plan %v %d bytes, file %v %d bytes", ti.Name, plans[i].To, plans[i].OutSize, ti.Type, ti.Size)
				}
			}
			checkValues(t, out, want, 0)
			checkMetadata(t, src, out, c.ft)
			if ft, _ := out.FileType(); ft != c.ft {
				t.Errorf("file type %v, want %d", ft, c.ft)
			}
		})
	}
}

// TestRequantizeMatchesQuantize checks the streamed, chunked conversion
// against Quantize of the whole tensor at once: blocks are independent, so
// the bytes must be the same whatever the chunking, here 3 rows of 256 per
// chunk with a shorter last one.
func TestRequantizeMatchesQuantize(t *testing.T) {
	dir := t.TempDir()
	in, want := writeTestModel(t, dir, "model.gguf", testModel{layers: 1})
	src := openTest(t, in)
	for _, chunk := range []int{0, 3 * 256} {
		var buf bytes.Buffer
		err := Requantize(src, &buf, RequantizeOptions{Target: target(t, "Q5_K_S"), chunkValues: chunk})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range out.Tensors() {
			if ti.Type == TypeF32 {
				continue
			}
			got, _ := out.Data(ti)
			exp := make([]byte, ti.Size)
			if err := Quantize(ti.Type, want[ti.Name], exp); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, exp) {
				t.Errorf("chunk %d: %s (%v) differs from Quantize at byte %d", chunk, ti.Name, ti.Type, firstByteDiffAt(got, exp))
			}
		}
	}
}

func firstByteDiffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestRequantizeTiedEmbedding checks that without output.weight the token
// embedding, which is then also the output, gets the output's Q6_K.
func TestRequantizeTiedEmbedding(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeTestModel(t, dir, "tied.gguf", testModel{layers: 2, tied: true})
	for _, name := range []string{"Q4_K_M", "Q4_0", "Q5_K_S"} {
		out, plans := requantizeTo(t, in, RequantizeOptions{Target: target(t, name)})
		ti, _ := out.Tensor("token_embd.weight")
		if ti.Type != TypeQ6_K {
			t.Errorf("%s: tied token_embd.weight is %v, want Q6_K", name, ti.Type)
		}
		if plans[0].Note == "" {
			t.Errorf("%s: no note for the tied embedding", name)
		}
	}
	// Q8_0 keeps Q8_0 for the output.
	out, _ := requantizeTo(t, in, RequantizeOptions{Target: target(t, "Q8_0")})
	if ti, _ := out.Tensor("token_embd.weight"); ti.Type != TypeQ8_0 {
		t.Errorf("Q8_0: tied token_embd.weight is %v, want Q8_0", ti.Type)
	}
	// Untied, the embedding is an ordinary matrix.
	in2, _ := writeTestModel(t, dir, "untied.gguf", testModel{layers: 2})
	out, _ = requantizeTo(t, in2, RequantizeOptions{Target: target(t, "Q4_K_M")})
	if ti, _ := out.Tensor("token_embd.weight"); ti.Type != TypeQ4_K {
		t.Errorf("untied token_embd.weight is %v, want Q4_K", ti.Type)
	}
}

// TestRequantizeFallbacks checks row lengths a type's block does not divide.
func TestRequantizeFallbacks(t *testing.T) {
	dir := t.TempDir()
	in, want := writeTestModel(t, dir, "odd.gguf", testModel{layers: 1, extra: []testTensor{
		{name: "blk.0.x288.weight", typ: TypeF32, shape: []uint64{288, 8}}, // 32-multiple, not 256
		{name: "blk.0.x100.weight", typ: TypeF32, shape: []uint64{100, 8}}, // not even 32
		{name: "blk.0.ffn_down_shexp.weight", typ: TypeF32, shape: []uint64{288, 8}},
	}})
	cases := []struct {
		target string
		want   map[string]Type
	}{
		{"Q4_K_M", map[string]Type{
			"blk.0.x288.weight": TypeQ5_0, // Q4_K → Q5_0
			"blk.0.x100.weight": TypeF16,  // Q4_K → Q5_0 does not fit either → F16
			// ffn_down of layer 0 (of 1: every layer gets more bits): Q6_K → Q8_0.
			"blk.0.ffn_down_shexp.weight": TypeQ8_0,
		}},
		{"Q5_K_S", map[string]Type{"blk.0.x288.weight": TypeQ5_1, "blk.0.x100.weight": TypeF16}},
		{"Q4_0", map[string]Type{"blk.0.x288.weight": TypeQ4_0, "blk.0.x100.weight": TypeF16}},
	}
	for _, c := range cases {
		out, plans := requantizeTo(t, in, RequantizeOptions{Target: target(t, c.target)})
		for i, ti := range out.Tensors() {
			w, ok := c.want[ti.Name]
			if !ok {
				continue
			}
			if ti.Type != w {
				t.Errorf("%s: %s is %v, want %v", c.target, ti.Name, ti.Type, w)
			}
			fellBack := w != TypeQ4_0
			if plans[i].Fallback != fellBack || fellBack && !strings.Contains(plans[i].Note, "fallback") {
				t.Errorf("%s: %s: fallback %v note %q", c.target, ti.Name, plans[i].Fallback, plans[i].Note)
			}
		}
		checkValues(t, out, want, 0)
	}
}

func TestRequantizeKeepAndPure(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeTestModel(t, dir, "model.gguf", testModel{layers: 8, typeOf: func(name string) Type {
		if name == "output.weight" {
			return TypeF16
		}
		return 0
	}})
	src := openTest(t, in)
	keep := []*regexp.Regexp{regexp.MustCompile(`attn_q\.`), regexp.MustCompile(`^output\.weight$`)}
	out, plans := requantizeTo(t, in, RequantizeOptions{Target: target(t, "Q4_K_M"), Keep: keep})
	for i, ti := range out.Tensors() {
		kept := strings.Contains(ti.Name, "attn_q.") || ti.Name == "output.weight"
		orig, _ := src.Tensor(ti.Name)
		switch {
		case kept:
			a, _ := src.Data(orig)
			b, _ := out.Data(ti)
			if ti.Type != orig.Type || !bytes.Equal(a, b) || plans[i].Note != "kept by --keep" {
				t.Errorf("%s: %v (note %q), want kept as %v byte for byte", ti.Name, ti.Type, plans[i].Note, orig.Type)
			}
		case ti.Type != wantQ4KM(ti.Name):
			t.Errorf("%s: %v, want %v", ti.Name, ti.Type, wantQ4KM(ti.Name))
		}
	}

	// q4_k is llama-quantize's alias of the Q4_K_M mix.
	alias, _ := requantizeTo(t, in, RequantizeOptions{Target: target(t, "q4_k")})
	for _, ti := range alias.Tensors() {
		if w := wantQ4KM(ti.Name); !strings.HasSuffix(ti.Name, "_norm.weight") && ti.Type != w {
			t.Errorf("q4_k alias: %s is %v, want %v as in Q4_K_M", ti.Name, ti.Type, w)
		}
	}

	// Pure turns the mix off: Q4_K everywhere.
	pureMix := target(t, "Q4_K_M")
	pureMix.Pure = true
	for _, tgt := range []QuantTarget{pureMix} {
		out, _ := requantizeTo(t, in, RequantizeOptions{Target: tgt})
		for _, ti := range out.Tensors() {
			w := TypeQ4_K
			if strings.HasSuffix(ti.Name, "_norm.weight") {
				w = TypeF32
			}
			if ti.Type != w {
				t.Errorf("pure %s: %s is %v, want %v", tgt.Name, ti.Name, ti.Type, w)
			}
		}
		if ft, _ := out.FileType(); ft != fileTypeQ4_K_M {
			t.Errorf("pure %s: file type %v, want MOSTLY_Q4_K_M", tgt.Name, ft)
		}
	}
}

// TestRequantizeFromQuantized converts a Q8_0 model: to Q4_K_M through
// float32, and to Q8_0 again by copying every tensor as it is.
func TestRequantizeFromQuantized(t *testing.T) {
	dir := t.TempDir()
	in, want := writeTestModel(t, dir, "model.gguf", testModel{layers: 8})
	q8, _ := requantizeTo(t, in, RequantizeOptions{Target: target(t, "Q8_0")})
	q8path := q8.Name()

	out, _ := requantizeTo(t, q8path, RequantizeOptions{Target: target(t, "Q4_K_M")})
	for _, ti := range out.Tensors() {
		if ti.Type != wantQ4KM(ti.Name) {
			t.Errorf("%s: %v, want %v", ti.Name, ti.Type, wantQ4KM(ti.Name))
		}
	}
	// Two roundings: the errors are independent, so the bound grows by at
	// most Q8_0's bound (it adds in quadrature; adding it whole is looser).
	checkValues(t, out, want, requantizeTolerance[TypeQ8_0])

	var again bytes.Buffer
	if err := Requantize(q8, &again, RequantizeOptions{Target: target(t, "Q8_0")}); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(q8path)
	if !bytes.Equal(again.Bytes(), orig) {
		t.Errorf("Q8_0 → Q8_0 is not a byte-for-byte copy (first difference at %d)", firstByteDiffAt(again.Bytes(), orig))
	}
}

func TestRequantizeProgress(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeTestModel(t, dir, "model.gguf", testModel{layers: 2})
	src := openTest(t, in)
	var last RequantizeProgress
	var done []string
	opts := RequantizeOptions{Target: target(t, "Q4_0"), chunkValues: 4096, Progress: func(p RequantizeProgress) {
		if p.BytesDone < last.BytesDone || p.Index < last.Index {
			t.Errorf("progress went back: %+v after %+v", p, last)
		}
		if p.Done {
			done = append(done, p.Tensor.Name)
		}
		last = p
	}}
	if err := Requantize(src, io.Discard, opts); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range src.Tensors() {
		names = append(names, ti.Name)
	}
	if !slices.Equal(done, names) {
		t.Errorf("done for %v\nwant %v", done, names)
	}
	if last.BytesDone != last.BytesTotal || last.Count != len(names) {
		t.Errorf("last progress %+v: want all %d bytes of %d tensors", last, last.BytesTotal, len(names))
	}
}

func TestParseQuantTarget(t *testing.T) {
	for _, c := range []struct {
		name string
		ft   FileType
		def  Type
		pure bool
	}{
		{"q4_k_m", 15, TypeQ4_K, false},
		{"Q5_K_M", 17, TypeQ5_K, false},
		{"Q4_K_S", 14, TypeQ4_K, false},
		{"q3_k_m", 12, TypeQ3_K, false},
		{"Q2_K", 10, TypeQ2_K, false},
		{"Q6_K", 18, TypeQ6_K, false},
		{"Q8_0", 7, TypeQ8_0, false},
		{"Q4_0", 2, TypeQ4_0, false},
		{"f16", 1, TypeF16, false},
		{"BF16", 32, TypeBF16, false},
		{"F32", 0, TypeF32, false},
		{"iq4_xs", 30, TypeIQ4_XS, false},
		{"Q4_K", 15, TypeQ4_K, false},
		{"mxfp4", 38, TypeMXFP4, true},
	} {
		got, err := ParseQuantTarget(c.name)
		if err != nil || got.FileType != c.ft || got.Default != c.def || got.Pure != c.pure {
			t.Errorf("ParseQuantTarget(%q) = %+v, %v; want file type %d, %v, pure %v", c.name, got, err, c.ft, c.def, c.pure)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"Q9_9", `unknown quantize type "Q9_9"`},
		{"IQ2_XXS", "IQ2_XXS needs an importance matrix"},
		{"q2_k_s", "Q2_K_S needs an importance matrix"},
		{"IQ3_S", "IQ3 lattice grids"},
		{"Q8_K", "activation encoding"},
	} {
		_, err := ParseQuantTarget(c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseQuantTarget(%q): %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := ParseQuantTarget("IQ1_S"); !errors.Is(err, ErrNeedsImatrix) {
		t.Errorf("IQ1_S: %v, want ErrNeedsImatrix", err)
	}
}

func TestRequantizeFileRefusesItsInput(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeTestModel(t, dir, "model.gguf", testModel{layers: 1})
	before, _ := os.ReadFile(in)
	link := filepath.Join(dir, "link.gguf")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	src := openTest(t, in)
	rel, _ := filepath.Rel(mustGetwd(t), in)
	for _, out := range []string{in, rel, link} {
		err := RequantizeFile(src, out, RequantizeOptions{Target: target(t, "Q4_0")})
		if err == nil || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), "is the input file") {
			t.Errorf("output %s: %v, want an error naming it as the input", out, err)
		}
	}
	if after, _ := os.ReadFile(in); !bytes.Equal(before, after) {
		t.Error("the input changed")
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// failingWriter passes n bytes through, then fails as a full disk does.
type failingWriter struct {
	w    io.Writer
	n    int
	path string
}

func (f *failingWriter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		k, _ := f.w.Write(b[:f.n])
		f.n = 0
		return k, &os.PathError{Op: "write", Path: f.path, Err: syscall.ENOSPC}
	}
	f.n -= len(b)
	return f.w.Write(b)
}

// TestRequantizeFileInterrupted checks that a run that fails midway, by a
// write error or by cancellation, leaves neither the output nor its
// temporary file, and leaves an older output file as it was.
func TestRequantizeFileInterrupted(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeTestModel(t, dir, "model.gguf", testModel{layers: 2})
	src := openTest(t, in)
	out := filepath.Join(dir, "out.gguf")

	check := func(t *testing.T, err error, old []byte) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		if _, err := os.Stat(out + ".tmp"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s.tmp left behind (%v)", out, err)
		}
		got, err := os.ReadFile(out)
		switch {
		case old == nil && !errors.Is(err, os.ErrNotExist):
			t.Errorf("%s exists after a failed run", out)
		case old != nil && !bytes.Equal(got, old):
			t.Errorf("%s changed by a failed run", out)
		}
	}

	t.Run("disk full", func(t *testing.T) {
		opts := RequantizeOptions{Target: target(t, "Q4_K_M"), wrapOutput: func(w io.Writer) io.Writer {
			return &failingWriter{w: w, n: 256 << 10, path: out + ".tmp"}
		}}
		// 256 KiB is a third of the way into the model.
		err := RequantizeFile(src, out, opts)
		check(t, err, nil)
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), out) {
			t.Errorf("error %v: want ENOSPC naming %s", err, out)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		old := []byte("an older output")
		if err := os.WriteFile(out, old, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(out)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opts := RequantizeOptions{Target: target(t, "Q4_0"), Context: ctx, chunkValues: 4096,
			Progress: func(p RequantizeProgress) {
				if p.Index == 3 {
					cancel() // mid-tensor: the next chunk sees it
				}
			}}
		err := RequantizeFile(src, out, opts)
		check(t, err, old)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
}

// TestRequantizeBadInputs checks that errors about the input name it.
func TestRequantizeBadInputs(t *testing.T) {
	dir := t.TempDir()
	in, _ := writeTestModel(t, dir, "model.gguf", testModel{layers: 1, extra: []testTensor{
		{name: "blk.0.nan.weight", typ: TypeF32, shape: []uint64{256, 4}},
	}})
	// Poison the last tensor's values with a NaN.
	f := openTest(t, in)
	ti, _ := f.Tensor("blk.0.nan.weight")
	raw, _ := os.ReadFile(in)
	off := f.DataOffset() + ti.Offset + 4*(256*2+7) // row 2, column 7
	copy(raw[off:], []byte{0, 0, 0xc0, 0x7f})       // a quiet NaN
	bad := filepath.Join(dir, "nan.gguf")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	src := openTest(t, bad)
	err := RequantizeFile(src, filepath.Join(dir, "out.gguf"), RequantizeOptions{Target: target(t, "Q4_0")})
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `"blk.0.nan.weight": row 2, column 7 holds NaN`) {
		t.Errorf("NaN input: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Error("output left after a failed run")
	}

	// A tensor of a type that cannot be dequantized is refused before
	// anything is written, with a hint; --keep lets it through unchanged.
	w := new(bytes.Buffer)
	gw := NewWriter(w)
	gw.SetString("general.architecture", "llama")
	gw.AddTensor("blk.0.attn_q.weight", TypeIQ2_XXS, []uint64{256, 2})
	gw.WriteTensorBytes("blk.0.attn_q.weight", make([]byte, 2*66))
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	iq, err := Read(bytes.NewReader(w.Bytes()), int64(w.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PlanRequantize(iq, RequantizeOptions{Target: target(t, "Q4_0")}); err == nil || !strings.Contains(err.Error(), "--keep") {
		t.Errorf("IQ2_XXS source: %v, want a refusal that suggests --keep", err)
	}
	plans, err := PlanRequantize(iq, RequantizeOptions{Target: target(t, "Q4_0"), Keep: []*regexp.Regexp{regexp.MustCompile("attn_q")}})
	if err != nil || !plans[0].Copied() {
		t.Errorf("IQ2_XXS source kept: %v, %+v", err, plans)
	}
}

// planModel is a model of zero-filled [256, 2] tensors, enough for
// PlanRequantize, which reads names, shapes and metadata only.
func planModel(t *testing.T, arch string, layers, headKV, experts int, extra ...string) *File {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.SetString("general.architecture", arch)
	w.SetUint32(arch+".block_count", uint32(layers))
	w.SetUint32(arch+".attention.head_count", 8)
	w.SetUint32(arch+".attention.head_count_kv", uint32(headKV))
	if experts > 0 {
		w.SetUint32(arch+".expert_count", uint32(experts))
	}
	names := []string{"token_embd.weight", "output.weight", "output_norm.weight"}
	for l := range layers {
		for _, s := range []string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"} {
			names = append(names, fmt.Sprintf("blk.%d.%s.weight", l, s))
		}
	}
	names = append(names, extra...)
	for _, n := range names {
		shape := []uint64{256, 2}
		switch {
		case strings.HasSuffix(n, "_norm.weight"):
			shape = []uint64{256}
		case strings.Contains(n, "_exps"):
			shape = []uint64{256, 2, 4}
		}
		if err := w.AddTensor(n, TypeF32, shape); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range w.tensors {
		if err := w.WriteTensorBytes(ti.Name, make([]byte, ti.Size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRequantizeMixRules checks llama.cpp's mixes on a 32-layer model, whose
// use_more_bits layers are i < 4, i ≥ 28 and i = 6, 9, …, 27 ((i−4) % 3 ==
// 2), written out here rather than computed.
func TestRequantizeMixRules(t *testing.T) {
	more32 := []int{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}
	// rule gives the expected type of a tensor from its role and layer;
	// roles: "output", "token_embd", and the blk.N suffixes.
	type rule func(role string, layer int) Type
	layered := func(layers []int, in, out Type) func(int) Type {
		return func(l int) Type {
			if slices.Contains(layers, l) {
				return in
			}
			return out
		}
	}
	upTo := func(n int) []int {
		var ls []int
		for i := range n {
			ls = append(ls, i)
		}
		return ls
	}
	mix := func(def, output Type, roles map[string]func(int) Type) rule {
		return func(role string, l int) Type {
			switch {
			case role == "output":
				return output
			case roles[role] != nil:
				return roles[role](l)
			case role == "attn_norm" || role == "output_norm":
				return TypeF32
			}
			return def
		}
	}
	const7 := func(t Type) func(int) Type { return func(int) Type { return t } }
	cases := []struct {
		name, target, arch string
		layers, headKV     int
		experts            int
		want               rule
	}{
		{"Q4_K_M", "Q4_K_M", "llama", 32, 2, 0, mix(TypeQ4_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": layered(more32, TypeQ6_K, TypeQ4_K), "ffn_down": layered(more32, TypeQ6_K, TypeQ4_K)})},
		{"Q5_K_M", "Q5_K_M", "llama", 32, 2, 0, mix(TypeQ5_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": layered(more32, TypeQ6_K, TypeQ5_K), "ffn_down": layered(more32, TypeQ6_K, TypeQ5_K)})},
		{"Q4_K_S", "Q4_K_S", "llama", 32, 2, 0, mix(TypeQ4_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": layered(upTo(4), TypeQ5_K, TypeQ4_K), "ffn_down": layered(upTo(4), TypeQ5_K, TypeQ4_K)})},
		{"Q5_K_S", "Q5_K_S", "llama", 32, 2, 0, mix(TypeQ5_K, TypeQ6_K, nil)},
		{"Q3_K_M", "Q3_K_M", "llama", 32, 2, 0, mix(TypeQ3_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": layered(upTo(2), TypeQ5_K, TypeQ4_K), "ffn_down": layered(upTo(2), TypeQ5_K, TypeQ4_K),
			"attn_output": const7(TypeQ4_K)})},
		{"Q3_K_L", "Q3_K_L", "llama", 32, 2, 0, mix(TypeQ3_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": const7(TypeQ5_K), "ffn_down": const7(TypeQ5_K), "attn_output": const7(TypeQ5_K)})},
		{"Q3_K_S", "Q3_K_S", "llama", 32, 2, 0, mix(TypeQ3_K, TypeQ6_K, nil)},
		{"Q2_K GQA 4", "Q2_K", "llama", 32, 2, 0, mix(TypeQ2_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": const7(TypeQ4_K), "ffn_down": const7(TypeQ3_K), "attn_output": const7(TypeQ3_K)})},
		{"Q2_K no GQA", "Q2_K", "llama", 32, 8, 0, mix(TypeQ2_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": const7(TypeQ3_K), "ffn_down": const7(TypeQ3_K), "attn_output": const7(TypeQ3_K)})},
		{"IQ4_XS GQA 4", "IQ4_XS", "llama", 32, 2, 0, mix(TypeIQ4_XS, TypeQ6_K, map[string]func(int) Type{
			"attn_v": const7(TypeQ5_K), "ffn_down": layered(upTo(4), TypeQ5_K, TypeIQ4_XS)})},
		{"Q6_K", "Q6_K", "llama", 32, 2, 0, mix(TypeQ6_K, TypeQ6_K, nil)},
		{"Q8_0", "Q8_0", "llama", 32, 2, 0, mix(TypeQ8_0, TypeQ8_0, nil)},
		{"Q5_1", "Q5_1", "llama", 32, 2, 0, mix(TypeQ5_1, TypeQ6_K, nil)},
		{"TQ1_0", "TQ1_0", "llama", 32, 2, 0, mix(TypeTQ1_0, TypeQ6_K, map[string]func(int) Type{
			"token_embd": const7(TypeQ4_K)})},
		{"BF16", "BF16", "llama", 32, 2, 0, mix(TypeBF16, TypeBF16, nil)},
		// 8 experts: attn_v and attn_k in Q8_0, attn_output in Q5_K.
		{"Q4_K_M 8 experts", "Q4_K_M", "llama", 32, 2, 8, mix(TypeQ4_K, TypeQ6_K, map[string]func(int) Type{
			"attn_v": const7(TypeQ8_0), "attn_k": const7(TypeQ8_0), "attn_output": const7(TypeQ5_K),
			"ffn_down": layered(more32, TypeQ6_K, TypeQ4_K)})},
		// falcon: output in Q8_0; ffn_down Q6_K in the first 16th (layers
		// 0, 1), Q5_K where use_more_bits, else Q4_K.
		{"Q4_K_M falcon", "Q4_K_M", "falcon", 32, 2, 0, mix(TypeQ4_K, TypeQ8_0, map[string]func(int) Type{
			"attn_v": layered(more32, TypeQ6_K, TypeQ4_K),
			"ffn_down": func(l int) Type {
				switch {
				case l < 2:
					return TypeQ6_K
				case slices.Contains(more32, l):
					return TypeQ5_K
				}
				return TypeQ4_K
			}})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := planModel(t, c.arch, c.layers, c.headKV, c.experts)
			plans, err := PlanRequantize(f, RequantizeOptions{Target: target(t, c.target)})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range plans {
				role, layer := strings.TrimSuffix(p.Name, ".weight"), -1
				if l, ok := tensorLayer(p.Name); ok {
					layer = l
					role = strings.TrimSuffix(strings.TrimPrefix(p.Name, fmt.Sprintf("blk.%d.", l)), ".weight")
				}
				if w := c.want(role, layer); p.To != w {
					t.Errorf("%s: %v, want %v (note %q)", p.Name, p.To, w, p.Note)
				}
			}
		})
	}

	// A 70B llama (80 layers, GQA): Q4_K_M's attn_v is Q5_K where it would be
	// Q4_K. 80 layers: use_more_bits is i < 10, i ≥ 70, (i − 10) % 3 == 2.
	f := planModel(t, "llama", 80, 1, 0)
	plans, err := PlanRequantize(f, RequantizeOptions{Target: target(t, "Q4_K_M")})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		l, ok := tensorLayer(p.Name)
		if !ok || !strings.HasSuffix(p.Name, "attn_v.weight") {
			continue
		}
		want := TypeQ5_K
		if l < 10 || l >= 70 || (l-10)%3 == 2 {
			want = TypeQ6_K
		}
		if p.To != want {
			t.Errorf("70B %s: %v, want %v", p.Name, p.To, want)
		}
	}

	// MXFP4_MOE: 3-D expert tensors in MXFP4, everything else in Q8_0.
	f = planModel(t, "gpt-oss", 2, 2, 4, "blk.0.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight")
	plans, err = PlanRequantize(f, RequantizeOptions{Target: target(t, "MXFP4_MOE")})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		want := TypeQ8_0
		switch {
		case strings.HasSuffix(p.Name, "_norm.weight"):
			want = TypeF32
		case strings.Contains(p.Name, "_exps"):
			want = TypeMXFP4
		}
		if p.To != want {
			t.Errorf("MXFP4_MOE %s: %v, want %v", p.Name, p.To, want)
		}
	}
}
