package ops

import "github.com/hearthstudio/hearth/gguf"

// K-quant matmul kernels (shaders/matmul_kquant.wgsl). The WGSL cuts each
// 256-element super-block into 8 parts of 32 weights.
//
// Prefill (matmul_ entries): in each step every lane of a row decodes one
// part, so a step covers LANES·32 elements (LANES = WG/ROWS), whose
// activations the workgroup stages in shared memory (TM·LANES·34 floats with
// padding). The shape must keep LANES a power of two (the lanes of a row
// reduce as a binary tree), LANES ≥ TM (lane t stores activation row t of
// the tile), ROWS ≤ 34 (the staging buffer also holds the WG·TM partial
// sums) and the staging buffer within WebGPU's guaranteed 16 KiB of
// workgroup memory. Measured on an H200 through Vulkan (4096×4096 and
// 14336×4096, alternatives 16 rows × TM 8, 32 × 4 and 64 × 4): 8 lanes per
// row cover one super-block per step; each decoded part is reused for TM=8
// activation rows and each staged activation (8×256, 8.5 KiB) for 32 weight
// rows.
//
// Decode (matvec_ entries) follows shaders/matvec_common.wgsl with the
// legacy types' shape, vecLaunch (matmul.go says why).
var kquantMatLaunch = matmulLaunch{wg: 256, rows: 32, tm: 8}

// kquantKernel returns where the Q2_K…Q6_K kernels live and how to launch
// them; ok is false for any other type.
func kquantKernel(t gguf.Type) (matmulKernel, bool) {
	var name string
	switch t {
	case gguf.TypeQ2_K:
		name = "q2_k"
	case gguf.TypeQ3_K:
		name = "q3_k"
	case gguf.TypeQ4_K:
		name = "q4_k"
	case gguf.TypeQ5_K:
		name = "q5_k"
	case gguf.TypeQ6_K:
		name = "q6_k"
	default:
		return matmulKernel{}, false
	}
	return matmulKernel{family: "matmul_kquant", name: name, vec: vecLaunch, mat: kquantMatLaunch}, true
}
