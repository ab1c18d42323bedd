package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// sampleParams mirrors Params in shaders/sample.wgsl.
type sampleParams struct {
	N, K, Span, Groups uint32
	Final              uint32
	_, _, _            uint32
}

const (
	// sampleWG is the sampling workgroup size.
	sampleWG = 256
	// sampleSpan is the elements one stage-1 workgroup scans: 16 rounds of
	// 256, enough that top-k's sort runs rarely per group, small enough that
	// Gemma's 262144-token vocabulary spreads over 64 workgroups.
	sampleSpan = 4096
	// sampleMaxGroups caps stage 1 so the single merge workgroup reads at
	// most 64*k candidates; longer vectors get longer spans.
	sampleMaxGroups = 64
)

// MaxTopK is the largest k TopK accepts: samplers use 40 (llama.cpp and
// Ollama's default) to 100, and the kernel's 1024-pair candidate buffer must
// keep room for a 256-wide round beyond k.
const MaxTopK = 128

// sampleGroups is how stage 1 splits n elements: groups workgroups of span
// elements (a multiple of the workgroup size) each.
func sampleGroups(n int) (groups, span int) {
	groups = (n + sampleSpan - 1) / sampleSpan
	if groups <= sampleMaxGroups {
		return groups, sampleSpan
	}
	span = (n + sampleMaxGroups - 1) / sampleMaxGroups
	span = (span + sampleWG - 1) / sampleWG * sampleWG
	return (n + span - 1) / span, span
}

// SampleScratchBytes is the scratch buffer TopK needs for n values and k
// candidates, and Argmax for k = 1: one (index, value) pair per candidate per
// stage-1 workgroup. It is 0 when n fits one workgroup's span (4096), where
// any buffer will do.
func SampleScratchBytes(n, k int) uint64 {
	groups, _ := sampleGroups(n)
	if groups <= 1 {
		return 0
	}
	return uint64(groups) * uint64(k) * 8
}

// Argmax appends out[0] = the index (u32) of the largest of x[0, n); ties go
// to the lowest index, as greedy sampling in llama.cpp and Hugging Face takes
// the first maximum. -inf values rank, NaN values are not ranked
// meaningfully. scratch holds SampleScratchBytes(n, 1) bytes; x, scratch and
// out must be three distinct buffers.
func Argmax(c *gpu.Chain, x, scratch, out *gpu.Buffer, n int) error {
	if err := checkSample("argmax", x, scratch, out, n, 1); err != nil {
		return err
	}
	return sampleDispatch(c, "argmax", x, scratch, out, n, 1)
}

// TopK appends the k largest of x[0, n), best first, ties to the lower index:
// out[0, k) holds their indices (u32) and out[k, 2k) their values (f32 bits),
// so the decode loop reads both back with one 8k-byte read. 1 <= k <= min(n,
// MaxTopK). scratch holds SampleScratchBytes(n, k) bytes; x, scratch and out
// must be three distinct buffers.
func TopK(c *gpu.Chain, x, scratch, out *gpu.Buffer, n, k int) error {
	if err := checkSample("topk", x, scratch, out, n, k); err != nil {
		return err
	}
	return sampleDispatch(c, "topk", x, scratch, out, n, k)
}

func checkSample(kernel string, x, scratch, out *gpu.Buffer, n, k int) error {
	if n <= 0 {
		return fmt.Errorf("ops: %s: n = %d must be positive", kernel, n)
	}
	if k < 1 || k > n || k > MaxTopK {
		return fmt.Errorf("ops: %s: k = %d outside 1..min(n = %d, %d)", kernel, k, n, MaxTopK)
	}
	if err := needF32(kernel, "x", x, n); err != nil {
		return err
	}
	outWords := 2 * k
	if kernel == "argmax" {
		outWords = 1
	}
	for _, b := range []struct {
		what  string
		buf   *gpu.Buffer
		bytes uint64
	}{{"scratch", scratch, SampleScratchBytes(n, k)}, {"out", out, uint64(outWords) * 4}} {
		if b.buf == nil {
			return fmt.Errorf("ops: %s: %s buffer is nil", kernel, b.what)
		}
		if b.buf.Size() < b.bytes {
			return fmt.Errorf("ops: %s: %s buffer %q holds %d bytes, need %d", kernel, b.what, b.buf.Label(), b.buf.Size(), b.bytes)
		}
	}
	if x == scratch || x == out || scratch == out {
		return fmt.Errorf("ops: %s: x, scratch and out must be distinct buffers", kernel)
	}
	return nil
}

// sampleDispatch appends stage 1 and, past one workgroup, the merge.
func sampleDispatch(c *gpu.Chain, kernel string, x, scratch, out *gpu.Buffer, n, k int) error {
	groups, span := sampleGroups(n)
	params := sampleParams{N: uint32(n), K: uint32(k), Span: uint32(span), Groups: uint32(groups)}
	if groups == 1 {
		params.Final = 1
	}
	local := gpu.Spec("sample", kernel+"_local", "WG", sampleWG)
	if err := dispatch(c, local, params, [3]uint32{uint32(groups), 1, 1}, x, scratch, out); err != nil {
		return err
	}
	if groups == 1 {
		return nil
	}
	merge := gpu.Spec("sample", kernel+"_merge", "WG", sampleWG)
	return dispatch(c, merge, params, [3]uint32{1, 1, 1}, x, scratch, out)
}
