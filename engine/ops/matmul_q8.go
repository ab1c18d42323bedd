package ops

import (
	"fmt"
	"os"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// Prefill products on 8-bit activations (shaders/matmul_q8.wgsl): the
// prompt's rows quantized by QuantizeQ8 (or its normed and GLU forms) and
// multiplied with Q4_K, Q6_K or Q8_0 weights by dot4I8Packed, ggml's MMQ
// arithmetic. Like MatVecQ8 the result is the quantized-activation product,
// not MatMulWith's f32 one; unlike it there is no SWAR form: without the
// packed dot product prefill stays on the f32 tiled kernel.

// q8TileLaunch is a launch shape of matmul_q8: rt×ct invocations, each
// owning an rr×rc block of a (rt·rr)×(ct·rc) tile of Y.
type q8TileLaunch struct{ rt, ct, rr, rc int }

func (l q8TileLaunch) wg() int   { return l.rt * l.ct }
func (l q8TileLaunch) rows() int { return l.rt * l.rr } // activation rows of a tile (BM)
func (l q8TileLaunch) cols() int { return l.ct * l.rc } // weight rows of a tile (BN)

// q8TileBK is matmul_q8's stage depth in columns.
const q8TileBK = 128

// sharedBytes is the workgroup memory of the shape: the two stages (BK/16
// vec4s and a pad a row), the weight rows' granule factors and the
// activation rows' block factors (see the top of shaders/matmul_q8.wgsl).
func (l q8TileLaunch) sharedBytes() int {
	return 16*(l.rows()+l.cols())*(q8TileBK/16+1) + 8*l.cols()*q8TileBK/16 + 8*l.rows()*q8TileBK/32
}

// q8TileLaunchMain is MatMulQ8's shape: a 64×64 tile of 16×16 invocations
// with 4×4 blocks (8 vec4 reads of workgroup memory for 64 dot4I8Packed),
// 24 KiB of workgroup memory. On an H100 (2026-12-08) it ran the whole
// 8B Q4_K_M prompt at 2 860 tokens/s, every other shape of the
// benchmark's sweep at 2 088-2 369.
// HEARTH_Q8_TILE=rt,ct,rr,rc replaces it, so that a shape of the
// benchmark's sweep can be measured in a whole prompt without a rebuild;
// one that does not parse is MatMulQ8's error (q8TileEnvErr).
var q8TileLaunchMain, q8TileEnvErr = q8TileFromEnv(os.Getenv("HEARTH_Q8_TILE"), q8TileLaunch{rt: 16, ct: 16, rr: 4, rc: 4})

// q8TileFromEnv parses s, HEARTH_Q8_TILE's four positive numbers; "" is
// def.
func q8TileFromEnv(s string, def q8TileLaunch) (q8TileLaunch, error) {
	if s == "" {
		return def, nil
	}
	var l q8TileLaunch
	if n, err := fmt.Sscanf(s, "%d,%d,%d,%d", &l.rt, &l.ct, &l.rr, &l.rc); err != nil || n != 4 || l.rt < 1 || l.ct < 1 || l.rr < 1 || l.rc < 1 {
		return def, fmt.Errorf("HEARTH_Q8_TILE=%q: want four positive numbers rt,ct,rr,rc (16,16,4,4 is the default)", s)
	}
	return l, nil
}

var matmulQ8Entries = map[gguf.Type]string{
	gguf.TypeQ4_K: "matmul_q8_q4_k",
	gguf.TypeQ6_K: "matmul_q8_q6_k",
	gguf.TypeQ8_0: "matmul_q8_q8_0",
}

// HasMatMulQ8 reports whether MatMulQ8 runs weights of type t on d: the
// type has an entry, d's compiler takes dot4I8Packed (with Q8PackedDot
// on), and the launch fits d's workgroup limits.
func HasMatMulQ8(d *gpu.Device, t gguf.Type) bool {
	_, ok := matmulQ8Entries[t]
	return ok && Q8Packed(d) && q8TileLaunchMain.check(d.Limits) == nil
}

func (l q8TileLaunch) check(lim gpu.Limits) error {
	if l.rt < 1 || l.ct < 1 || l.rr < 1 || l.rc < 1 {
		return fmt.Errorf("launch %v: empty", l)
	}
	if l.sharedBytes() > int(lim.MaxComputeWorkgroupStorageSize) || l.wg() > int(lim.MaxComputeInvocationsPerWorkgroup) {
		return fmt.Errorf("launch %+v: needs %d bytes of workgroup memory and %d invocations, the device grants %d and %d",
			l, l.sharedBytes(), l.wg(), lim.MaxComputeWorkgroupStorageSize, lim.MaxComputeInvocationsPerWorkgroup)
	}
	return nil
}

// matmulQ8Params mirrors MatmulQ8Params in shaders/matmul_q8.wgsl.
type matmulQ8Params struct {
	K, N, M, Row0, YOffset, YStride, XRow, Flags uint32
}

// MatMulQ8 appends Y = X·Wᵀ for Q4_K, Q6_K or Q8_0 weights W (k columns: a
// multiple of 256 for the K-quants, 32 for Q8_0) and m rows of X quantized
// by QuantizeQ8 into xq (Q8Bytes(k, m) bytes), row j's outputs placed at
// o.YOffset + j·o.YStride (o.YStride 0: W's rows), plus o.Bias when set:
// up to MaxQ8Rows rows by MatVecQ8, which reads each weight once for all
// of them, more by the tiled kernel (HasMatMulQ8 must hold). o.XStride is
// unused.
func MatMulQ8(c *gpu.Chain, w *gpu.Tensor, xq, y *gpu.Buffer, m int, o MatmulOptions) error {
	if m <= MaxQ8Rows {
		return MatVecQ8(c, w, xq, y, m, o)
	}
	return matmulQ8With(c, w, xq, y, m, o, q8TileLaunchMain)
}

func matmulQ8With(c *gpu.Chain, w *gpu.Tensor, xq, y *gpu.Buffer, m int, o MatmulOptions, l q8TileLaunch) error {
	if q8TileEnvErr != nil {
		return fmt.Errorf("ops: matmul q8: %w", q8TileEnvErr)
	}
	if w == nil {
		return fmt.Errorf("ops: matmul q8: weight tensor is nil")
	}
	kernel := "matmul q8 " + w.Name
	entry, ok := matmulQ8Entries[w.Type]
	if !ok {
		return fmt.Errorf("ops: %s: weight type %v has no integer matmul (Q4_K, Q6_K and Q8_0 only; use MatMulWith)", kernel, w.Type)
	}
	if !Q8Packed(c.Device()) {
		return fmt.Errorf("ops: %s: the device's shader compiler has no dot4I8Packed (or HEARTH_Q8_DOT=swar); use MatMulWith", kernel)
	}
	k, n := w.Cols, w.Rows
	if bs := w.Type.BlockSize(); k%bs != 0 {
		return fmt.Errorf("ops: %s: %d columns, want a multiple of %v's %d-element block", kernel, k, w.Type, bs)
	}
	if m < 1 {
		return fmt.Errorf("ops: %s: m = %d activation rows, want at least 1", kernel, m)
	}
	ys := o.YStride
	if ys == 0 {
		ys = n
	}
	if ys < 0 || o.YOffset < 0 || (m > 1 && ys < n) {
		return fmt.Errorf("ops: %s: y stride %d (< n=%d?) or y offset %d is invalid", kernel, ys, n, o.YOffset)
	}
	if err := l.check(c.Device().Limits); err != nil {
		return fmt.Errorf("ops: %s: %w", kernel, err)
	}
	yEnd := uint64(o.YOffset) + uint64(m-1)*uint64(ys) + uint64(n)
	tiles, err := checkTiles(kernel, "matmul q8", w, "xq", xq, Q8Bytes(k, m)/4, y, yEnd, m, l.rows())
	if err != nil {
		return err
	}
	gk, err := c.Device().Kernel(gpu.Spec("matmul_q8", entry, "RT", l.rt, "CT", l.ct, "RR", l.rr, "RC", l.rc))
	if err != nil {
		return err
	}
	flags, bias, err := q8OutputFlags("matmul q8", w, o, xq, y)
	if err != nil {
		return err
	}
	for _, ch := range w.Chunks {
		params := matmulQ8Params{K: uint32(k), N: uint32(ch.Rows), M: uint32(m), Row0: uint32(ch.FirstRow),
			YOffset: uint32(o.YOffset), YStride: uint32(ys), XRow: uint32(Q8RowWords(k) / 4), Flags: flags}
		grid := gpu.Grid(ch.Rows, l.cols())
		grid[2] = uint32(tiles)
		if err := c.Dispatch(gk, params, grid, ch.Buf, xq, y, bias); err != nil {
			return err
		}
	}
	return nil
}
