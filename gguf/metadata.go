package gguf

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ValueType is the type id of a GGUF metadata value (gguf_type in gguf.h).
type ValueType uint32

// The GGUF metadata value types, in the order of their ids.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
	"BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
}

// String is the GGUF name of the type ("UINT32", "ARRAY"), or "type(N)" for
// an id GGUF does not define.
func (t ValueType) String() string {
	if t.Known() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether t is a value type GGUF defines.
func (t ValueType) Known() bool { return t <= ValueFloat64 }

// size is the encoded size of one scalar of type t; 0 for strings and arrays,
// whose size depends on their contents.
func (t ValueType) size() int64 {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one value of type t can occupy in a file: a
// string is at least its 8-byte length, an array its 4-byte element type and
// 8-byte count. Counts read from a file are bounded by remaining/minSize, so a
// corrupt count can never make the reader allocate more than the file holds.
func (t ValueType) minSize() int64 {
	switch t {
	case ValueString:
		return 8
	case ValueArray:
		return 12
	}
	return t.size()
}

// maxArrayDepth bounds arrays of arrays. ggml cannot read nested arrays at all;
// the limit only keeps a hostile file from recursing the reader a million
// levels deep.
const maxArrayDepth = 16

// Scalar is the set of Go types that map to a GGUF scalar value type.
type Scalar interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | uint64 | int64 |
		float32 | float64 | bool | string
}

// Element is the set of Go types an array can hold: scalars, or Values that
// are themselves arrays (GGUF nests arrays of arrays).
type Element interface {
	Scalar | Value
}

// Value is one metadata value: a scalar or an array. The zero Value is not a
// valid value; build one with ValueOf or ArrayOf.
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	// x holds the Go value: uint8 … string for scalars, []uint8 … []string,
	// []bool or []Value (an array of arrays) for arrays.
	x any
}

// KV is one metadata key and its value.
type KV struct {
	Key   string
	Value Value
}

// PutKV sets key to v in kvs: in place where kvs has the key, else
// appended. A converter that overrides a common key for one architecture
// (a per-layer array for a scalar) writes each key once so.
func PutKV(kvs []KV, key string, v Value) []KV {
	for i := range kvs {
		if kvs[i].Key == key {
			kvs[i].Value = v
			return kvs
		}
	}
	return append(kvs, KV{Key: key, Value: v})
}

// ValueOf returns the scalar value x, typed by its Go type (uint32 → UINT32).
func ValueOf[T Scalar](x T) Value {
	t, _ := scalarType(any(x))
	return Value{typ: t, x: x}
}

// ArrayOf returns an array of xs (copied), its element type taken from the Go
// type, so an empty []int32 is still an INT32 array. An array of Values is an
// array of arrays; each of those Values must be an array.
func ArrayOf[T Element](xs []T) Value {
	xs = slices.Clone(xs)
	if xs == nil {
		xs = []T{}
	}
	var zero T
	elem := ValueArray
	if _, nested := any(zero).(Value); !nested {
		elem, _ = scalarType(any(zero))
	}
	return Value{typ: ValueArray, elem: elem, x: xs}
}

// scalarType is the value type of a Go scalar; ok is false for any other Go
// value.
func scalarType(x any) (t ValueType, ok bool) {
	switch x.(type) {
	case uint8:
		return ValueUint8, true
	case int8:
		return ValueInt8, true
	case uint16:
		return ValueUint16, true
	case int16:
		return ValueInt16, true
	case uint32:
		return ValueUint32, true
	case int32:
		return ValueInt32, true
	case uint64:
		return ValueUint64, true
	case int64:
		return ValueInt64, true
	case float32:
		return ValueFloat32, true
	case float64:
		return ValueFloat64, true
	case bool:
		return ValueBool, true
	case string:
		return ValueString, true
	}
	return 0, false
}

// Type is the value's type; ValueArray for an array.
func (v Value) Type() ValueType { return v.typ }

// ElemType is the element type of an array value.
func (v Value) ElemType() ValueType { return v.elem }

// typeName is "UINT32", or "ARRAY of STRING" for an array, for error messages.
func (v Value) typeName() string {
	if v.typ == ValueArray {
		return "ARRAY of " + v.elem.String()
	}
	return v.typ.String()
}

// Any is the value as a Go value: uint8 … string for a scalar; []uint8 …
// []string, []bool or []Value for an array. A value read from a File shares
// its slices with the File: do not modify them.
func (v Value) Any() any { return v.x }

// Len is the number of elements of an array, 0 for a scalar.
func (v Value) Len() int {
	switch xs := v.x.(type) {
	case []uint8:
		return len(xs)
	case []int8:
		return len(xs)
	case []uint16:
		return len(xs)
	case []int16:
		return len(xs)
	case []uint32:
		return len(xs)
	case []int32:
		return len(xs)
	case []uint64:
		return len(xs)
	case []int64:
		return len(xs)
	case []float32:
		return len(xs)
	case []float64:
		return len(xs)
	case []bool:
		return len(xs)
	case []string:
		return len(xs)
	case []Value:
		return len(xs)
	}
	return 0
}

// Index is element i of an array as a Value. It panics if v is not an array or
// i is out of range, like indexing a slice.
func (v Value) Index(i int) Value {
	switch xs := v.x.(type) {
	case []uint8:
		return ValueOf(xs[i])
	case []int8:
		return ValueOf(xs[i])
	case []uint16:
		return ValueOf(xs[i])
	case []int16:
		return ValueOf(xs[i])
	case []uint32:
		return ValueOf(xs[i])
	case []int32:
		return ValueOf(xs[i])
	case []uint64:
		return ValueOf(xs[i])
	case []int64:
		return ValueOf(xs[i])
	case []float32:
		return ValueOf(xs[i])
	case []float64:
		return ValueOf(xs[i])
	case []bool:
		return ValueOf(xs[i])
	case []string:
		return ValueOf(xs[i])
	case []Value:
		return xs[i]
	}
	panic("gguf: Index of a " + v.typeName() + " value, not an array")
}

// check reports whether v is well formed: its Go value matches its type, and
// an array of arrays holds only arrays, nested at most maxArrayDepth deep.
func (v Value) check(depth int) error {
	if v.x == nil {
		return errors.New("zero Value (build values with ValueOf or ArrayOf)")
	}
	if v.typ != ValueArray {
		if t, ok := scalarType(v.x); !ok || t != v.typ {
			return fmt.Errorf("value of Go type %T marked %s", v.x, v.typ)
		}
		return nil
	}
	if depth >= maxArrayDepth {
		return fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
	}
	inner, nested := v.x.([]Value)
	if !nested {
		return nil // ArrayOf typed the elements from the slice itself
	}
	for i, e := range inner {
		if e.typ != ValueArray {
			return fmt.Errorf("element %d of an array of arrays is %s", i, e.typeName())
		}
		if err := e.check(depth + 1); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

// integer is every Go integer type.
type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

// fit converts x to T, reporting whether T holds it exactly: a round trip must
// give x back and keep its sign.
func fit[T, S integer](x S) (T, bool) {
	y := T(x)
	return y, S(y) == x && (x < 0) == (y < 0)
}

func fitScalar[T, S integer](x S, from ValueType) (T, error) {
	y, ok := fit[T](x)
	if !ok {
		return 0, fmt.Errorf("value %d (%s) does not fit in %T", x, from, y)
	}
	return y, nil
}

func fitSlice[T, S integer](xs []S, from ValueType) ([]T, error) {
	out := make([]T, len(xs))
	for i, x := range xs {
		y, ok := fit[T](x)
		if !ok {
			return nil, fmt.Errorf("element %d: value %d (%s) does not fit in %T", i, x, from, y)
		}
		out[i] = y
	}
	return out, nil
}

// asInteger converts any integer scalar to T, failing if it does not fit. GGUF
// writers disagree on the integer type of the same key (u32 vs i32), so the
// value, not the type, decides.
func asInteger[T integer](v Value) (T, error) {
	switch x := v.x.(type) {
	case uint8:
		return fitScalar[T](x, v.typ)
	case int8:
		return fitScalar[T](x, v.typ)
	case uint16:
		return fitScalar[T](x, v.typ)
	case int16:
		return fitScalar[T](x, v.typ)
	case uint32:
		return fitScalar[T](x, v.typ)
	case int32:
		return fitScalar[T](x, v.typ)
	case uint64:
		return fitScalar[T](x, v.typ)
	case int64:
		return fitScalar[T](x, v.typ)
	}
	return 0, fmt.Errorf("is %s, want an integer", v.typeName())
}

// asIntegers converts an array of any integer type to []T.
func asIntegers[T integer](v Value) ([]T, error) {
	switch xs := v.x.(type) {
	case []uint8:
		return fitSlice[T](xs, v.elem)
	case []int8:
		return fitSlice[T](xs, v.elem)
	case []uint16:
		return fitSlice[T](xs, v.elem)
	case []int16:
		return fitSlice[T](xs, v.elem)
	case []uint32:
		return fitSlice[T](xs, v.elem)
	case []int32:
		return fitSlice[T](xs, v.elem)
	case []uint64:
		return fitSlice[T](xs, v.elem)
	case []int64:
		return fitSlice[T](xs, v.elem)
	}
	return nil, fmt.Errorf("is %s, want an array of integers", v.typeName())
}

// ErrKeyNotFound is the error (inside a *KeyError) for a key the file lacks.
var ErrKeyNotFound = errors.New("missing")

// KeyError is an error about one metadata key: missing, or of the wrong type.
type KeyError struct {
	File string // the file's name; empty if the reader had none
	Key  string
	Err  error
}

func (e *KeyError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("gguf: key %q: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("gguf: %s: key %q: %v", e.File, e.Key, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// Keys are the metadata keys in file order.
func (f *File) Keys() []string {
	keys := make([]string, len(f.kvs))
	for i, kv := range f.kvs {
		keys[i] = kv.Key
	}
	return keys
}

// Metadata is every key and value in file order. The values share their
// arrays with f: do not modify them.
func (f *File) Metadata() []KV { return slices.Clone(f.kvs) }

// Value is the value of key, and whether the file has it.
func (f *File) Value(key string) (Value, bool) {
	i, ok := f.keyIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.kvs[i].Value, true
}

func (f *File) lookup(key string) (Value, error) {
	v, ok := f.Value(key)
	if !ok {
		return Value{}, f.keyError(key, ErrKeyNotFound)
	}
	return v, nil
}

func (f *File) keyError(key string, err error) error {
	return &KeyError{File: f.name, Key: key, Err: err}
}

// getInteger and getOr implement the typed accessors: the value converted to
// T, an error naming the key if it is missing (getInteger only) or does not
// convert.
func getInteger[T integer](f *File, key string) (T, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	x, err := asInteger[T](v)
	if err != nil {
		return 0, f.keyError(key, err)
	}
	return x, nil
}

func getOr[T any](f *File, key string, def T, get func(*File, string) (T, error)) (T, error) {
	if _, ok := f.keyIndex[key]; !ok {
		return def, nil
	}
	return get(f, key)
}

// Uint32 is the integer value of key as a uint32. Any integer type is
// accepted if the value fits.
func (f *File) Uint32(key string) (uint32, error) { return getInteger[uint32](f, key) }

// Int32 is the integer value of key as an int32.
func (f *File) Int32(key string) (int32, error) { return getInteger[int32](f, key) }

// Uint64 is the integer value of key as a uint64.
func (f *File) Uint64(key string) (uint64, error) { return getInteger[uint64](f, key) }

// Int64 is the integer value of key as an int64.
func (f *File) Int64(key string) (int64, error) { return getInteger[int64](f, key) }

// Int is the integer value of key as an int.
func (f *File) Int(key string) (int, error) { return getInteger[int](f, key) }

// Uint32Or is Uint32, or def if the file lacks key. A value of the wrong type
// is still an error.
func (f *File) Uint32Or(key string, def uint32) (uint32, error) {
	return getOr(f, key, def, (*File).Uint32)
}

// Int32Or is Int32, or def if the file lacks key.
func (f *File) Int32Or(key string, def int32) (int32, error) {
	return getOr(f, key, def, (*File).Int32)
}

// Uint64Or is Uint64, or def if the file lacks key.
func (f *File) Uint64Or(key string, def uint64) (uint64, error) {
	return getOr(f, key, def, (*File).Uint64)
}

// Int64Or is Int64, or def if the file lacks key.
func (f *File) Int64Or(key string, def int64) (int64, error) {
	return getOr(f, key, def, (*File).Int64)
}

// IntOr is Int, or def if the file lacks key.
func (f *File) IntOr(key string, def int) (int, error) {
	return getOr(f, key, def, (*File).Int)
}

// Float32 is the value of key as a float32: a FLOAT32, or a FLOAT64 rounded to
// float32 if it is within float32's range.
func (f *File) Float32(key string) (float32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.x.(type) {
	case float32:
		return x, nil
	case float64:
		if math.Abs(x) > math.MaxFloat32 && !math.IsInf(x, 0) {
			return 0, f.keyError(key, fmt.Errorf("value %g (FLOAT64) does not fit in float32", x))
		}
		return float32(x), nil
	}
	return 0, f.keyError(key, fmt.Errorf("is %s, want a float", v.typeName()))
}

// Float64 is the value of key as a float64: a FLOAT64 or FLOAT32.
func (f *File) Float64(key string) (float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.x.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, f.keyError(key, fmt.Errorf("is %s, want a float", v.typeName()))
}

// Float32Or is Float32, or def if the file lacks key.
func (f *File) Float32Or(key string, def float32) (float32, error) {
	return getOr(f, key, def, (*File).Float32)
}

// Float64Or is Float64, or def if the file lacks key.
func (f *File) Float64Or(key string, def float64) (float64, error) {
	return getOr(f, key, def, (*File).Float64)
}

// Bool is the BOOL value of key.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.x.(bool)
	if !ok {
		return false, f.keyError(key, fmt.Errorf("is %s, want BOOL", v.typeName()))
	}
	return b, nil
}

// BoolOr is Bool, or def if the file lacks key.
func (f *File) BoolOr(key string, def bool) (bool, error) {
	return getOr(f, key, def, (*File).Bool)
}

// String is the STRING value of key.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.x.(string)
	if !ok {
		return "", f.keyError(key, fmt.Errorf("is %s, want STRING", v.typeName()))
	}
	return s, nil
}

// StringOr is String, or def if the file lacks key.
func (f *File) StringOr(key string, def string) (string, error) {
	return getOr(f, key, def, (*File).String)
}

// Strings is the array of STRING value of key, copied.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	xs, ok := v.x.([]string)
	if !ok {
		return nil, f.keyError(key, fmt.Errorf("is %s, want ARRAY of STRING", v.typeName()))
	}
	return slices.Clone(xs), nil
}

// Float32s is the float array value of key as float32s: an array of FLOAT32,
// or of FLOAT64 within float32's range.
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	switch xs := v.x.(type) {
	case []float32:
		return slices.Clone(xs), nil
	case []float64:
		out := make([]float32, len(xs))
		for i, x := range xs {
			if math.Abs(x) > math.MaxFloat32 && !math.IsInf(x, 0) {
				return nil, f.keyError(key, fmt.Errorf("element %d: value %g (FLOAT64) does not fit in float32", i, x))
			}
			out[i] = float32(x)
		}
		return out, nil
	}
	return nil, f.keyError(key, fmt.Errorf("is %s, want an array of floats", v.typeName()))
}

// Int32s is the integer array value of key as int32s. Arrays of any integer
// type are accepted if every element fits.
func (f *File) Int32s(key string) ([]int32, error) { return getIntegers[int32](f, key) }

// Uint32s is the integer array value of key as uint32s.
func (f *File) Uint32s(key string) ([]uint32, error) { return getIntegers[uint32](f, key) }

// Int64s is the integer array value of key as int64s.
func (f *File) Int64s(key string) ([]int64, error) { return getIntegers[int64](f, key) }

func getIntegers[T integer](f *File, key string) ([]T, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	xs, err := asIntegers[T](v)
	if err != nil {
		return nil, f.keyError(key, err)
	}
	return xs, nil
}

// Architecture is general.architecture ("llama", "gemma3"), or "" if the file
// has none.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// FileType is llama.cpp's llama_ftype, stored as general.file_type: which
// quantization most of the file's tensors use.
type FileType uint32

// fileTypeGuessed is llama.cpp's LLAMA_FTYPE_GUESSED flag, set when the loader
// inferred the type instead of reading it.
const fileTypeGuessed FileType = 1024

// fileTypeNames are llama.cpp's llama_ftype names without the LLAMA_FTYPE_
// prefix. 4, 5, 6 and 33–35 are retired but still appear in old files.
var fileTypeNames = map[FileType]string{
	0: "ALL_F32", 1: "MOSTLY_F16", 2: "MOSTLY_Q4_0", 3: "MOSTLY_Q4_1",
	4: "MOSTLY_Q4_1_SOME_F16", 5: "MOSTLY_Q4_2", 6: "MOSTLY_Q4_3",
	7: "MOSTLY_Q8_0", 8: "MOSTLY_Q5_0", 9: "MOSTLY_Q5_1", 10: "MOSTLY_Q2_K",
	11: "MOSTLY_Q3_K_S", 12: "MOSTLY_Q3_K_M", 13: "MOSTLY_Q3_K_L",
	14: "MOSTLY_Q4_K_S", 15: "MOSTLY_Q4_K_M", 16: "MOSTLY_Q5_K_S",
	17: "MOSTLY_Q5_K_M", 18: "MOSTLY_Q6_K", 19: "MOSTLY_IQ2_XXS",
	20: "MOSTLY_IQ2_XS", 21: "MOSTLY_Q2_K_S", 22: "MOSTLY_IQ3_XS",
	23: "MOSTLY_IQ3_XXS", 24: "MOSTLY_IQ1_S", 25: "MOSTLY_IQ4_NL",
	26: "MOSTLY_IQ3_S", 27: "MOSTLY_IQ3_M", 28: "MOSTLY_IQ2_S",
	29: "MOSTLY_IQ2_M", 30: "MOSTLY_IQ4_XS", 31: "MOSTLY_IQ1_M",
	32: "MOSTLY_BF16", 33: "MOSTLY_Q4_0_4_4", 34: "MOSTLY_Q4_0_4_8",
	35: "MOSTLY_Q4_0_8_8", 36: "MOSTLY_TQ1_0", 37: "MOSTLY_TQ2_0",
	38: "MOSTLY_MXFP4_MOE",
}

// String is llama.cpp's name of the file type ("MOSTLY_Q4_K_M"), or
// "FILE_TYPE(N)" for an id it does not define.
func (t FileType) String() string {
	if t&fileTypeGuessed != 0 {
		return (t &^ fileTypeGuessed).String() + " (guessed)"
	}
	if name, ok := fileTypeNames[t]; ok {
		return name
	}
	return fmt.Sprintf("FILE_TYPE(%d)", uint32(t))
}

// FileType is general.file_type, and whether the file has it as an integer.
func (f *File) FileType() (FileType, bool) {
	t, err := f.Uint32("general.file_type")
	return FileType(t), err == nil
}
