package synth

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// DefaultQuant is the type of a model whose Options name none: F16, what
// llama.cpp's converter writes by default.
const DefaultQuant = "F16"

// Options say how a model is written.
type Options struct {
	// Quant is a llama.cpp file type as gguf.ParseQuantTarget reads it
	// ("Q4_K_M", "Q8_0", "F16", "Q4_K", …); "" is DefaultQuant.
	Quant string
	// Seed makes the weights: the same preset, quantization and seed give
	// the same file, byte for byte, on any machine.
	Seed uint64
	// Strict refuses a model in which some tensor's rows are not a whole
	// number of blocks of the type the mix chose, instead of falling back
	// to another type as llama-quantize does (a 896-wide Qwen 2.5 0.5B
	// matrix cannot be Q4_K, so its Q4_K_M puts it in Q5_0).
	Strict bool
	// Progress, if set, is called on the calling goroutine as tensor data
	// is written.
	Progress func(Progress)
	// Context, if set, cancels the writing between chunks of data.
	Context context.Context
}

// Progress reports how far Write is.
type Progress struct {
	// Tensor is the tensor being written, Index its position (from 0) and
	// Count the number of tensors.
	Tensor string
	Index  int
	Count  int
	// BytesDone of BytesTotal bytes of tensor data are written.
	BytesDone, BytesTotal int64
}

// Layout is a model laid out for writing: what Write will put in the file.
type Layout struct {
	Preset Preset
	Quant  gguf.QuantTarget
	// Tensors are in file order.
	Tensors []Tensor
	// Params is the number of weights; TensorBytes their size in the file.
	Params      uint64
	TensorBytes uint64
	// FileSize is the exact size of the file in bytes.
	FileSize int64

	seed    uint64
	specs   []tensorSpec
	vocab   *tokenizer.Vocab
	standIn *gguf.File
}

// Tensor is one tensor of a Layout.
type Tensor struct {
	Name  string
	Shape []uint64 // ggml's ne: [cols, rows]
	Type  gguf.Type
	Size  uint64 // bytes
	// Note says why Type is not the target's default type, as
	// gguf.TensorPlan's Note does ("norm", "output tensor", "fallback: …").
	Note string
	// Fallback reports that the rows did not fit the type the mix chose.
	Fallback bool
}

// Plan lays out preset p for o without writing it: every tensor's type
// (the llama-quantize mix of o.Quant, as gguf.PlanRequantize chooses it),
// its size, and the size of the file. It builds the tokenizer and the
// header (tens of milliseconds for a 256K vocabulary) and touches no
// tensor data.
func Plan(p Preset, o Options) (*Layout, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	target, err := parseQuant(o.Quant)
	if err != nil {
		return nil, err
	}
	vocab, err := buildVocab(p)
	if err != nil {
		return nil, err
	}
	l := &Layout{Preset: p, seed: o.Seed, specs: p.tensors(), vocab: vocab}
	if l.standIn, err = standIn(p, target, o.Seed, vocab, l.specs); err != nil {
		return nil, err
	}
	return l.plan(target, o.Strict)
}

// Vocab is the model's vocabulary, as its file will hold it.
func (l *Layout) Vocab() *tokenizer.Vocab { return l.vocab }

// Requantized is the layout of the same model (preset, seed, tokenizer) at
// another quantization; it reuses l's tokenizer and header, so it costs a
// fraction of a Plan.
func (l *Layout) Requantized(quant string, strict bool) (*Layout, error) {
	target, err := parseQuant(quant)
	if err != nil {
		return nil, err
	}
	next := &Layout{Preset: l.Preset, seed: l.seed, specs: l.specs, vocab: l.vocab, standIn: l.standIn}
	return next.plan(target, strict)
}

func parseQuant(name string) (gguf.QuantTarget, error) {
	if name == "" {
		name = DefaultQuant
	}
	target, err := gguf.ParseQuantTarget(name)
	if err != nil {
		return gguf.QuantTarget{}, fmt.Errorf("synth: %w", err)
	}
	return target, nil
}

// plan fills in l's tensors for target.
func (l *Layout) plan(target gguf.QuantTarget, strict bool) (*Layout, error) {
	p := l.Preset
	plans, err := gguf.PlanRequantize(l.standIn, gguf.RequantizeOptions{Target: target})
	if err != nil {
		return nil, fmt.Errorf("synth: preset %s at %s: %w", p.Name, target.Name, err)
	}
	l.Quant = target
	// The header's length does not depend on the target: general.file_type
	// is a UINT32 whatever its value.
	l.FileSize = int64(l.standIn.DataOffset())
	for i, s := range l.specs {
		pl := plans[i]
		if pl.Fallback && strict {
			return nil, fmt.Errorf("synth: preset %s does not fit %s: tensor %q: %s (without Strict it falls back as llama-quantize does)",
				p.Name, target.Name, s.name, strings.TrimPrefix(pl.Note, "fallback: "))
		}
		if s.kind != kindMatrix && pl.To != gguf.TypeF32 {
			// The converter's rule, which the mix keeps: vectors, and
			// the stacks of them that gpt-oss's biases are (named
			// .bias, which llama-quantize never converts), stay F32.
			return nil, fmt.Errorf("synth: tensor %q: planned as %v, want F32", s.name, pl.To)
		}
		size, ok := pl.To.RowSize(int64(elements(s.shape)))
		if !ok {
			return nil, fmt.Errorf("synth: tensor %q %v: %d values are not whole %v blocks", s.name, s.shape, elements(s.shape), pl.To)
		}
		l.Tensors = append(l.Tensors, Tensor{
			Name: s.name, Shape: s.shape, Type: pl.To, Size: uint64(size), Note: pl.Note, Fallback: pl.Fallback,
		})
		l.Params += elements(s.shape)
		l.TensorBytes += uint64(size)
		l.FileSize += int64(alignUp(uint64(size), gguf.DefaultAlignment))
	}
	return l, nil
}

// standIn builds the file gguf.PlanRequantize plans from, which it needs as
// a *gguf.File: the real file's metadata and tensor names, every tensor
// F32, every matrix cut to 2 rows and a stack of them (a layer's experts)
// to 2 matrices, so that it is a few MB whatever the model (Qwen3-30B-A3B's
// 144 expert stacks would be 0.8 GB each). The mix rules read the model's
// keys and a tensor's name, row length and number of dimensions, never its
// row or matrix count (TestStandInPlansAsTheRealFile checks it), and the
// stand-in's header is byte for byte as long as the real one's, so its
// data offset is the real file's.
func standIn(p Preset, target gguf.QuantTarget, seed uint64, v *tokenizer.Vocab, specs []tensorSpec) (*gguf.File, error) {
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	if err := setMetadata(w, p, target, seed, v); err != nil {
		return nil, err
	}
	shapes := make([][]uint64, len(specs))
	for i, s := range specs {
		shapes[i] = s.shape
		switch len(s.shape) {
		case 2:
			shapes[i] = []uint64{s.shape[0], min(s.shape[1], 2)}
		case 3:
			// At least 2 matrices still, as ggml's n_dims counts only
			// the dimensions above 1 (MXFP4_MOE's rule asks for 3).
			shapes[i] = []uint64{s.shape[0], min(s.shape[1], 2), min(s.shape[2], 2)}
		}
		if err := w.AddTensor(s.name, gguf.TypeF32, shapes[i]); err != nil {
			return nil, err
		}
	}
	var zeros []byte
	for i, s := range specs {
		n := 4 * int(elements(shapes[i]))
		if len(zeros) < n {
			zeros = make([]byte, n)
		}
		if err := w.WriteTensorBytes(s.name, zeros[:n]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, fmt.Errorf("synth: reading back the planning header: %w", err)
	}
	return f, nil
}

func alignUp(x, align uint64) uint64 { return (x + align - 1) / align * align }
