package hfimport

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// oaiLimit is gpt-oss's swiglu_limit: the clamp of its experts' gate
// (above) and up (both ways), which Hearth's kernels hard-code, as
// llama.cpp's graph and transformers' eager experts do (with the
// sigmoid's 1.702, which no key names).
const oaiLimit = 7.0

// fileTypeMXFP4MoE is llama.cpp's MOSTLY_MXFP4_MOE, the general.file_type
// its converter writes for a checkpoint whose experts come in MXFP4.
const fileTypeMXFP4MoE gguf.FileType = 38

// parseGPTOSS reads gpt-oss's experts: num_local_experts,
// num_experts_per_tok and intermediate_size (the experts' width: gpt-oss
// has no dense feed-forward, and the converter writes it as both
// feed_forward_length and expert_feed_forward_length). What llama.cpp's
// graph fixes is refused by key where config.json says otherwise:
// swiglu_limit, attention_bias false (the layers' biases are no option
// of the graph), and a quantization other than the released MXFP4
// experts. router_aux_loss_coef is training's and ignored; so is the YaRN
// rope_scaling's truncate, which GGUF cannot say (llama.cpp floors and
// ceils the ramp's ends whatever it is).
func (hp *hparams) parseGPTOSS(c object) error {
	e, err := hp.readExperts(c, "num_local_experts", "num_experts_per_tok", "intermediate_size")
	if err != nil {
		return err
	}
	if c.has("swiglu_limit") {
		limit, err := c.float("swiglu_limit", oaiLimit)
		if err != nil {
			return err
		}
		if limit != oaiLimit {
			return c.errorf("swiglu_limit", "is %g: the experts' clamp is %g in Hearth's kernels, as in llama.cpp's graph", limit, oaiLimit)
		}
	}
	bias, err := c.bool("attention_bias", true)
	if err != nil {
		return err
	}
	if !bias {
		return c.errorf("attention_bias", "is false: gpt-oss's q, k, v and o projections have biases in llama.cpp's graph")
	}
	q, err := c.obj("quantization_config")
	if err != nil {
		return err
	}
	if q.m != nil {
		method, err := q.str("quant_method", "")
		if err != nil {
			return err
		}
		if method != "mxfp4" {
			return q.errorf("quant_method", "is %q: of the quantized gpt-oss checkpoints only the released form (mxfp4 experts) imports", method)
		}
	}
	hp.moe = e
	return nil
}

// oaiSplit is where one of gpt-oss's expert tensors lies in a transformers
// checkpoint. The record names the tensors llama.cpp's converter makes
// (mlp.experts.gate_proj, up_proj, down_proj and their biases, in GGUF's
// [experts, out, in] layout); transformers keeps gate and up interleaved
// in one gate_up_proj [experts, hidden, 2·ff] (gate the even columns, up
// the odd ones) with gate_up_proj_bias [experts, 2·ff] likewise, and
// down_proj [experts, ff, hidden]: in-features first, each expert's
// product x @ W.
type oaiSplit struct {
	src  string // the checkpoint's tensor, after "model.layers.N.mlp.experts."
	half int    // 0: the even columns (gate), 1: the odd ones (up), -1: all
	bias bool
}

var oaiExperts = map[string]oaiSplit{
	"mlp.experts.gate_proj":      {"gate_up_proj", 0, false},
	"mlp.experts.up_proj":        {"gate_up_proj", 1, false},
	"mlp.experts.down_proj":      {"down_proj", -1, false},
	"mlp.experts.gate_proj.bias": {"gate_up_proj_bias", 0, true},
	"mlp.experts.up_proj.bias":   {"gate_up_proj_bias", 1, true},
	"mlp.experts.down_proj.bias": {"down_proj_bias", -1, true},
}

// oaiExpertsPlan plans gg, one of gpt-oss's expert tensors of shape shape
// ([experts, rows, cols], or [experts, rows] for a bias), from s's source
// under prefix ("model.layers.N.mlp.experts."), as llama.cpp's converter
// makes it: each expert's matrix transposed to out-features first, gate
// and up the even and odd columns (and bias entries) of gate_up_proj;
// biases F32. A checkpoint that holds the experts as the release does,
// MXFP4 blocks and scales (gate_up_proj_blocks, _scales), has them
// repacked into ggml's MXFP4 instead. take looks a tensor up whatever its
// dtype.
func oaiExpertsPlan(plan planFunc, take func(string) (*safetensors.Tensor, bool), prefix, gg string, s oaiSplit, shape []int64) (*tensorPlan, error) {
	hf := prefix + s.src
	step, off := int64(1), int64(0)
	if s.half >= 0 {
		step, off = 2, int64(s.half)
	}
	if s.bias {
		experts, rows := shape[0], shape[1]
		p, err := plan(gg, hf, []int64{experts, rows * step}, true, func(p *tensorPlan) { p.typ = gguf.TypeF32 })
		if err != nil || step == 1 {
			return p, err
		}
		p.rows, p.cols = experts, rows
		p.shape = []uint64{uint64(rows), uint64(experts)}
		p.gather = &gather{base: off, rowStep: rows * step, colStep: step}
		return p, nil
	}
	experts, rows, cols := shape[0], shape[1], shape[2]
	blocks, packed := take(hf + "_blocks")
	scales, scaled := take(hf + "_scales")
	switch {
	case packed && scaled:
		return mxfp4Plan(gg, blocks, scales, experts, rows, cols, step, off)
	case packed:
		return nil, fmt.Errorf("hfimport: %s: tensor %q has no %q beside it: MXFP4 weights are both", blocks.File(), blocks.Name, hf+"_scales")
	case scaled:
		return nil, fmt.Errorf("hfimport: %s: tensor %q has no %q beside it: MXFP4 weights are both", scales.File(), scales.Name, hf+"_blocks")
	}
	whole, err := plan(gg, hf, []int64{experts, cols, rows * step}, true, nil)
	if err != nil {
		return nil, err
	}
	p := &tensorPlan{name: gg, typ: whole.typ, shape: []uint64{uint64(cols), uint64(rows), uint64(experts)}}
	for k := range experts {
		p.parts = append(p.parts, &tensorPlan{
			name: fmt.Sprintf("%s[%d]", gg, k), typ: whole.typ, src: whole.src, rows: rows, cols: cols,
			gather: &gather{base: k*cols*rows*step + off, rowStep: step, colStep: rows * step},
		})
	}
	return p, nil
}

// gather is a strided view of a plan's source: output element (r, c) is
// source element base + r·rowStep + c·colStep.
type gather struct{ base, rowStep, colStep int64 }

// gatherReader makes a gather plan's output at its first Read. An
// expert's rows are its source's columns, so its whole matrix is made
// before any of it is written: 33 MB of float32 for gpt-oss-20b's 2880 ×
// 2880, one expert at a time.
type gatherReader struct {
	p     *tensorPlan
	chunk int64
	r     *bytes.Reader
}

func (g *gatherReader) Read(b []byte) (int, error) {
	if g.r == nil {
		out, err := g.p.gathered(g.chunk)
		if err != nil {
			return 0, err
		}
		g.r = bytes.NewReader(out)
	}
	return g.r.Read(b)
}

// gathered is p's output bytes: the elements its gather names, read in
// the order they lie in the source, chunk bytes of it at a time, and
// narrowed to p's type.
func (p *tensorPlan) gathered(chunk int64) ([]byte, error) {
	g := p.gather
	srcType := dtypeToGGUF[p.src.DType]
	es := int64(srcType.TypeSize())
	// The inner loop runs along the smaller stride, so that the source
	// is read forwards: down the output's columns for a transposed
	// matrix, along its rows for the biases.
	outer, inner, oStep, iStep := p.cols, p.rows, g.colStep, g.rowStep
	oOut, iOut := int64(1), p.cols
	if g.rowStep > g.colStep {
		outer, inner, oStep, iStep = p.rows, p.cols, g.rowStep, g.colStep
		oOut, iOut = p.cols, 1
	}
	end := g.base + (outer-1)*oStep + (inner-1)*iStep + 1
	window := max(1, chunk/es)
	vals := make([]float32, p.rows*p.cols)
	var raw []byte
	var win []float32
	var lo, hi int64
	for o := range outer {
		for i := range inner {
			a := g.base + o*oStep + i*iStep
			if a < lo || a >= hi {
				lo, hi = a, min(end, a+window)
				raw, win = grow(raw, int((hi-lo)*es)), grow(win, int(hi-lo))
				if _, err := p.src.ReadAt(raw, lo*es); err != nil {
					return nil, fmt.Errorf("hfimport: %s: tensor %q: elements %d-%d: %w", p.src.File(), p.src.Name, lo, hi-1, err)
				}
				if err := gguf.Dequantize(srcType, raw, win); err != nil {
					return nil, fmt.Errorf("hfimport: tensor %q: %w", p.src.Name, err)
				}
			}
			vals[o*oOut+i*iOut] = win[a-lo]
		}
	}
	out := make([]byte, len(vals)*p.typ.TypeSize())
	if err := gguf.Quantize(p.typ, vals, out); err != nil {
		return nil, fmt.Errorf("hfimport: tensor %q: %w", p.name, err)
	}
	return out, nil
}

// mxfp4Source is transformers' MXFP4 form of a stack of experts (the
// released gpt-oss checkpoints'): blocks [experts, srcRows, cols/32, 16],
// two 4-bit E2M1 codes a byte (element 2j in byte j's low nibble, 2j+1 in
// its high one), and scales [experts, srcRows, cols/32], E8M0 exponents
// biased by 127; out-features first, so a row is a GGUF row. Output row g
// (of perExpert an expert) is source row srcRow(g): every step-th row
// from off, gate and up interleaved as in the dense form.
type mxfp4Source struct {
	blocks, scales                     *safetensors.Tensor
	nb                                 int64 // blocks a row
	perExpert, srcPerExpert, step, off int64
}

func (m *mxfp4Source) srcRow(g int64) int64 {
	return g/m.perExpert*m.srcPerExpert + g%m.perExpert*m.step + m.off
}

// rowBytes is an output row's size in ggml's MXFP4: 17 bytes a block.
func (m *mxfp4Source) rowBytes() int64 { return m.nb * 17 }

// mxfp4Plan plans gg, experts matrices of rows × cols in ggml's MXFP4,
// from the MXFP4 blocks and scales transformers holds them in, checking
// their dtypes and shapes.
func mxfp4Plan(gg string, blocks, scales *safetensors.Tensor, experts, rows, cols, step, off int64) (*tensorPlan, error) {
	if cols%32 != 0 {
		return nil, fmt.Errorf("hfimport: %s: tensor %q: MXFP4 rows of %d values, no whole number of 32-blocks", blocks.File(), blocks.Name, cols)
	}
	nb := cols / 32
	for _, c := range []struct {
		t    *safetensors.Tensor
		want []int64
	}{{blocks, []int64{experts, rows * step, nb, 16}}, {scales, []int64{experts, rows * step, nb}}} {
		if c.t.DType != "U8" {
			return nil, fmt.Errorf("hfimport: %s: tensor %q: dtype %s, want U8 (MXFP4 codes and scales)", c.t.File(), c.t.Name, c.t.DType)
		}
		if !slices.Equal(c.t.Shape, c.want) {
			return nil, fmt.Errorf("hfimport: %s: tensor %q has shape %v, config.json makes it %v", c.t.File(), c.t.Name, c.t.Shape, c.want)
		}
	}
	return &tensorPlan{
		name: gg, typ: gguf.TypeMXFP4, shape: []uint64{uint64(cols), uint64(rows), uint64(experts)},
		rows: experts * rows, cols: cols,
		mx: &mxfp4Source{blocks: blocks, scales: scales, nb: nb, perExpert: rows, srcPerExpert: rows * step, step: step, off: off},
	}, nil
}

// mxfp4Reader repacks an MXFP4 plan a chunk of output rows at a time.
type mxfp4Reader struct {
	p                      *tensorPlan
	chunkRows, row         int64
	blk, scl, out, pending []byte
}

func (r *mxfp4Reader) Read(b []byte) (int, error) {
	if len(r.pending) == 0 {
		if r.row >= r.p.rows {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(b, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// fill reads the source rows of the next chunk of output rows, which lie
// in one span (every other row of it for gate or up), and repacks them.
func (r *mxfp4Reader) fill() error {
	mx := r.p.mx
	k := min(r.chunkRows, r.p.rows-r.row)
	first := mx.srcRow(r.row)
	n := mx.srcRow(r.row+k-1) - first + 1
	r.blk, r.scl, r.out = grow(r.blk, int(n*mx.nb*16)), grow(r.scl, int(n*mx.nb)), grow(r.out, int(k*mx.rowBytes()))
	for _, s := range []struct {
		t   *safetensors.Tensor
		dst []byte
		per int64
	}{{mx.blocks, r.blk, 16}, {mx.scales, r.scl, 1}} {
		if _, err := s.t.ReadAt(s.dst, first*mx.nb*s.per); err != nil {
			return fmt.Errorf("hfimport: %s: tensor %q: rows %d-%d: %w", s.t.File(), s.t.Name, first, first+n-1, err)
		}
	}
	for i := range k {
		src := mx.srcRow(r.row+i) - first
		for b := range mx.nb {
			j, o := src*mx.nb+b, (i*mx.nb+b)*17
			repackMXFP4(r.out[o:o+17], r.scl[j], r.blk[16*j:16*j+16])
		}
	}
	r.row += k
	r.pending = r.out
	return nil
}

// repackMXFP4 writes one block of transformers' MXFP4 (element 2j in byte
// j's low nibble, 2j+1 in its high one) as ggml's block_mxfp4: the scale
// byte as it is (both are E8M0: ggml's doubled E2M1 levels under half the
// scale are the same values), then byte j holding element j low and j+16
// high, as Q4_0's do; llama.cpp's converter's transform_nibble_layout.
func repackMXFP4(dst []byte, scale byte, src []byte) {
	code := func(e int) byte { return src[e/2] >> (4 * (e % 2)) & 0xf }
	dst[0] = scale
	for j := range 16 {
		dst[1+j] = code(j) | code(j+16)<<4
	}
}
