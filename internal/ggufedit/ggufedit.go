// Package ggufedit rewrites GGUF files for tests of bad input: keys
// replaced, added or deleted, tensors left out or appended, the rest
// copied as it is.
package ggufedit

import (
	"os"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// Tensor is a tensor Rewrite appends: its name, type, shape (ggml's order)
// and bytes.
type Tensor struct {
	Name  string
	Type  gguf.Type
	Shape []uint64
	Data  []byte
}

// Rewrite copies the GGUF file src to dst with the keys of set replaced
// or added (a zero gguf.Value deletes the key), the tensors named in drop
// left out and those of add appended. A failure fails the test.
func Rewrite(tb testing.TB, src, dst string, set map[string]gguf.Value, drop []string, add []Tensor) {
	tb.Helper()
	in, err := gguf.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	f, err := os.Create(dst)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter(f)
	for _, kv := range in.Metadata() {
		v := kv.Value
		if nv, ok := set[kv.Key]; ok {
			if nv.Any() == nil {
				continue
			}
			v = nv
		}
		if err := w.Set(kv.Key, v); err != nil {
			tb.Fatal(err)
		}
	}
	for k, v := range set {
		if _, ok := in.Value(k); !ok && v.Any() != nil {
			if err := w.Set(k, v); err != nil {
				tb.Fatal(err)
			}
		}
	}
	var kept []gguf.TensorInfo
	for _, ti := range in.Tensors() {
		if !slices.Contains(drop, ti.Name) {
			kept = append(kept, ti)
			if err := w.AddTensor(ti.Name, ti.Type, ti.Shape); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for _, a := range add {
		if err := w.AddTensor(a.Name, a.Type, a.Shape); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.WriteHeader(); err != nil {
		tb.Fatal(err)
	}
	for _, ti := range kept {
		data, err := in.Data(ti)
		if err != nil {
			tb.Fatal(err)
		}
		if err := w.WriteTensorBytes(ti.Name, data); err != nil {
			tb.Fatal(err)
		}
	}
	for _, a := range add {
		if err := w.WriteTensorBytes(a.Name, a.Data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}
