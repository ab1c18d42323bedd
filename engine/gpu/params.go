package gpu

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"unsafe"
)

// Kernel parameters are structs of 4-byte fields (u32, i32, f32 and arrays
// of them) that mirror a WGSL uniform. encoding/binary writes them by
// reflection, about 1 µs a dispatch, 260 times a decoded token of a 16-layer
// model; on a little-endian host the struct's own memory is already the
// uniform's bytes, so a type checked once is copied as it lies.

// littleEndian reports the host's byte order.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// plainLayout reports whether t's memory is exactly its little-endian
// encoding: 4-byte numbers and arrays or structs of them, with no padding.
func plainLayout(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Uint32, reflect.Int32, reflect.Float32:
		return true
	case reflect.Array:
		return plainLayout(t.Elem())
	case reflect.Struct:
		var sum uintptr
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Offset != sum || !plainLayout(f.Type) {
				return false
			}
			sum += f.Type.Size()
		}
		return sum == t.Size()
	}
	return false
}

// appendParams appends the uniform bytes of params to dst.
func (d *Device) appendParams(dst []byte, params any) ([]byte, error) {
	t := reflect.TypeOf(params)
	plain, known := d.plainParams[t]
	if !known {
		plain = littleEndian && plainLayout(t)
		d.plainParams[t] = plain
	}
	if !plain {
		var w bytes.Buffer
		if err := binary.Write(&w, binary.LittleEndian, params); err != nil {
			return dst, err
		}
		return append(dst, w.Bytes()...), nil
	}
	// An interface holding a struct points at a copy of it: the second word.
	data := (*[2]unsafe.Pointer)(unsafe.Pointer(&params))[1]
	return append(dst, unsafe.Slice((*byte)(data), t.Size())...), nil
}
