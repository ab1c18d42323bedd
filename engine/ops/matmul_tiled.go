package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// matmulTiledMinRows is the prompt length from which MatMulWith takes the
// tiled kernel (shaders/matmul_tiled.wgsl) instead of the `matmul_<type>`
// entries. Below it a tile of BM activation rows is mostly padding and the
// product is bound by reading W, which both kernels do once per tile. On
// the H200 (BenchmarkMatMulTiled, docs/performance.md) the old entries
// still won at 16 rows on the 8B model's 4096- and 1024-row weights
// (Q4_K 4.6 against 1.7 TFLOP/s at 4096²) and lost at 32 on all but the
// 1024-row ones (Q8_0 3.2 against 2.2).
const matmulTiledMinRows = 32

// tiledLaunch is a launch shape of shaders/matmul_tiled.wgsl: a workgroup of
// ks slices of ct×rt invocations owns a (rt·rr)×(ct·rc) tile of Y, each
// invocation an rr×rc block of it in registers, and walks k bk columns a
// stage, reading the next stage while it multiplies this one when pf is
// set.
type tiledLaunch struct {
	ct, rt, rr, rc, ks, bk int
	pf                     bool
}

func (l tiledLaunch) wg() int   { return l.ct * l.rt * l.ks }
func (l tiledLaunch) rows() int { return l.rt * l.rr } // activation rows of a tile (BM)
func (l tiledLaunch) cols() int { return l.ct * l.rc } // weight rows of a tile (BN)

// sharedBytes is the workgroup memory the shape declares: a stage of W and
// of X, bk/4 vec4s and a pad vec4 per row.
func (l tiledLaunch) sharedBytes() int { return 16 * (l.rows() + l.cols()) * (l.bk/4 + 1) }

func (l tiledLaunch) String() string {
	s := fmt.Sprintf("%dx%d_r%dx%d_ks%d_bk%d", l.rows(), l.cols(), l.rr, l.rc, l.ks, l.bk)
	if l.pf {
		s += "_pf"
	}
	return s
}

// consts are the constants gpu.Spec prepends (see the top of
// shaders/matmul_tiled.wgsl).
func (l tiledLaunch) consts() []any {
	pf := 0
	if l.pf {
		pf = 1
	}
	return []any{"CT", l.ct, "RT", l.rt, "RB", 16*l.rr + l.rc, "KB", 256*l.bk + 16*l.ks + pf}
}

// check says why the kernel cannot be built with l or the device cannot
// run it: the packed constants hold values below 16, a decode unit is 8
// weights, slices split a stage's vec4 columns evenly, the slices' partial
// tiles reuse the stage memory, and the device caps workgroup memory and
// invocations.
func (l tiledLaunch) check(lim gpu.Limits) error {
	switch {
	case l.ct < 1 || l.rt < 1 || l.rr < 1 || l.rr > 15 || l.rc < 1 || l.rc > 15 || (l.rr*l.rc)%4 != 0:
		return fmt.Errorf("launch %v: the register block %d×%d must be at most 15×15 with a multiple of 4 outputs", l, l.rr, l.rc)
	case l.ks < 1 || l.ks > 15 || l.bk < 8 || l.bk%8 != 0 || (l.bk/4)%l.ks != 0:
		return fmt.Errorf("launch %v: bk=%d must be a multiple of 8 whose %d vec4 columns split into %d slices", l, l.bk, l.bk/4, l.ks)
	case l.ks > 1 && 4*l.rows()*l.cols() > l.sharedBytes():
		return fmt.Errorf("launch %v: the slices' partial tiles (%d bytes) do not fit the stage memory (%d bytes)", l, 4*l.rows()*l.cols(), l.sharedBytes())
	case l.sharedBytes() > int(lim.MaxComputeWorkgroupStorageSize) || l.wg() > int(lim.MaxComputeInvocationsPerWorkgroup):
		return fmt.Errorf("launch %v: needs %d bytes of workgroup memory and %d invocations, the device grants %d and %d",
			l, l.sharedBytes(), l.wg(), lim.MaxComputeWorkgroupStorageSize, lim.MaxComputeInvocationsPerWorkgroup)
	}
	return nil
}

// The launch shapes MatMulWith picks from, 256 invocations each (WebGPU's
// guaranteed maximum), each reading the next stage while it multiplies (a
// unit of W and one or two vec4s of X an invocation):
//
//   - tiledLaunchMain: the work split of the backward kernel's main shape:
//     a 32×64 tile over 4 slices of 8×8 invocations, each owning a 4×8
//     block (12 vec4 reads of workgroup memory for 128 FMAs), 32 columns
//     a stage, 13.5 KiB, under WebGPU's guaranteed 16 KiB.
//   - tiledLaunchLarge from 128 rows, where the device grants its 18 KiB
//     (lavapipe's 32 KiB and the H200's 48 KiB do): 64×64, 8×8 blocks, 4
//     slices, so each staged value feeds twice the FMAs. On the H200 at
//     m = 512 it ran 21-23 TFLOP/s on every projection of Llama 3 8B and 1B
//     and every type swept, the main shape 18-21; the 128×128 tile without
//     slices reached 24-27 on the 4096- and 14336-row weights but 6.7 on
//     the 1024-row ones (too few workgroups) and 10 on F16.
//
// At 64 rows the 64-row tile leaves a 4096-row weight 64 workgroups for 132
// SMs (3.3 TFLOP/s against the main shape's 4.5), hence the switch at 128.
var (
	tiledLaunchMain  = tiledLaunch{ct: 8, rt: 8, rr: 4, rc: 8, ks: 4, bk: 32, pf: true}
	tiledLaunchLarge = tiledLaunch{ct: 8, rt: 8, rr: 8, rc: 8, ks: 4, bk: 32, pf: true}
)

// tiledLargeMinRows is the prompt length from which tiledLaunchLarge runs.
const tiledLargeMinRows = 128

// matmulTiledLaunchFor picks the launch shape for m activation rows on a
// device with limits lim; ok is false where the device cannot run it.
func matmulTiledLaunchFor(lim gpu.Limits, m int) (l tiledLaunch, ok bool) {
	if m >= tiledLargeMinRows && tiledLaunchLarge.check(lim) == nil {
		return tiledLaunchLarge, true
	}
	return tiledLaunchMain, tiledLaunchMain.check(lim) == nil
}

// matmulTiledTypes are the weight types the tiled kernel decodes, with their
// entry point suffix: those of shaders/dequant_common.wgsl, which it shares
// with the backward kernel.
var matmulTiledTypes = matmulBackwardTypes

// checkTiles checks a tiled product of w (kernel, and family for its
// chunks' messages): its input in, named what, holds inEnd floats and y
// yEnd, both within 32-bit indexing and apart; and gives the tiles of
// rows activation rows that cover m.
func checkTiles(kernel, family string, w *gpu.Tensor, what string, in *gpu.Buffer, inEnd uint64, y *gpu.Buffer, yEnd uint64, m, rows int) (int, error) {
	if inEnd > math.MaxUint32 || yEnd > math.MaxUint32 {
		return 0, fmt.Errorf("ops: %s: m=%d rows overflow 32-bit indexing", kernel, m)
	}
	if err := needF32(kernel, what, in, int(inEnd)); err != nil {
		return 0, err
	}
	if err := needF32(kernel, "y", y, int(yEnd)); err != nil {
		return 0, err
	}
	if in == y {
		return 0, fmt.Errorf("ops: %s: %s and y are the same buffer %q", kernel, what, y.Label())
	}
	if err := checkChunks(family, w); err != nil {
		return 0, err
	}
	tiles := (m + rows - 1) / rows
	if tiles > 65535 {
		return 0, fmt.Errorf("ops: %s: m=%d needs %d activation tiles, over the 65535-workgroup grid limit", kernel, m, tiles)
	}
	return tiles, nil
}

// matmulTiledWith appends Y = X·Wᵀ through the tiled kernel with launch l,
// under the contract of MatMulWith.
func matmulTiledWith(c *gpu.Chain, w *gpu.Tensor, x, y *gpu.Buffer, m int, o MatmulOptions, l tiledLaunch) error {
	if w == nil {
		return fmt.Errorf("ops: matmul tiled: weight tensor is nil")
	}
	kernel := "matmul tiled " + w.Name
	name, ok := matmulTiledTypes[w.Type]
	if !ok {
		return fmt.Errorf("ops: %s: weight type %v has no tiled kernel", kernel, w.Type)
	}
	k, n := w.Cols, w.Rows
	if m < 1 {
		return fmt.Errorf("ops: %s: m = %d activation rows, want at least 1", kernel, m)
	}
	if o.Bias != nil {
		return fmt.Errorf("ops: %s: a fused bias is for a decoded token's product; add it apart (AddBias)", kernel)
	}
	xs, ys := o.XStride, o.YStride
	if xs == 0 {
		xs = k
	}
	if ys == 0 {
		ys = n
	}
	if xs < k || ys < 0 || o.YOffset < 0 || (m > 1 && ys < n) {
		return fmt.Errorf("ops: %s: x stride %d (< k=%d?), y stride %d (< n=%d?) or y offset %d is invalid", kernel, xs, k, ys, n, o.YOffset)
	}
	xEnd := uint64(m-1)*uint64(xs) + uint64(k)
	yEnd := uint64(o.YOffset) + uint64(m-1)*uint64(ys) + uint64(n)
	if err := l.check(c.Device().Limits); err != nil {
		return fmt.Errorf("ops: %s: %w", kernel, err)
	}
	tiles, err := checkTiles(kernel, "matmul tiled", w, "x", x, xEnd, y, yEnd, m, l.rows())
	if err != nil {
		return err
	}
	spec := gpu.Spec("matmul_tiled", "matmul_tiled_"+name, l.consts()...)
	gk, err := c.Device().Kernel(spec)
	if err != nil {
		return err
	}
	var flags uint32
	if o.Accumulate {
		flags |= matmulAccumulate
	}
	for _, ch := range w.Chunks {
		params := matmulParams{
			K: uint32(k), N: uint32(ch.Rows), M: uint32(m), Row0: uint32(ch.FirstRow),
			XStride: uint32(xs), YStride: uint32(ys), YOffset: uint32(o.YOffset), Flags: flags,
		}
		grid := gpu.Grid(ch.Rows, l.cols())
		grid[2] = uint32(tiles)
		// Binding 4 is the matmul_moe_ entries' groups; x fills it here.
		if err := c.Dispatch(gk, params, grid, ch.Buf, x, y, x); err != nil {
			return err
		}
	}
	return nil
}
