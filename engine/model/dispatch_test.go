package model

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// decodeKernels is g's dispatch list for a token decoded at position 5.
func decodeKernels(t *testing.T, m *Model) []string {
	t.Helper()
	g, err := NewGPU(dev, m, GPUOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	k, err := g.DecodeKernels(5)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDecodeKernels pins the dispatches of a decoded token, the count that
// bounds a small model's decode. A Llama layer: the attention norm, one
// matmul for q, k and v, one kernel for their rotation and the cache rows,
// the attention (one dispatch at this short history), the output projection
// accumulating into x, the feed-forward norm, gate and up in one matmul, the
// fused SwiGLU, and down accumulating into x: 9, where the unfused chain
// took 13 (q, k and v apart, two rotations, a cache copy). Gemma 3 does its
// q/k norms inside the fused kernel, and each post-norm, its residual add
// and the pre-norm after them in one kernel: 9, where the unfused chain
// took 19 (and one leading norm for the first layer).
func TestDecodeKernels(t *testing.T) {
	const (
		norm, mm, rope, attn = "norm.rmsnorm", "matmul_float.matvec_f32", "rope_qkv.rope_qkv", "attention_decode.attention_decode"
		glu, postNorm        = "elementwise.glu_fused", "norm.rmsnorm_add"
	)
	for _, tc := range []struct {
		preset       string
		first, layer []string
	}{
		{"tiny-llama", nil, []string{norm, mm, rope, attn, mm, norm, mm, glu, mm}},
		// The last layer's post-norm has no pre-norm to fuse: the head's
		// norm reads x.
		{"tiny-gemma3", []string{norm}, []string{mm, rope, attn, mm, postNorm, mm, glu, mm, postNorm}},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			m := synthModel(t, tc.preset, "F32")
			want := tc.first
			for range m.Config.Layers {
				want = append(want, tc.layer...)
			}
			// The head: the final norm straight on x (one row), the
			// logits, argmax.
			want = append(want, norm, mm, "sample.argmax_local")
			if got := decodeKernels(t, m); !slices.Equal(got, want) {
				t.Errorf("decode dispatches (%d):\n%s\nwant (%d):\n%s", len(got), strings.Join(got, " "), len(want), strings.Join(want, " "))
			}
		})
	}
}

// TestDecodeKernelsQuantized: with quantized weights each pre-norm goes
// into the matvecs that read it (ops.MatVecNormed), the head's too: 6 a
// Llama layer, 1 for the head; with Q4_K/Q6_K weights into the 8-bit
// quantizer before the integer matvecs (ops.QuantizeQ8Normed).
func TestDecodeKernelsQuantized(t *testing.T) {
	const (
		normed, mm, rope, attn = "matmul_legacy.matvec_normed_q4_0", "matmul_legacy.matvec_q4_0", "rope_qkv.rope_qkv", "attention_decode.attention_decode"
		gluMM                  = "matmul_legacy.matvec_glu_q4_0"
	)
	const (
		quant, quantNormed, quantGLU = "quantize_q8.quantize_q8", "quantize_q8.quantize_q8_normed", "quantize_q8.quantize_q8_glu"
		q6                           = "matvec_q8.matvec_q8_q6_k"
	)
	for _, tc := range []struct {
		preset, quant string
		layer, head   []string
	}{
		// Q4_0 keeps the head in Q6_K, as llama.cpp's mixes do.
		{"tiny-llama", "Q4_0", []string{normed, rope, attn, mm, normed, gluMM}, []string{quantNormed, q6}},
		// The integer matvecs read activations quantized once per input:
		// 10 a layer, but each product about twice as fast.
		{"tiny-llama", "Q6_K", []string{quantNormed, q6, rope, attn, quant, q6, quantNormed, q6, quantGLU, q6}, []string{quantNormed, q6}},
	} {
		t.Run(tc.preset+"-"+tc.quant, func(t *testing.T) {
			m := synthModel(t, tc.preset, tc.quant)
			var want []string
			for range m.Config.Layers {
				want = append(want, tc.layer...)
			}
			want = append(append(want, tc.head...), "sample.argmax_local")
			if got := decodeKernels(t, m); !slices.Equal(got, want) {
				t.Errorf("decode dispatches (%d):\n%s\nwant (%d):\n%s", len(got), strings.Join(got, " "), len(want), strings.Join(want, " "))
			}
		})
	}
}

// TestQKVDispatches checks every architecture's attention inputs at two
// quantizations: between a layer's attention norm and its attention there
// is one matmul per run of neighbouring q, k, v weights of one type (Q4_K_M
// keeps v in Q6_K or Q8_0 in some layers) and then the one fused kernel: no
// bias add, norm, rotation or copy of their own. With quantized weights the
// norm itself goes into those matmuls unless a fused post-norm already
// wrote it.
func TestQKVDispatches(t *testing.T) {
	for _, preset := range tinyPresets() {
		for _, quant := range []string{"F32", "Q4_K_M"} {
			t.Run(preset+"-"+quant, func(t *testing.T) {
				m := synthModel(t, preset, quant)
				k := decodeKernels(t, m)
				layer := 0
				for i, name := range k {
					// The decode kernel where query heads share KV heads,
					// the per-query one where they do not (phi3).
					if name != "attention_decode.attention_decode" && name != "attention.attention" {
						continue
					}
					if layer >= len(m.Layers) {
						t.Fatalf("more attention dispatches than %d layers: %v", len(m.Layers), k)
					}
					l := &m.Layers[layer]
					runs := 1
					// A Gemma 4 layer reading an earlier cache projects q alone.
					if l.K != nil && l.K.Type != l.Q.Type {
						runs++
					}
					if l.K != nil && l.V.Type != l.K.Type {
						runs++
					}
					// Before the attention: the fused kernel, and before
					// it one matmul per type run.
					if i < runs+1 || k[i-1] != "rope_qkv.rope_qkv" {
						t.Fatalf("layer %d: %v before the attention, want rope_qkv", layer, k[:i])
					}
					mms := k[i-1-runs : i-1]
					for _, mm := range mms {
						if !strings.Contains(mm, "matvec") {
							t.Errorf("layer %d (q %v, k %v, v %v): %s where a q/k/v matmul should be, in %v", layer, l.Q.Type, l.K.Type, l.V.Type, mm, k[:i])
						}
					}
					// Before those, the attention norm: its own dispatch
					// (rmsnorm, or rmsnorm_add fused with the residual add
					// before it); for quantized weights, inside each f32
					// matvec (matvec_normed_), or, before the integer ones
					// (family matvec_q8), in the quantizer (quantize_q8_normed, or
					// quantize_q8 of what a fused post-norm wrote).
					before := func(j int) string {
						if j < 0 {
							return ""
						}
						return k[j]
					}
					prev := before(i - 2 - runs)
					// A Gemma 3n layer's LAuReL reads the attention norm
					// before q, k and v do: its two products come between
					// them, and the norm is its own dispatch.
					if l.LaurelL != nil {
						if got := k[i-4-runs : i-1-runs]; got[0] != "norm.rmsnorm" || !strings.Contains(got[1], "matvec") || !strings.Contains(got[2], "matvec") {
							t.Errorf("layer %d: %v before q/k/v, want the attention norm and LAuReL's products", layer, got)
						}
						prev = before(i - 4 - runs)
					}
					// A Gemma 4 layer ends in the per-layer embeddings'
					// rmsnorm_add, which writes no next norm.
					pleTail := layer > 0 && m.Layers[layer-1].PLEGate != nil
					separate := prev == "norm.rmsnorm" || prev == "norm.rmsnorm_add" && !pleTail
					for _, mm := range mms {
						ok := !separate && quant != "F32"
						switch {
						case strings.HasPrefix(mm, "matvec_q8."):
							ok = prev == "quantize_q8.quantize_q8_normed" ||
								prev == "quantize_q8.quantize_q8" && strings.HasPrefix(before(i-3-runs), "norm.rmsnorm")
						case !strings.Contains(mm, "matvec_normed_"):
							ok = separate
						}
						if !ok {
							t.Errorf("layer %d: %s after %q", layer, mm, prev)
						}
					}
					layer++
				}
				if layer != len(m.Layers) {
					t.Errorf("%d attention dispatches for %d layers", layer, len(m.Layers))
				}
			})
		}
	}
}

func TestMergeRows(t *testing.T) {
	rowSize := func(typ gguf.Type) int { return 32 / typ.BlockSize() * typ.TypeSize() }
	w := func(name string, typ gguf.Type, rows int, fill byte) *Weight {
		return &Weight{Name: name, Type: typ, Rows: rows, Cols: 32, Data: bytes.Repeat([]byte{fill}, rows*rowSize(typ))}
	}
	q, k := w("q", gguf.TypeQ8_0, 4, 1), w("k", gguf.TypeQ8_0, 2, 2)
	v8, v6 := w("v", gguf.TypeQ8_0, 2, 3), w("v", gguf.TypeF16, 2, 3)
	for _, tc := range []struct {
		name string
		ws   []*Weight
		rows []int // each merged weight's rows
		at   []int // and its first row
	}{
		{"one type", []*Weight{q, k, v8}, []int{8}, []int{0}},
		{"v apart", []*Weight{q, k, v6}, []int{6, 2}, []int{0, 6}},
		{"q apart", []*Weight{v6, q, k}, []int{2, 6}, []int{0, 2}},
		{"all apart", []*Weight{q, v6, k}, []int{4, 2, 2}, []int{0, 4, 6}},
	} {
		got := mergeRows("blk.0.attn_qkv", tc.ws...)
		var rows, at []int
		var data []byte
		for _, p := range got {
			rows, at = append(rows, p.w.Rows), append(at, p.row)
			data = append(data, p.w.Data...)
			if len(p.w.Data) != p.w.Rows*rowSize(p.w.Type) {
				t.Errorf("%s: %s holds %d bytes for %d rows of %v", tc.name, p.w.Name, len(p.w.Data), p.w.Rows, p.w.Type)
			}
		}
		var all []byte
		for _, x := range tc.ws {
			all = append(all, x.Data...)
		}
		if !slices.Equal(rows, tc.rows) || !slices.Equal(at, tc.at) || !bytes.Equal(data, all) {
			t.Errorf("%s: rows %v at %v, want %v at %v (bytes in order: %v)", tc.name, rows, at, tc.rows, tc.at, bytes.Equal(data, all))
		}
	}

	// Slices of one fused tensor (Phi-3's attn_qkv) merge back into its own
	// bytes, not a copy; a gap between slices forces the copy.
	fused := w("attn_qkv", gguf.TypeQ8_0, 8, 0)
	for i := range fused.Data {
		fused.Data[i] = byte(i)
	}
	sq, sk, sv := fused.slice("q", 0, 4), fused.slice("k", 4, 6), fused.slice("v", 6, 8)
	got := mergeRows("blk.0.attn_qkv", sq, sk, sv)
	if len(got) != 1 || !bytes.Equal(got[0].w.Data, fused.Data) || &got[0].w.Data[0] != &fused.Data[0] {
		t.Errorf("slices of one tensor: %d weights, want the fused tensor's own bytes", len(got))
	}
	got = mergeRows("blk.0.attn_qkv", sq, sv)
	want := append(append([]byte(nil), sq.Data...), sv.Data...)
	if len(got) != 1 || !bytes.Equal(got[0].w.Data, want) || got[0].w.Rows != 6 {
		t.Errorf("slices with a gap: %d weights, want one of q's and v's rows copied", len(got))
	}
	for i, b := range fused.Data {
		if b != byte(i) {
			t.Fatalf("merging wrote into the fused tensor at byte %d", i)
		}
	}
}
