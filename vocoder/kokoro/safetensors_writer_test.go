package kokoro

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"sort"
	"testing"

	"github.com/hearthstudio/hearth/pth/pthtest"
)

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
		enc := pthtest.EncodeStorage(pthtest.Storage{DType: dtype, Data: t.Data})
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
