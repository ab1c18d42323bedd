// Package pth reads PyTorch checkpoints written by torch.save (PyTorch ≥
// 1.6: the .pth and .pt files Kokoro and StyleTTS2 are released as) without
// PyTorch and without running any pickled code: ReadStateDicts reads a
// {module: state_dict} file into f32 Tensors; Load, DictItems, AddStateDict
// and View.Materialize read other layouts (a voice pack's one tensor,
// StyleTTS2's nested dicts). It is a weights format, like gguf beside it;
// vocoder/kokoro is its user.
package pth

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
	"github.com/x448/float16"
)

// A PyTorch checkpoint written by torch.save (PyTorch ≥ 1.6) is a zip
// archive:
//
//	<archive>/data.pkl     the object, pickled (protocol 2)
//	<archive>/data/<key>   one raw little-endian storage per key
//	<archive>/version      the format version ("3")
//	<archive>/byteorder    "little" (PyTorch ≥ 2.1; absent means little)
//
// Inside data.pkl each tensor is a call of torch._utils._rebuild_tensor_v2
// (storage, storage_offset, size, stride, requires_grad, backward_hooks)
// whose storage is a persistent id ('storage', torch.FloatStorage, key,
// location, numel) resolved against data/<key>. The pickle machine is
// gopickle's; the torch classes, the persistent ids and the storages are
// resolved here, so that every size read from the file is checked against
// the archive before anything is allocated from it, and a class outside
// that short list (what torch.load(weights_only=True) would also refuse) is
// an error rather than code.

// maxPickleSize bounds data.pkl: Kokoro-82M's is tens of kilobytes (names
// and shapes only); a larger one is not a weights file.
const maxPickleSize = 64 << 20

// A Tensor is one weight, row-major (outermost dimension first, as PyTorch
// shapes it) and converted to f32 whatever it was stored as.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
	DType string // as stored, by its safetensors name: F32, F16, BF16, …
}

// MaxTensorElements bounds one tensor: Kokoro's largest holds about 5M
// values; 2^31 keeps every index an int32 for the GPU side, and a shape
// beyond it is a corrupt file.
const MaxTensorElements = 1 << 31

// storageClass is a torch.<Type>Storage global of the pickle.
type storageClass struct {
	dtype    string // safetensors-style name: F32, F16, BF16, F64, I64, …
	elemSize int
}

var storageClasses = map[string]storageClass{
	"FloatStorage":    {"F32", 4},
	"HalfStorage":     {"F16", 2},
	"BFloat16Storage": {"BF16", 2},
	"DoubleStorage":   {"F64", 8},
	"LongStorage":     {"I64", 8},
	"IntStorage":      {"I32", 4},
	"ShortStorage":    {"I16", 2},
	"CharStorage":     {"I8", 1},
	"ByteStorage":     {"U8", 1},
	"BoolStorage":     {"BOOL", 1},
}

// pthStorage is one data/<key> record, read on first use.
type pthStorage struct {
	class storageClass
	key   string
	numel int64
	rec   *zip.File
	data  []byte
}

func (s *pthStorage) bytes() ([]byte, error) {
	if s.data != nil {
		return s.data, nil
	}
	rc, err := s.rec.Open()
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", s.key, err)
	}
	defer rc.Close()
	// Read as the bytes arrive rather than allocating the size the
	// archive's directory claims: a corrupt directory must not be able to
	// ask for gigabytes.
	need := s.numel * int64(s.class.elemSize)
	b, err := io.ReadAll(io.LimitReader(rc, need))
	if err == nil && int64(len(b)) < need {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("storage %s: reading %d bytes: %w (truncated or corrupt)", s.key, need, err)
	}
	s.data = b
	return b, nil
}

// A View is a tensor of the pickle: a view into a storage, read by
// Materialize.
type View struct {
	storage *pthStorage
	offset  int64
	size    []int64
	stride  []int64
}

// rebuildTensor is torch._utils._rebuild_tensor_v2.
type rebuildTensor struct{}

func (rebuildTensor) Call(args ...interface{}) (interface{}, error) {
	// (storage, storage_offset, size, stride, requires_grad,
	// backward_hooks[, metadata])
	if len(args) < 4 {
		return nil, fmt.Errorf("_rebuild_tensor_v2: %d arguments, want 6", len(args))
	}
	st, ok := args[0].(*pthStorage)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage is %T, not a storage record", args[0])
	}
	off, err := pickleInt(args[1])
	if err != nil {
		return nil, fmt.Errorf("_rebuild_tensor_v2: storage_offset: %w", err)
	}
	size, err := pickleInts(args[2])
	if err != nil {
		return nil, fmt.Errorf("_rebuild_tensor_v2: size: %w", err)
	}
	stride, err := pickleInts(args[3])
	if err != nil {
		return nil, fmt.Errorf("_rebuild_tensor_v2: stride: %w", err)
	}
	if len(size) != len(stride) {
		return nil, fmt.Errorf("_rebuild_tensor_v2: size %v and stride %v differ in rank", size, stride)
	}
	return &View{storage: st, offset: off, size: size, stride: stride}, nil
}

// rebuildParameter is torch._utils._rebuild_parameter(data, requires_grad,
// backward_hooks): an nn.Parameter saved as such is its tensor here.
type rebuildParameter struct{}

func (rebuildParameter) Call(args ...interface{}) (interface{}, error) {
	if len(args) < 1 {
		return nil, fmt.Errorf("_rebuild_parameter: no arguments")
	}
	if _, ok := args[0].(*View); !ok {
		return nil, fmt.Errorf("_rebuild_parameter: data is %T, not a tensor", args[0])
	}
	return args[0], nil
}

func pickleInt(v interface{}) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case *big.Int:
		if x.IsInt64() {
			return x.Int64(), nil
		}
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("%v (%T) is not an integer", v, v)
}

func pickleInts(v interface{}) ([]int64, error) {
	var items []interface{}
	switch t := v.(type) {
	case *types.Tuple:
		for i := 0; i < t.Len(); i++ {
			items = append(items, t.Get(i))
		}
	case *types.List:
		for i := 0; i < t.Len(); i++ {
			items = append(items, t.Get(i))
		}
	default:
		return nil, fmt.Errorf("%T is not a tuple", v)
	}
	out := make([]int64, len(items))
	for i, it := range items {
		n, err := pickleInt(it)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// ReadStateDicts reads every tensor of a torch.save file holding a dict of
// state dicts, {module: {name: tensor}}, into f32, keyed "module.name" with
// a DataParallel "module." prefix of name dropped.
func ReadStateDicts(r io.ReaderAt, size int64) (map[string]*Tensor, error) {
	obj, err := Load(r, size)
	if err != nil {
		return nil, err
	}
	modules, err := DictItems(obj)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint is %T, want a dict of module state dicts", obj)
	}
	out := map[string]*Tensor{}
	for _, m := range modules {
		mod, ok := m.Key.(string)
		if !ok {
			return nil, fmt.Errorf("module key %v is not a string", m.Key)
		}
		if err := AddStateDict(out, mod, m.Value); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AddStateDict reads module mod's state dict, a pickled {name: tensor},
// into out, keyed "mod.name" with a DataParallel "module." prefix of name
// dropped.
func AddStateDict(out map[string]*Tensor, mod string, dict interface{}) error {
	entries, err := DictItems(dict)
	if err != nil {
		return fmt.Errorf("module %q is %T, want a state dict", mod, dict)
	}
	for _, e := range entries {
		name, ok := e.Key.(string)
		if !ok {
			return fmt.Errorf("module %q: key %v is not a string", mod, e.Key)
		}
		pt, ok := e.Value.(*View)
		if !ok {
			return fmt.Errorf("module %q: %q is %T, not a tensor", mod, name, e.Value)
		}
		full := mod + "." + strings.TrimPrefix(name, "module.")
		if _, dup := out[full]; dup {
			return fmt.Errorf("tensor %q appears twice (with and without the module. prefix?)", full)
		}
		t, err := pt.Materialize(full)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", full, err)
		}
		t.Name = full
		out[full] = t
	}
	return nil
}

// IsZip reports whether r starts as a zip archive does, which a
// torch.save file is: what tells it from safetensors, the other
// checkpoint format Hearth reads.
func IsZip(r io.ReaderAt) bool {
	var magic [4]byte
	n, _ := r.ReadAt(magic[:], 0)
	return n == 4 && bytes.Equal(magic[:], []byte("PK\x03\x04"))
}

// Load unpickles a torch.save archive: tensors come back as *View, whose
// storages are read on Materialize, dicts as gopickle's types (DictItems
// lists them).
func Load(r io.ReaderAt, size int64) (interface{}, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("not a PyTorch zip checkpoint (torch.save of PyTorch ≥ 1.6): %w", err)
	}
	var pkl *zip.File
	records := map[string]*zip.File{}
	for _, f := range zr.File {
		records[f.Name] = f
		dir, base, found := strings.Cut(f.Name, "/")
		if !found || strings.Contains(base, "/") {
			continue
		}
		switch base {
		case "data.pkl":
			if pkl != nil {
				return nil, fmt.Errorf("two data.pkl records (%s and %s)", pkl.Name, f.Name)
			}
			pkl = f
		case "constants.pkl":
			return nil, fmt.Errorf("a TorchScript archive (%s/constants.pkl), not a torch.save checkpoint", dir)
		}
	}
	if pkl == nil {
		return nil, fmt.Errorf("a zip file without <archive>/data.pkl: not a torch.save checkpoint")
	}
	prefix := strings.TrimSuffix(pkl.Name, "data.pkl")
	if bo, ok := records[prefix+"byteorder"]; ok {
		b, err := readRecord(bo, 16)
		if err != nil {
			return nil, fmt.Errorf("byteorder: %w", err)
		}
		if strings.TrimSpace(string(b)) != "little" {
			return nil, fmt.Errorf("byteorder %q: only little-endian checkpoints are read", b)
		}
	}
	pb, err := readRecord(pkl, maxPickleSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl.Name, err)
	}

	storages := map[string]*pthStorage{}
	obj, err := unpickle(pb, func(pid interface{}) (interface{}, error) {
		t, ok := pid.(*types.Tuple)
		if !ok || t.Len() < 5 {
			return nil, fmt.Errorf("persistent id %v is not ('storage', type, key, location, numel)", pid)
		}
		if kind, _ := t.Get(0).(string); kind != "storage" {
			return nil, fmt.Errorf("persistent id of kind %v, want 'storage'", t.Get(0))
		}
		class, ok := t.Get(1).(storageClass)
		if !ok {
			return nil, fmt.Errorf("persistent id: storage type %v is not a torch storage class", t.Get(1))
		}
		key, ok := t.Get(2).(string)
		if !ok {
			return nil, fmt.Errorf("persistent id: key %v is not a string", t.Get(2))
		}
		numel, err := pickleInt(t.Get(4))
		if err != nil || numel < 0 || numel > MaxTensorElements {
			return nil, fmt.Errorf("storage %s: element count %v out of range", key, t.Get(4))
		}
		if s, ok := storages[key]; ok {
			if s.class != class || s.numel != numel {
				return nil, fmt.Errorf("storage %s: referenced as %s×%d and as %s×%d", key, s.class.dtype, s.numel, class.dtype, numel)
			}
			return s, nil
		}
		rec, ok := records[prefix+"data/"+key]
		if !ok {
			return nil, fmt.Errorf("storage %s: no record %sdata/%s in the archive (truncated?)", key, prefix, key)
		}
		// torch.save stores records uncompressed, so a stored record's
		// size in the file bounds what it can hold.
		need := uint64(numel) * uint64(class.elemSize)
		if rec.Method == zip.Store && rec.CompressedSize64 < need {
			return nil, fmt.Errorf("storage %s: %d bytes in the archive, want %d for %d %s values (truncated or corrupt)", key, rec.CompressedSize64, need, numel, class.dtype)
		}
		if rec.UncompressedSize64 < need {
			return nil, fmt.Errorf("storage %s: %d bytes in the archive, want %d for %d %s values (truncated or corrupt)", key, rec.UncompressedSize64, need, numel, class.dtype)
		}
		s := &pthStorage{class: class, key: key, numel: numel, rec: rec}
		storages[key] = s
		return s, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl.Name, err)
	}
	return obj, nil
}

func readRecord(f *zip.File, limit int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("%d bytes, over the %d expected at most", f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w (truncated or corrupt)", err)
	}
	return b, nil
}

// unpickle runs gopickle's machine over data.pkl with the torch classes
// resolved here. A malformed pickle can make gopickle panic (an index
// past its stack); that is returned as an error, never raised.
func unpickle(b []byte, persistentLoad func(interface{}) (interface{}, error)) (obj interface{}, err error) {
	if err := checkPickle(b); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			obj, err = nil, fmt.Errorf("malformed pickle: %v", r)
		}
	}()
	u := pickle.NewUnpickler(bytes.NewReader(b))
	u.FindClass = func(module, name string) (interface{}, error) {
		switch module + "." + name {
		case "torch._utils._rebuild_tensor_v2":
			return rebuildTensor{}, nil
		case "torch._utils._rebuild_parameter":
			return rebuildParameter{}, nil
		}
		if module == "torch" {
			if c, ok := storageClasses[name]; ok {
				return c, nil
			}
		}
		return nil, fmt.Errorf("class %s.%s is not part of a weights file", module, name)
	}
	u.PersistentLoad = persistentLoad
	return u.Load()
}

// A DictItem is one entry of a pickled dict.
type DictItem struct{ Key, Value interface{} }

// DictItems lists a pickled dict or OrderedDict in order.
func DictItems(v interface{}) ([]DictItem, error) {
	switch d := v.(type) {
	case *types.Dict:
		out := make([]DictItem, 0, len(*d))
		for _, e := range *d {
			out = append(out, DictItem{e.Key, e.Value})
		}
		return out, nil
	case *types.OrderedDict:
		out := make([]DictItem, 0, d.Len())
		for el := d.List.Front(); el != nil; el = el.Next() {
			e := el.Value.(*types.OrderedDictEntry)
			out = append(out, DictItem{e.Key, e.Value})
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T is not a dict", v)
}

// Materialize gathers the view into a contiguous row-major f32 tensor,
// checking that every element it reads lies inside its storage.
func (pt *View) Materialize(name string) (*Tensor, error) {
	st := pt.storage
	n := int64(1)
	for i, d := range pt.size {
		if d < 0 || pt.stride[i] < 0 {
			return nil, fmt.Errorf("size %v / stride %v: negative", pt.size, pt.stride)
		}
		if d == 0 {
			n = 0
			break
		}
		if n > MaxTensorElements/d {
			return nil, fmt.Errorf("shape %v: over %d elements", pt.size, int64(MaxTensorElements))
		}
		n *= d
	}
	// A view of more elements than its storage repeats some (a stride of
	// 0, from expand()): state dicts hold none, and allowing it would let
	// a few bytes of file claim gigabytes of memory.
	if n > st.numel {
		return nil, fmt.Errorf("view of shape %v has more elements than its storage (%d): an expanded tensor is not a weight", pt.size, st.numel)
	}
	if n > 0 {
		// The highest storage index the view reads, checked term by term
		// so that no sum can overflow.
		last := pt.offset
		if last < 0 || last >= st.numel {
			last = st.numel
		}
		for i, d := range pt.size {
			if last >= st.numel {
				break
			}
			if pt.stride[i] >= st.numel && d > 1 {
				last = st.numel
				break
			}
			last += (d - 1) * pt.stride[i]
		}
		if pt.offset < 0 || last >= st.numel {
			return nil, fmt.Errorf("view (offset %d, size %v, stride %v) reads past its %s storage of %d elements", pt.offset, pt.size, pt.stride, st.class.dtype, st.numel)
		}
	}
	raw, err := st.bytes()
	if err != nil {
		return nil, err
	}
	shape := make([]int, len(pt.size))
	for i, d := range pt.size {
		shape[i] = int(d)
	}
	t := &Tensor{Name: name, Shape: shape, DType: st.class.dtype, Data: make([]float32, n)}
	if n == 0 {
		return t, nil
	}
	conv, err := ElementDecoder(st.class.dtype)
	if err != nil {
		return nil, err
	}
	es := int64(st.class.elemSize)
	// Walk the view in row-major order with an odometer over the dims.
	idx := make([]int64, len(pt.size))
	pos := pt.offset
	for i := int64(0); i < n; i++ {
		t.Data[i] = conv(raw[pos*es:])
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			pos += pt.stride[d]
			if idx[d] < pt.size[d] {
				break
			}
			pos -= idx[d] * pt.stride[d]
			idx[d] = 0
		}
	}
	return t, nil
}

// ElementDecoder returns the little-endian element reader of a dtype. The
// integer types load as f32 too: a state dict may carry buffers such as
// ALBERT's embeddings.position_ids (int64, values < 2^24, exact in f32).
func ElementDecoder(dtype string) (func([]byte) float32, error) {
	switch dtype {
	case "F32":
		return func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }, nil
	case "F16":
		return func(b []byte) float32 { return float16.Frombits(binary.LittleEndian.Uint16(b)).Float32() }, nil
	case "BF16":
		return func(b []byte) float32 { return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16) }, nil
	case "F64":
		return func(b []byte) float32 { return float32(math.Float64frombits(binary.LittleEndian.Uint64(b))) }, nil
	case "I64":
		return func(b []byte) float32 { return float32(int64(binary.LittleEndian.Uint64(b))) }, nil
	case "I32":
		return func(b []byte) float32 { return float32(int32(binary.LittleEndian.Uint32(b))) }, nil
	case "I16":
		return func(b []byte) float32 { return float32(int16(binary.LittleEndian.Uint16(b))) }, nil
	case "I8":
		return func(b []byte) float32 { return float32(int8(b[0])) }, nil
	case "U8", "BOOL":
		return func(b []byte) float32 { return float32(b[0]) }, nil
	}
	return nil, fmt.Errorf("dtype %s cannot be read", dtype)
}

// checkPickle walks the opcodes of a pickle and checks that every
// length-prefixed argument lies inside it. gopickle allocates a length it
// reads before reading the bytes, so one flipped bit in a BINUNICODE
// length would otherwise ask for up to 4 GiB (2^64 for the 8-byte forms);
// after this walk no allocation exceeds the pickle's own size. The opcode
// table is pickletools' (CPython Lib/pickletools.py), protocols 0-5.
func checkPickle(b []byte) error {
	fixed := map[byte]int{
		'(': 0, '.': 0, '0': 0, '1': 0, '2': 0, 'N': 0, 'Q': 0, 'R': 0, 'a': 0,
		'b': 0, 'd': 0, '}': 0, 'e': 0, 'l': 0, ']': 0, 'o': 0, 's': 0, 't': 0,
		')': 0, 'u': 0, 0x81: 0, 0x85: 0, 0x86: 0, 0x87: 0, 0x88: 0, 0x89: 0,
		0x8f: 0, 0x90: 0, 0x91: 0, 0x92: 0, 0x93: 0, 0x94: 0, 0x97: 0, 0x98: 0,
		'K': 1, 'h': 1, 'q': 1, 0x80: 1, 0x82: 1,
		'M': 2, 0x83: 2,
		'J': 4, 'j': 4, 'r': 4, 0x84: 4,
		'G': 8, 0x95: 8, // FRAME's length only: its content is opcodes
	}
	lenBytes := map[byte]int{
		'U': 1, 0x8c: 1, 'C': 1, 0x8a: 1,
		'T': 4, 'X': 4, 'B': 4, 0x8b: 4,
		0x8d: 8, 0x8e: 8, 0x96: 8,
	}
	lines := map[byte]int{'I': 1, 'L': 1, 'F': 1, 'S': 1, 'V': 1, 'P': 1, 'g': 1, 'p': 1, 'c': 2, 'i': 2}
	for pos := 0; pos < len(b); {
		op := b[pos]
		at := pos
		pos++
		if op == '.' {
			return nil
		}
		if n, ok := fixed[op]; ok {
			if op == 0x95 && pos+8 <= len(b) {
				if fl := binary.LittleEndian.Uint64(b[pos:]); fl > uint64(len(b)-pos-8) {
					return fmt.Errorf("malformed pickle: frame at byte %d of %d bytes runs past its end", at, fl)
				}
			}
			pos += n
		} else if lb, ok := lenBytes[op]; ok {
			if pos+lb > len(b) {
				break
			}
			var n uint64
			switch lb {
			case 1:
				n = uint64(b[pos])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(b[pos:]))
			case 8:
				n = binary.LittleEndian.Uint64(b[pos:])
			}
			pos += lb
			if n > uint64(len(b)-pos) {
				return fmt.Errorf("malformed pickle: opcode %#x at byte %d has a length of %d, past the end", op, at, n)
			}
			pos += int(n)
		} else if nl, ok := lines[op]; ok {
			for ; nl > 0; nl-- {
				i := bytes.IndexByte(b[min(pos, len(b)):], '\n')
				if i < 0 {
					return fmt.Errorf("malformed pickle: opcode %q at byte %d has no end of line", op, at)
				}
				pos += i + 1
			}
		} else {
			return fmt.Errorf("malformed pickle: unknown opcode %#x at byte %d", op, at)
		}
	}
	return fmt.Errorf("malformed pickle: no STOP opcode (truncated)")
}
