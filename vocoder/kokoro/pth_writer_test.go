package kokoro

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"sort"
	"testing"

	"github.com/x448/float16"
)

// This file writes the torch.save format itself, so that the .pth reader is
// tested without PyTorch (not on this machine): a zip of
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

type ptStorage struct {
	dtype string // F32, F16, BF16, I64
	data  []float32
}

type ptTensor struct {
	name    string
	storage string // key into the file's storages
	offset  int
	size    []int
	stride  []int // nil: contiguous
	param   bool  // pickled as an nn.Parameter (_rebuild_parameter)
}

type ptModule struct {
	name    string
	tensors []ptTensor
}

type ptFile struct {
	archive  string
	storages map[string]ptStorage
	modules  []ptModule
	top      *ptTensor // set: the file is torch.save of this one tensor (a voice .pt)
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

func contiguousStride(size []int) []int {
	s := make([]int, len(size))
	acc := 1
	for i := len(size) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= size[i]
	}
	return s
}

func (f *ptFile) pickle() []byte {
	var p pickleWriter
	p.Write([]byte{0x80, 2}) // PROTO 2
	if f.top != nil {
		f.tensor(&p, *f.top)
		p.WriteByte('.')
		return p.Bytes()
	}
	p.WriteByte('}') // EMPTY_DICT
	p.WriteByte('(')
	for _, m := range f.modules {
		p.str(m.name)
		p.orderedDict()
		p.WriteByte('(')
		for _, t := range m.tensors {
			p.str(t.name)
			f.tensor(&p, t)
		}
		p.WriteByte('u') // SETITEMS
	}
	p.WriteByte('u')
	p.WriteByte('.') // STOP
	return p.Bytes()
}

// tensor emits one _rebuild_tensor_v2 call (wrapped in _rebuild_parameter
// for t.param).
func (f *ptFile) tensor(p *pickleWriter, t ptTensor) {
	st := f.storages[t.storage]
	stride := t.stride
	if stride == nil {
		stride = contiguousStride(t.size)
	}
	if t.param {
		p.global("torch._utils", "_rebuild_parameter")
		p.WriteByte('(')
	}
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.tuple(
		func() {
			p.tuple(
				func() { p.str("storage") },
				func() { p.global("torch", storageClassNames[st.dtype]) },
				func() { p.str(t.storage) },
				func() { p.str("cpu") },
				func() { p.int(len(st.data)) },
			)
			p.WriteByte('Q') // BINPERSID
		},
		func() { p.int(t.offset) },
		func() { p.ints(t.size) },
		func() { p.ints(stride) },
		func() { p.WriteByte(0x89) }, // NEWFALSE
		func() { p.orderedDict() },
	)
	p.WriteByte('R')
	if t.param {
		p.WriteByte(0x89)
		p.orderedDict()
		p.WriteByte('t')
		p.WriteByte('R')
	}
}

func encodeStorage(st ptStorage) []byte {
	var b bytes.Buffer
	for _, x := range st.data {
		switch st.dtype {
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

// bytes writes the zip. torch.save stores every record uncompressed.
func (f *ptFile) bytes(tb testing.TB) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, data []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.archive + "/" + name, Method: zip.Store})
		if err != nil {
			tb.Fatal(err)
		}
		w.Write(data)
	}
	add("data.pkl", f.pickle())
	add("byteorder", []byte("little"))
	keys := make([]string, 0, len(f.storages))
	for k := range f.storages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add("data/"+k, encodeStorage(f.storages[k]))
	}
	add("version", []byte("3\n"))
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// safetensorsBytes writes tensors (name → shape, f32 data) in the
// safetensors layout: an 8-byte header length, the JSON header, the data.
func safetensorsBytes(tb testing.TB, tensors map[string]*Tensor, dtype string) []byte {
	tb.Helper()
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{}
	var data bytes.Buffer
	for _, n := range names {
		t := tensors[n]
		enc := encodeStorage(ptStorage{dtype: dtype, data: t.Data})
		hdr[n] = map[string]any{"dtype": dtype, "shape": t.Shape, "data_offsets": []int{data.Len(), data.Len() + len(enc)}}
		data.Write(enc)
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(h)))
	out.Write(h)
	out.Write(data.Bytes())
	return out.Bytes()
}
