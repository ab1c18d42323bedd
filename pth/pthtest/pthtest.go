// Package pthtest writes the torch.save format for tests, so that the .pth
// reader (package pth) and what reads weights through it are tested
// without PyTorch.
//
// The archive is what torch.save writes: a zip of
// <archive>/data.pkl (pickle protocol 2, as torch.save writes it), one
// <archive>/data/<key> record per storage and <archive>/version. The pickle
// follows what torch.save emits for a dict of state dicts:
//
//	{'decoder': OrderedDict([('name', _rebuild_tensor_v2(
//	    persistent_load(('storage', torch.FloatStorage, '0', 'cpu', numel)),
//	    offset, size, stride, False, OrderedDict())), …]), …}
//
// (torch/serialization.py _save and torch/_tensor.py __reduce_ex__). A
// file torch.save itself wrote is still to be added as an oracle: Kokoro's
// decoder has fixed widths, so even a small config's file is ~100 MB.
package pthtest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"sort"
	"testing"

	"github.com/x448/float16"
)

// A Storage is one data/<key> record: its values, written as DType.
type Storage struct {
	DType string // F32, F16, BF16, I64
	Data  []float32
}

// A Tensor is a view into one of the file's storages.
type Tensor struct {
	Name    string
	Storage string // key into the file's storages
	Offset  int
	Size    []int
	Stride  []int // nil: contiguous
	Param   bool  // pickled as an nn.Parameter (_rebuild_parameter)
}

// A Module is one state dict of the file: {name: tensor}, in order.
type Module struct {
	Name    string
	Tensors []Tensor
}

// A File is a torch.save archive: a dict of module state dicts, or, with
// Top set, one tensor.
type File struct {
	Archive  string
	Storages map[string]Storage
	Modules  []Module
	Top      *Tensor // set: the file is torch.save of this one tensor (a voice .pt)
}

// pickleWriter emits protocol-2 opcodes.
type pickleWriter struct{ bytes.Buffer }

func (p *pickleWriter) str(s string) {
	p.WriteByte('X') // BINUNICODE
	binary.Write(&p.Buffer, binary.LittleEndian, uint32(len(s)))
	p.WriteString(s)
}
func (p *pickleWriter) int(n int) {
	if n >= 0 && n < 256 {
		p.WriteByte('K') // BININT1
		p.WriteByte(byte(n))
		return
	}
	p.WriteByte('J') // BININT
	binary.Write(&p.Buffer, binary.LittleEndian, int32(n))
}
func (p *pickleWriter) global(module, name string) {
	p.WriteString("c" + module + "\n" + name + "\n")
}
func (p *pickleWriter) tuple(items ...func()) {
	p.WriteByte('(') // MARK
	for _, f := range items {
		f()
	}
	p.WriteByte('t') // TUPLE
}
func (p *pickleWriter) ints(xs []int) {
	fs := make([]func(), len(xs))
	for i, x := range xs {
		fs[i] = func() { p.int(x) }
	}
	p.tuple(fs...)
}
func (p *pickleWriter) orderedDict() {
	p.global("collections", "OrderedDict")
	p.WriteByte(')') // EMPTY_TUPLE
	p.WriteByte('R') // REDUCE
}

var storageClassNames = map[string]string{"F32": "FloatStorage", "F16": "HalfStorage", "BF16": "BFloat16Storage", "I64": "LongStorage"}

// ContiguousStride is the stride of a row-major tensor of size.
func ContiguousStride(size []int) []int {
	s := make([]int, len(size))
	acc := 1
	for i := len(size) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= size[i]
	}
	return s
}

// Pickle is the file's data.pkl.
func (f *File) Pickle() []byte {
	var p pickleWriter
	p.Write([]byte{0x80, 2}) // PROTO 2
	if f.Top != nil {
		f.tensor(&p, *f.Top)
		p.WriteByte('.')
		return p.Bytes()
	}
	p.WriteByte('}') // EMPTY_DICT
	p.WriteByte('(')
	for _, m := range f.Modules {
		p.str(m.Name)
		p.orderedDict()
		p.WriteByte('(')
		for _, t := range m.Tensors {
			p.str(t.Name)
			f.tensor(&p, t)
		}
		p.WriteByte('u') // SETITEMS
	}
	p.WriteByte('u')
	p.WriteByte('.') // STOP
	return p.Bytes()
}

// tensor emits one _rebuild_tensor_v2 call (wrapped in _rebuild_parameter
// for t.Param).
func (f *File) tensor(p *pickleWriter, t Tensor) {
	st := f.Storages[t.Storage]
	stride := t.Stride
	if stride == nil {
		stride = ContiguousStride(t.Size)
	}
	if t.Param {
		p.global("torch._utils", "_rebuild_parameter")
		p.WriteByte('(')
	}
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.tuple(
		func() {
			p.tuple(
				func() { p.str("storage") },
				func() { p.global("torch", storageClassNames[st.DType]) },
				func() { p.str(t.Storage) },
				func() { p.str("cpu") },
				func() { p.int(len(st.Data)) },
			)
			p.WriteByte('Q') // BINPERSID
		},
		func() { p.int(t.Offset) },
		func() { p.ints(t.Size) },
		func() { p.ints(stride) },
		func() { p.WriteByte(0x89) }, // NEWFALSE
		func() { p.orderedDict() },
	)
	p.WriteByte('R')
	if t.Param {
		p.WriteByte(0x89)
		p.orderedDict()
		p.WriteByte('t')
		p.WriteByte('R')
	}
}

// EncodeStorage is st's values as little-endian st.DType, as a storage
// record (or a safetensors file) holds them.
func EncodeStorage(st Storage) []byte {
	var b bytes.Buffer
	for _, x := range st.Data {
		switch st.DType {
		case "F32":
			binary.Write(&b, binary.LittleEndian, math.Float32bits(x))
		case "F16":
			binary.Write(&b, binary.LittleEndian, float16.Fromfloat32(x).Bits())
		case "BF16":
			binary.Write(&b, binary.LittleEndian, uint16(math.Float32bits(x)>>16))
		case "I64":
			binary.Write(&b, binary.LittleEndian, int64(x))
		}
	}
	return b.Bytes()
}

// Bytes writes the zip. torch.save stores every record uncompressed.
func (f *File) Bytes(tb testing.TB) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, data []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Archive + "/" + name, Method: zip.Store})
		if err != nil {
			tb.Fatal(err)
		}
		w.Write(data)
	}
	add("data.pkl", f.Pickle())
	add("byteorder", []byte("little"))
	keys := make([]string, 0, len(f.Storages))
	for k := range f.Storages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add("data/"+k, EncodeStorage(f.Storages[k]))
	}
	add("version", []byte("3\n"))
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Seq returns n values start, start+step, … (multiples of 1/4 stay exact in
// f16 and bf16, so every dtype can be compared exactly).
func Seq(n int, start, step float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = start + float32(i)*step
	}
	return out
}

// Fixture is a checkpoint with every case the reader handles: a
// DataParallel "module." prefix, a storage shared by two tensors (one a
// transposed view, one at an offset), f16 and bf16 storages, an int64
// buffer, an nn.Parameter, and weight norm in both of torch's layouts.
//
// Its modules are Kokoro's (bert, bert_encoder, predictor, text_encoder,
// decoder), so that a Kokoro weights loader accepts it whole.
func Fixture() *File {
	return &File{
		Archive: "kokoro-v1_0",
		Storages: map[string]Storage{
			"0": {DType: "F32", Data: Seq(15, -3, 0.5)},
			"1": {DType: "I64", Data: Seq(5, 0, 1)},
			"2": {DType: "F16", Data: Seq(6, -1, 0.25)},
			"3": {DType: "BF16", Data: Seq(8, 2, -0.75)},
			"4": {DType: "F32", Data: []float32{2, -0.5}},
			"5": {DType: "F32", Data: Seq(12, -1.5, 0.25)},
			"6": {DType: "F32", Data: []float32{1, 3, 0.5}},
			"7": {DType: "F32", Data: Seq(12, 0.25, 0.5)},
		},
		Modules: []Module{
			{Name: "bert", Tensors: []Tensor{
				{Name: "module.embeddings.word_embeddings.weight", Storage: "0", Size: []int{4, 3}},
				{Name: "module.embeddings.position_ids", Storage: "1", Size: []int{1, 5}},
			}},
			{Name: "bert_encoder", Tensors: []Tensor{
				// The transpose of the first 12 values: element (i, j) is
				// storage[i + 3j].
				{Name: "weight", Storage: "0", Size: []int{3, 4}, Stride: []int{1, 3}},
				{Name: "bias", Storage: "0", Offset: 12, Size: []int{3}},
			}},
			{Name: "predictor", Tensors: []Tensor{
				{Name: "lstm.weight_ih_l0", Storage: "2", Size: []int{2, 3}, Param: true},
			}},
			{Name: "text_encoder", Tensors: []Tensor{
				{Name: "embedding.weight", Storage: "3", Offset: 2, Size: []int{3, 2}},
			}},
			{Name: "decoder", Tensors: []Tensor{
				{Name: "generator.conv_post.weight_g", Storage: "4", Size: []int{2, 1, 1}},
				{Name: "generator.conv_post.weight_v", Storage: "5", Size: []int{2, 2, 3}},
				{Name: "generator.ups.0.parametrizations.weight.original0", Storage: "6", Size: []int{3, 1, 1}},
				{Name: "generator.ups.0.parametrizations.weight.original1", Storage: "7", Size: []int{3, 2, 2}},
			}},
		},
	}
}

// ZipOf writes files (name → contents) as a zip archive.
func ZipOf(tb testing.TB, files map[string][]byte) []byte {
	var buf bytes.Buffer
	tb.Helper()
	zw := zip.NewWriter(&buf)
	for n, d := range files {
		w, err := zw.Create(n)
		if err != nil {
			tb.Fatal(err)
		}
		w.Write(d)
	}
	zw.Close()
	return buf.Bytes()
}

// Rezip copies a zip, letting edit change or drop (nil) each record.
func Rezip(tb testing.TB, data []byte, edit func(name string, b []byte) []byte) []byte {
	tb.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, _ := f.Open()
		var b bytes.Buffer
		b.ReadFrom(rc)
		rc.Close()
		nb := edit(f.Name, b.Bytes())
		if nb == nil {
			continue
		}
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		w.Write(nb)
	}
	zw.Close()
	return buf.Bytes()
}
