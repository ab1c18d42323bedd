package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// embedParams mirrors EmbedParams in shaders/embed.wgsl.
type embedParams struct {
	Cols      uint32
	Rows      uint32 // rows in this chunk
	N         uint32 // tokens
	Row0      uint32 // first table row of this chunk
	Vocab     uint32 // rows of the whole table
	OutOffset uint32
	Scale     float32
	RowBytes  uint32
}

// embedEntries names the entry point of each table type Embed supports.
var embedEntries = map[gguf.Type]string{
	gguf.TypeF32:  "embed_f32",
	gguf.TypeF16:  "embed_f16",
	gguf.TypeBF16: "embed_bf16",
	gguf.TypeQ4_0: "embed_q4_0",
	gguf.TypeQ4_1: "embed_q4_1",
	gguf.TypeQ5_0: "embed_q5_0",
	gguf.TypeQ5_1: "embed_q5_1",
	gguf.TypeQ8_0: "embed_q8_0",
	gguf.TypeQ4_K: "embed_q4_k",
	gguf.TypeQ5_K: "embed_q5_k",
	gguf.TypeQ6_K: "embed_q6_k",
}

// Embed appends out[t] = row ids[t] of table, dequantized, for t < n: the
// token embedding lookup. ids holds n u32 token ids; out holds n×table.Cols
// floats. An id past the table is clamped to its last row on the GPU, so a
// bad id gives a wrong row, never an out-of-bounds read; check ids on the
// host with CheckTokenIDs where they are known there.
func Embed(c *gpu.Chain, table *gpu.Tensor, ids *gpu.Buffer, n int, out *gpu.Buffer) error {
	return EmbedScaled(c, table, ids, n, out, 1)
}

// EmbedScaled is Embed with every value multiplied by scale (Gemma scales
// its embeddings by sqrt(d_model)).
func EmbedScaled(c *gpu.Chain, table *gpu.Tensor, ids *gpu.Buffer, n int, out *gpu.Buffer, scale float32) error {
	if table == nil {
		return fmt.Errorf("ops: embed: table is nil")
	}
	entry, ok := embedEntries[table.Type]
	if !ok {
		return fmt.Errorf("ops: embed %q: table type %v has no GPU embedding kernel", table.Name, table.Type)
	}
	if n < 0 {
		return fmt.Errorf("ops: embed %q: n = %d tokens", table.Name, n)
	}
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("ops: embed %q: scale %v is not finite", table.Name, scale)
	}
	if ids == nil {
		return fmt.Errorf("ops: embed %q: ids buffer is nil", table.Name)
	}
	if ids.Size() < uint64(n)*4 {
		return fmt.Errorf("ops: embed %q: ids buffer %q holds %d ids, need %d", table.Name, ids.Label(), ids.Size()/4, n)
	}
	if err := needF32("embed "+table.Name, "out", out, n*table.Cols); err != nil {
		return err
	}
	if uint64(n)*uint64(table.Cols) > math.MaxUint32 || uint64(table.Rows) > math.MaxUint32 {
		return fmt.Errorf("ops: embed %q: %d tokens × %d columns overflow 32-bit indexing", table.Name, n, table.Cols)
	}
	if err := checkChunks("embed", table); err != nil {
		return err
	}
	k, err := c.Device().Kernel(gpu.Spec("embed", entry, "WG", wg))
	if err != nil {
		return err
	}
	grid := gpu.Grid(n, 1) // one workgroup per token
	for _, ch := range table.Chunks {
		params := embedParams{
			Cols: uint32(table.Cols), Rows: uint32(ch.Rows), N: uint32(n), Row0: uint32(ch.FirstRow),
			Vocab: uint32(table.Rows), Scale: scale, RowBytes: uint32(table.RowBytes()),
		}
		if err := c.Dispatch(k, params, grid, ch.Buf, ids, out); err != nil {
			return err
		}
	}
	return nil
}

// CheckTokenIDs returns an error naming the first id that is not a row of
// table. The kernel clamps such ids; the host should refuse them first.
func CheckTokenIDs(table *gpu.Tensor, ids []uint32) error {
	for i, id := range ids {
		if uint64(id) >= uint64(table.Rows) {
			return fmt.Errorf("ops: embed %q: token %d has id %d, past the table's %d rows", table.Name, i, id, table.Rows)
		}
	}
	return nil
}
