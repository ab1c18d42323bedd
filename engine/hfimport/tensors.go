package hfimport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// defaultChunk is how much source data a conversion decodes at a time: big
// enough that ReadAt calls are few, small enough that a 2 GB embedding never
// sits in memory.
const defaultChunk = 1 << 20

// tensorPlan is one output tensor: where its data comes from and what
// happens to it on the way.
type tensorPlan struct {
	name  string
	typ   gguf.Type
	shape []uint64 // ggml ne

	src        *safetensors.Tensor
	rows, cols int64
	// rowOff is the first source row the plan reads: rows is then a
	// slice of the source (one expert's gate or up rows of a fused
	// gate_up_proj).
	rowOff    int64
	permHeads int  // >0: llama.cpp's q/k row order for this many heads
	addOne    bool // Gemma's stored gain-1 norms
	data      []float32
	// parts, when set, are the plans whose outputs, one after another,
	// make this tensor (Gemma 3n's altup_projections.N stacked, a layer's
	// experts), and zeroRows rows of zeros follow them (its per-layer
	// table padded to the vocabulary).
	parts    []*tensorPlan
	zeroRows int64
	// gather, when set, picks the rows×cols output elements out of src
	// by strides (gpt-oss's experts: one half of an interleaved
	// gate_up_proj, transposed); mx, when set, is the MXFP4 source the
	// plan repacks (gpt-oss's released experts).
	gather *gather
	mx     *mxfp4Source
}

var dtypeToGGUF = map[safetensors.DType]gguf.Type{safetensors.F32: gguf.TypeF32, safetensors.F16: gguf.TypeF16, safetensors.BF16: gguf.TypeBF16}

// canonicalName maps a tensor name of a multimodal checkpoint to the text
// model's own name, and reports false for the vision and audio parts
// (Gemma 3's tower and projector; Gemma 4's towers and their embedders).
// Checkpoints spell the text part "language_model.model." (as released) or
// "model.language_model." (as transformers 4.52+ save it).
func canonicalName(name string) (string, bool) {
	for _, part := range []string{"vision_tower.", "multi_modal_projector.", "audio_tower.", "embed_vision.", "embed_audio."} {
		if strings.HasPrefix(name, part) || strings.HasPrefix(name, "model."+part) {
			return "", false
		}
	}
	for _, p := range [][2]string{
		{"language_model.model.", "model."},
		{"model.language_model.", "model."},
		{"language_model.lm_head.", "lm_head."},
	} {
		if rest, ok := strings.CutPrefix(name, p[0]); ok {
			return p[1] + rest, true
		}
	}
	return name, true
}

// plan decides every output tensor: its name, type, shape and source, the
// shapes checked against config.json.
func (m *Model) plan(hp *hparams, o Options) error {
	fam := hp.fam
	avail := map[string]*safetensors.Tensor{}
	for name, t := range m.weights.tensors {
		if hp.prefix {
			var ok bool
			if name, ok = canonicalName(name); !ok {
				continue
			}
		}
		if fam.class.Bare && !strings.HasPrefix(name, "model.") && !strings.Contains(name, "/") {
			// A base model's own names (the dense layers', FOLDER/NAME,
			// stay as they are).
			name = "model." + name
		}
		avail[name] = t
	}
	used := map[string]bool{}
	// take is a checkpoint tensor as it is, whatever its dtype, marked
	// used (gpt-oss's MXFP4 blocks and scales).
	take := func(hf string) (*safetensors.Tensor, bool) {
		t, ok := avail[hf]
		used[hf] = used[hf] || ok
		return t, ok
	}

	embed, ok := avail["model.embed_tokens.weight"]
	if !ok {
		return fmt.Errorf("hfimport: %s: tensor \"model.embed_tokens.weight\" (token_embd.weight) is missing", m.Dir)
	}
	var matType gguf.Type
	switch o.Type {
	case TypeAuto:
		t, ok := dtypeToGGUF[embed.DType]
		if !ok {
			return fmt.Errorf("hfimport: %s: tensor %q: dtype %s cannot be imported (F32, F16 and BF16 can)", embed.File(), embed.Name, embed.DType)
		}
		matType = t
	case TypeF32:
		matType = gguf.TypeF32
	case TypeF16:
		matType = gguf.TypeF16
	case TypeBF16:
		matType = gguf.TypeBF16
	}
	m.FileType = map[gguf.Type]gguf.FileType{gguf.TypeF32: 0, gguf.TypeF16: 1, gguf.TypeBF16: 32}[matType]

	// plan plans gguf from the HF tensor hf, whose shape must be want
	// (outermost first); an absent optional tensor gives nil.
	plan := func(gg, hf string, want []int64, required bool, tweak func(*tensorPlan)) (*tensorPlan, error) {
		t, ok := avail[hf]
		if !ok {
			if required {
				return nil, fmt.Errorf("hfimport: %s: tensor %q (%s) is missing", m.Dir, hf, gg)
			}
			return nil, nil
		}
		used[hf] = true
		if !t.DType.Float() {
			return nil, fmt.Errorf("hfimport: %s: tensor %q: dtype %s cannot be imported (F32, F16 and BF16 can)", t.File(), t.Name, t.DType)
		}
		if !slices.Equal(t.Shape, want) {
			return nil, fmt.Errorf("hfimport: %s: tensor %q has shape %v, config.json makes it %v", t.File(), t.Name, t.Shape, want)
		}
		p := &tensorPlan{name: gg, src: t, typ: matType}
		switch len(want) {
		case 1:
			p.rows, p.cols, p.typ = 1, want[0], gguf.TypeF32
			p.shape = []uint64{uint64(want[0])}
		case 2:
			p.rows, p.cols = want[0], want[1]
			p.shape = []uint64{uint64(want[1]), uint64(want[0])}
		case 3:
			// A stack of matrices (transformers 5's fused experts): its
			// rows are every matrix's, one matrix after another.
			p.rows, p.cols = want[0]*want[1], want[2]
			p.shape = []uint64{uint64(want[2]), uint64(want[1]), uint64(want[0])}
		}
		if fam.arch.NormPlusOne && strings.HasSuffix(hf, "norm.weight") {
			p.addOne = true
		}
		if tweak != nil {
			tweak(p)
		}
		return p, nil
	}
	// add plans and keeps it.
	add := func(gg, hf string, want []int64, required bool, tweak func(*tensorPlan)) error {
		p, err := plan(gg, hf, want, required, tweak)
		if p != nil {
			m.plans = append(m.plans, p)
		}
		return err
	}
	permute := func(heads int) func(*tensorPlan) {
		if !fam.arch.PermuteQK {
			return nil
		}
		return func(p *tensorPlan) {
			p.permHeads = heads
			if p.rows == 1 { // a bias: its rows are its elements
				p.rows, p.cols = p.cols, 1
			}
		}
	}

	H, V := int64(hp.hidden), int64(hp.vocab)
	if err := add("token_embd.weight", "model.embed_tokens.weight", []int64{V, H}, true, nil); err != nil {
		return err
	}
	if hp.rope.typ == "llama3" {
		m.plans = append(m.plans, &tensorPlan{
			name: "rope_freqs.weight", typ: gguf.TypeF32,
			shape: []uint64{uint64(hp.ropeDims() / 2)},
			data:  llama3RopeFactors(hp.rope, hp.ropeDims()),
		})
	}
	if hp.rope.typ == "proportional" {
		dims := hp.layered.globalHeadDim
		m.plans = append(m.plans, &tensorPlan{
			name: "rope_freqs.weight", typ: gguf.TypeF32,
			shape: []uint64{uint64(dims / 2)},
			data:  proportionalRopeFactors(hp.rope.partial, dims),
		})
	}
	for _, t := range fam.arch.Globals {
		sz := hp.sizes(0)
		if !t.In(sz) {
			continue
		}
		shape := t.Shape(sz)
		switch {
		case t.Stack != arch.DimNone:
			// One HF matrix a slice of the stack (Gemma 3n's AltUp
			// projections), written back to back.
			p, err := stackPlan(plan, t.GGUF, "model."+t.HF, shape)
			if err != nil {
				return err
			}
			m.plans = append(m.plans, p)
		case t.Rows == arch.DimVocab && hp.layered != nil && hp.layered.perLayerVocab > 0 && int64(hp.layered.perLayerVocab) < shape[0]:
			// Gemma 3n's per-layer table, padded with zero rows to the
			// vocabulary as llama.cpp's converter does.
			part, err := plan(t.GGUF, "model."+t.HF, []int64{int64(hp.layered.perLayerVocab), shape[1]}, true, nil)
			if err != nil {
				return err
			}
			m.plans = append(m.plans, &tensorPlan{name: t.GGUF, typ: part.typ, shape: []uint64{uint64(shape[1]), uint64(shape[0])},
				parts: []*tensorPlan{part}, zeroRows: shape[0] - int64(hp.layered.perLayerVocab), cols: shape[1]})
		default:
			if err := add(t.GGUF, "model."+t.HF, shape, !t.Optional, nil); err != nil {
				return err
			}
		}
	}
	if hp.st != nil {
		for _, d := range hp.st.dense {
			if err := add(d.name+".weight", d.dir+"/linear.weight", []int64{int64(d.out), int64(d.in)}, true, nil); err != nil {
				return err
			}
		}
	}
	if hp.rope.typ == "longrope" {
		for _, f := range []struct {
			name    string
			factors []float64
		}{{"rope_factors_long.weight", hp.rope.longFactor}, {"rope_factors_short.weight", hp.rope.shortFactor}} {
			if len(f.factors) != hp.ropeDims()/2 {
				return fmt.Errorf("hfimport: config.json: rope %s has %d factors, want rope dims / 2 = %d", strings.TrimSuffix(f.name, ".weight"), len(f.factors), hp.ropeDims()/2)
			}
			data := make([]float32, len(f.factors))
			for i, x := range f.factors {
				data[i] = float32(x)
			}
			m.plans = append(m.plans, &tensorPlan{name: f.name, typ: gguf.TypeF32, shape: []uint64{uint64(len(data))}, data: data})
		}
	}
	heads := map[arch.Heads]int{arch.QHeads: hp.heads, arch.KVHeads: hp.kvHeads}
	layer := importOrder(fam.arch.Block)
	for i := range hp.layers {
		sizes := hp.sizes(i)
		for _, t := range layer {
			hf := fmt.Sprintf("model.layers.%d.%s", i, t.HF)
			if !t.In(sizes) {
				// A Gemma 4 layer that reads an earlier layer's cache does
				// not use its own k and v; transformers drops them on load.
				// Any other tensor the config rules out (a v projection of
				// a layer whose values are its keys, an expert of a model
				// without experts) is refused below as not part of it.
				if t.OwnKV && !sizes.OwnKV {
					used[hf] = true
				}
				continue
			}
			var tweak func(*tensorPlan)
			if t.Permute != arch.NoHeads {
				tweak = permute(heads[t.Permute])
			}
			if slices.Contains(keptF32, t.GGUF) {
				tweak = func(p *tensorPlan) { p.typ = gguf.TypeF32 }
			}
			gg := fmt.Sprintf("blk.%d.%s", i, t.GGUF)
			if split, ok := oaiExperts[t.HF]; ok {
				p, err := oaiExpertsPlan(plan, take, fmt.Sprintf("model.layers.%d.mlp.experts.", i), gg, split, t.Shape(sizes))
				if err != nil {
					return err
				}
				m.plans = append(m.plans, p)
				continue
			}
			if t.Stack != arch.DimNone {
				p, err := expertsPlan(plan, func(name string) bool { _, ok := avail[name]; return ok },
					fmt.Sprintf("model.layers.%d.", i), gg, t, t.Shape(sizes))
				if err != nil {
					return err
				}
				m.plans = append(m.plans, p)
				continue
			}
			if _, ok := avail[hf]; !ok && unusedKV(hp, i, t) {
				// Gemma 3n's layers past the KV-sharing boundary read an
				// earlier layer's cache, and transformers saves no k or v
				// for them; llama.cpp's loader still requires the tensors,
				// so they are written as zeros.
				shape := t.Shape(sizes)
				ne := []uint64{uint64(shape[len(shape)-1])}
				if len(shape) == 2 {
					ne = append(ne, uint64(shape[0]))
				}
				typ := matType
				if len(shape) == 1 {
					typ = gguf.TypeF32
				}
				n := 1
				for _, x := range shape {
					n *= int(x)
				}
				m.plans = append(m.plans, &tensorPlan{name: gg, typ: typ, shape: ne, data: make([]float32, n)})
				continue
			}
			if err := add(gg, hf, t.Shape(sizes), !t.Optional, tweak); err != nil {
				return err
			}
		}
	}
	if err := add("output_norm.weight", "model.norm.weight", []int64{H}, true, nil); err != nil {
		return err
	}
	// A tied model reads the output projection from token_embd; llama.cpp
	// leaves output.weight out then, and so for a checkpoint without lm_head.
	if !hp.tied {
		if err := add("output.weight", "lm_head.weight", []int64{V, H}, false, nil); err != nil {
			return err
		}
	}

	var extra []string
	for name := range avail {
		switch {
		case used[name], strings.HasSuffix(name, ".rotary_emb.inv_freq"), name == "lm_head.weight" && hp.tied:
		default:
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		more := ""
		if len(extra) > 3 {
			more = fmt.Sprintf(" and %d more", len(extra)-3)
			extra = extra[:3]
		}
		return fmt.Errorf("hfimport: %s: tensor %s%s: not part of a %s of this config.json", m.Dir, strings.Join(quoteAll(extra), ", "), more, hp.class)
	}

	for _, p := range m.plans {
		src := ""
		switch {
		case p.src != nil:
			src = p.src.Name
		case p.parts != nil:
			src = partsSource(p.parts)
		case p.mx != nil:
			src = p.mx.blocks.Name + ", " + p.mx.scales.Name
		}
		if p.typ == gguf.TypeMXFP4 {
			// As llama.cpp's converter says a file whose experts came
			// in MXFP4: MOSTLY_MXFP4_MOE, whatever the other weights'
			// type.
			m.FileType = fileTypeMXFP4MoE
		}
		m.Tensors = append(m.Tensors, TensorInfo{Name: p.name, Type: p.typ, Shape: p.shape, Source: src})
	}
	m.progress = o.Progress
	return nil
}

// unusedKV reports whether t is a k, v or k-norm tensor of a Gemma 3n
// layer that reads an earlier layer's cache.
func unusedKV(hp *hparams, i int, t arch.Tensor) bool {
	l := hp.layered
	if l == nil || !l.gemma3n() || i < hp.layers-l.sharedKV {
		return false
	}
	switch t.GGUF {
	case "attn_k.weight", "attn_v.weight", "attn_k_norm.weight":
		return true
	}
	return false
}

// importOrder is a layer's tensors in the order this importer writes them:
// the attention norm, the q/k/v projections, their biases, the output
// projection and its bias, the head norms, the other norms, the
// feed-forward. It is not the record's (the forward's) order, but the bases
// of committed fixtures (training/testdata/peft_quant) were imported in it
// and record it tensor by tensor, and remaking them needs transformers.
func importOrder(block []arch.Tensor) []arch.Tensor {
	rank := func(t arch.Tensor) int {
		switch {
		case t.GGUF == "attn_norm.weight":
			return 0
		case strings.HasPrefix(t.GGUF, "attn_output."):
			return 3
		case strings.HasPrefix(t.GGUF, "ffn_") && t.Kind != arch.Norm:
			return 6
		case t.Kind == arch.Norm && t.Rows == arch.DimHeadDim:
			return 4
		case t.Kind == arch.Norm:
			return 5
		case t.Kind == arch.Bias:
			return 2
		}
		return 1
	}
	out := slices.Clone(block)
	slices.SortStableFunc(out, func(a, b arch.Tensor) int { return rank(a) - rank(b) })
	return out
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

// permutedRow is the source row of output row r under llama.cpp's q/k
// permutation (arch.PermutedRow), in the plan's row type.
func permutedRow(r, rows int64, heads int) int64 {
	return int64(arch.PermutedRow(int(r), int(rows), heads))
}

// reader streams the plan's output bytes.
// chunk is the bytes of source rows to convert at a time.
func (p *tensorPlan) reader(chunk int64) (io.Reader, error) {
	if p.parts != nil {
		var rs []io.Reader
		for _, part := range p.parts {
			r, err := part.reader(chunk)
			if err != nil {
				return nil, err
			}
			rs = append(rs, r)
		}
		// Zero bytes are zeros in every float type the parts write.
		zeros := p.zeroRows * p.cols * int64(p.typ.TypeSize())
		return io.MultiReader(append(rs, io.LimitReader(zeroReader{}, zeros))...), nil
	}
	if p.mx != nil {
		return &mxfp4Reader{p: p, chunkRows: max(1, chunk/p.mx.rowBytes())}, nil
	}
	if p.gather != nil {
		return &gatherReader{p: p, chunk: chunk}, nil
	}
	if p.src == nil {
		if p.typ != gguf.TypeF32 {
			b := make([]byte, len(p.data)*p.typ.TypeSize())
			if err := gguf.Quantize(p.typ, p.data, b); err != nil {
				return nil, fmt.Errorf("hfimport: tensor %q: %w", p.name, err)
			}
			return bytes.NewReader(b), nil
		}
		b := make([]byte, 4*len(p.data))
		for i, v := range p.data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return bytes.NewReader(b), nil
	}
	srcType := dtypeToGGUF[p.src.DType]
	rowBytes := p.cols * int64(srcType.TypeSize())
	if srcType == p.typ && !p.addOne && p.permHeads == 0 {
		return io.NewSectionReader(p.src, p.rowOff*rowBytes, p.rows*rowBytes), nil
	}
	chunkRows := max(1, chunk/rowBytes)
	return &convReader{p: p, srcType: srcType, rowBytes: rowBytes, chunkRows: chunkRows}, nil
}

// convReader converts a tensor a chunk of rows at a time: read each row
// (in permuted order where asked), widen to float32, add 1 to a Gemma norm,
// narrow to the output type.
type convReader struct {
	p                   *tensorPlan
	srcType             gguf.Type
	rowBytes, chunkRows int64
	row                 int64 // next output row
	in                  []byte
	f                   []float32
	out, pending        []byte
}

func (c *convReader) Read(b []byte) (int, error) {
	if len(c.pending) == 0 {
		if c.row >= c.p.rows {
			return 0, io.EOF
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *convReader) fill() error {
	p := c.p
	k := min(c.chunkRows, p.rows-c.row)
	n := int(k * p.cols)
	c.in = grow(c.in, int(k*c.rowBytes))
	c.f = grow(c.f, n)
	c.out = grow(c.out, n*p.typ.TypeSize())
	if p.permHeads == 0 {
		// The rows are in order: one read for the chunk.
		if _, err := p.src.ReadAt(c.in, (p.rowOff+c.row)*c.rowBytes); err != nil {
			return fmt.Errorf("hfimport: %s: tensor %q: rows %d-%d: %w", p.src.File(), p.src.Name, c.row, c.row+k-1, err)
		}
	} else {
		for i := range k {
			src := permutedRow(c.row+i, p.rows, p.permHeads)
			dst := c.in[i*c.rowBytes : (i+1)*c.rowBytes]
			if _, err := p.src.ReadAt(dst, (p.rowOff+src)*c.rowBytes); err != nil {
				return fmt.Errorf("hfimport: %s: tensor %q: row %d: %w", p.src.File(), p.src.Name, src, err)
			}
		}
	}
	if err := gguf.Dequantize(c.srcType, c.in, c.f); err != nil {
		return fmt.Errorf("hfimport: tensor %q: %w", p.src.Name, err)
	}
	if p.addOne {
		for i := range c.f {
			c.f[i]++
		}
	}
	if err := gguf.Quantize(p.typ, c.f, c.out); err != nil {
		return fmt.Errorf("hfimport: tensor %q: %w", p.src.Name, err)
	}
	c.row += k
	c.pending = c.out
	return nil
}

// zeroReader reads zeros for ever.
type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
