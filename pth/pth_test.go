package pth

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/pth/pthtest"
)

// TestReadStateDictsGathersViews reads pthtest.Fixture and compares every
// tensor with its view gathered from the fixture's own storages, element
// (i0, i1, …) at offset + Σ ik·stride[k]: the transposed view, the offset
// into a shared storage, the f16, bf16 and int64 storages, the
// nn.Parameter, and the DataParallel "module." prefix dropped from names.
// The fixture's values are multiples of 1/4 below 8, exact in every dtype,
// so the comparison is exact.
func TestReadStateDictsGathersViews(t *testing.T) {
	f := pthtest.Fixture()
	data := f.Bytes(t)
	got, err := ReadStateDicts(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range f.Modules {
		for _, v := range m.Tensors {
			name := m.Name + "." + strings.TrimPrefix(v.Name, "module.")
			g := got[name]
			if g == nil {
				t.Errorf("%s: missing (the file has %d tensors)", name, len(got))
				continue
			}
			n++
			st := f.Storages[v.Storage]
			if g.Name != name || !slices.Equal(g.Shape, v.Size) || g.DType != st.DType {
				t.Errorf("%s: read as %s %v %s, want shape %v %s", name, g.Name, g.Shape, g.DType, v.Size, st.DType)
				continue
			}
			stride := v.Stride
			if stride == nil {
				stride = pthtest.ContiguousStride(v.Size)
			}
			for i, x := range g.Data {
				pos, rest := v.Offset, i
				for d := len(v.Size) - 1; d >= 0; d-- {
					pos += rest % v.Size[d] * stride[d]
					rest /= v.Size[d]
				}
				if x != st.Data[pos] {
					t.Errorf("%s[%d] = %g, want storage %s[%d] = %g", name, i, x, v.Storage, pos, st.Data[pos])
				}
			}
		}
	}
	if len(got) != n {
		t.Errorf("%d tensors read, the fixture has %d", len(got), n)
	}
}

// Every truncation of a good checkpoint is an error, never a panic; so is every prefix of its pickle, and a byte flipped anywhere
// may load or fail but must not panic.
func TestReadStateDictsTruncatedAndCorrupt(t *testing.T) {
	good := pthtest.Fixture().Bytes(t)
	for n := 0; n < len(good); n++ {
		if _, err := ReadStateDicts(bytes.NewReader(good[:n]), int64(n)); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
		}
	}
	pkl := pthtest.Fixture().Pickle()
	for n := 0; n < len(pkl); n++ {
		cut := pthtest.Rezip(t, good, func(name string, b []byte) []byte {
			if strings.HasSuffix(name, "data.pkl") {
				return pkl[:n]
			}
			return b
		})
		if _, err := ReadStateDicts(bytes.NewReader(cut), int64(len(cut))); err == nil {
			t.Fatalf("pickle cut to %d of %d bytes: no error", n, len(pkl))
		}
	}
	for i := 0; i < len(pkl); i++ {
		for _, x := range []byte{0x01, 0xff} {
			bad := bytes.Clone(pkl)
			bad[i] ^= x
			cut := pthtest.Rezip(t, good, func(name string, b []byte) []byte {
				if strings.HasSuffix(name, "data.pkl") {
					return bad
				}
				return b
			})
			ReadStateDicts(bytes.NewReader(cut), int64(len(cut))) // must return
		}
	}
}

// FuzzReadPTH feeds arbitrary data.pkl contents and archives to the reader:
// go test ./pth -run '^$' -fuzz FuzzReadPTH -fuzzminimizetime 1s (the
// default minimisation, 60 s per new input on these 3 KB archives, looks
// like a stall).
func FuzzReadPTH(f *testing.F) {
	f.Add(pthtest.Fixture().Bytes(f))
	f.Add(pthtest.Fixture().Pickle())
	f.Fuzz(func(t *testing.T, data []byte) {
		ReadStateDicts(bytes.NewReader(data), int64(len(data)))
		z := pthtest.ZipOf(t, map[string][]byte{"a/data.pkl": data, "a/data/0": make([]byte, 64)})
		ReadStateDicts(bytes.NewReader(z), int64(len(z)))
	})
}
