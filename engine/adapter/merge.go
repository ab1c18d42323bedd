package adapter

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/atomicfile"
)

// Weighted is an adapter and the strength it is applied at (1: as trained).
type Weighted struct {
	Adapter *Adapter
	Scale   float32
}

// Load reads the adapter at path, a GGUF LoRA file or a PEFT folder, and
// checks it against the base model m.
func Load(path string, m *model.Model) (*Adapter, error) {
	var a *Adapter
	var err error
	if isDir(path) {
		a, err = ReadPEFT(path, &m.Config)
	} else {
		a, err = ReadGGUF(path)
	}
	if err != nil {
		return nil, err
	}
	if err := a.Check(m); err != nil {
		return nil, fmt.Errorf("%w (adapter %s, base %s)", err, path, m.Path)
	}
	return a, nil
}

// SameType keeps every tensor's type in Merge.
const SameType = "SAME"

// Merge writes a new GGUF model at out: the model at base with the
// adapters merged into the weights they target, W += Σ scale·alpha/rank·B·A,
// every other tensor and all metadata copied. With outType "" or SameType
// each merged weight is requantized to its own type (dequantized, the
// product added in float64 and rounded once, quantized again); another
// name (as gguf.ParseQuantTarget reads it: "F16", "Q8_0", "Q4_K_M")
// converts the whole merged model to it, as hearth quantize does, without
// a second rounding of the merged weights. The file appears whole or not at
// all.
func Merge(base string, adapters []Weighted, out, outType string) error {
	target, same := gguf.QuantTarget{}, outType == "" || strings.EqualFold(outType, SameType)
	if !same {
		var err error
		if target, err = gguf.ParseQuantTarget(outType); err != nil {
			return fmt.Errorf("adapter: merge: %w", err)
		}
	}
	if len(adapters) == 0 {
		return fmt.Errorf("adapter: merge: no adapters")
	}
	if sameFile(base, out) {
		return fmt.Errorf("adapter: merge: the output %s is the base model: write it to another path", out)
	}
	m, err := model.Load(base)
	if err != nil {
		return err
	}
	defer m.Close()
	deltas := map[string][]delta{}
	for i, w := range adapters {
		if math.IsNaN(float64(w.Scale)) || math.IsInf(float64(w.Scale), 0) {
			return fmt.Errorf("adapter: merge: adapter %d: scale %v is not a finite number", i, w.Scale)
		}
		if err := w.Adapter.Check(m); err != nil {
			return fmt.Errorf("adapter: merge: adapter %d: %w", i, err)
		}
		for n, p := range w.Adapter.Pairs {
			deltas[n] = append(deltas[n], delta{p, float64(w.Adapter.factor(p.Rank, w.Scale))})
		}
	}
	if same {
		return atomicfile.WriteFrom(out, 0o644, func(w io.Writer) error {
			return writeMerged(w, m.File, deltas, false)
		})
	}
	// Merged weights in F32 first, then one conversion of the whole file.
	tmp := out + ".merge.tmp"
	defer os.Remove(tmp)
	if err := atomicfile.WriteFrom(tmp, 0o644, func(w io.Writer) error {
		return writeMerged(w, m.File, deltas, true)
	}); err != nil {
		return err
	}
	f, err := gguf.Open(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	return gguf.RequantizeFile(f, out, gguf.RequantizeOptions{Target: target})
}

// delta is one adapter's pair for a weight, with its factor.
type delta struct {
	p *Pair
	f float64
}

// writeMerged copies f to w with the deltas added to their weights, each
// requantized to its type, or written as F32 when asF32.
func writeMerged(w io.Writer, f *gguf.File, deltas map[string][]delta, asF32 bool) error {
	gw := gguf.NewWriter(w)
	for _, kv := range f.Metadata() {
		if err := gw.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	tensors := f.Tensors()
	types := make([]gguf.Type, len(tensors))
	for i, t := range tensors {
		types[i] = t.Type
		if _, ok := deltas[t.Name]; ok && asF32 {
			types[i] = gguf.TypeF32
		}
		if err := gw.AddTensor(t.Name, types[i], t.Shape); err != nil {
			return err
		}
	}
	for i, t := range tensors {
		data, err := f.Data(t)
		if err != nil {
			return err
		}
		if ds, ok := deltas[t.Name]; ok {
			if data, err = mergeTensor(t, data, types[i], ds); err != nil {
				return err
			}
		}
		if err := gw.WriteTensorBytes(t.Name, data); err != nil {
			return err
		}
	}
	return gw.Close()
}

// mergeRows is how many rows mergeTensor converts at a time, so that a
// large embedding never sits in memory as float32.
const mergeRows = 256

// mergeTensor returns t's data (of t.Type) with the deltas added, as typ.
func mergeTensor(t gguf.TensorInfo, data []byte, typ gguf.Type, ds []delta) ([]byte, error) {
	cols := int(t.Shape[0])
	rows := int(t.Elements()) / cols
	if !gguf.CanDequantize(t.Type) || !gguf.CanQuantize(typ) {
		return nil, fmt.Errorf("adapter: merge: tensor %q: type %v cannot be requantized", t.Name, t.Type)
	}
	srcRow, _ := t.Type.RowSize(int64(cols))
	dstRow, ok := typ.RowSize(int64(cols))
	if !ok {
		return nil, fmt.Errorf("adapter: merge: tensor %q: %d columns do not fit %v's blocks", t.Name, cols, typ)
	}
	out := make([]byte, int64(rows)*dstRow)
	w := make([]float32, mergeRows*cols)
	for r0 := 0; r0 < rows; r0 += mergeRows {
		n := min(mergeRows, rows-r0)
		w := w[:n*cols]
		if err := gguf.DequantizeParallel(t.Type, data[int64(r0)*srcRow:int64(r0+n)*srcRow], w); err != nil {
			return nil, fmt.Errorf("adapter: merge: tensor %q: %w", t.Name, err)
		}
		addDelta(w, r0, n, cols, ds)
		if err := gguf.QuantizeParallel(typ, w, out[int64(r0)*dstRow:int64(r0+n)*dstRow]); err != nil {
			return nil, fmt.Errorf("adapter: merge: tensor %q: %w", t.Name, err)
		}
	}
	return out, nil
}

// addDelta adds Σ f·B·A of rows [r0, r0+n) to w in float64, rounding each
// merged weight once, the rows spread over the cores.
func addDelta(w []float32, r0, n, cols int, ds []delta) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			acc := make([]float64, cols)
			for i := g; i < n; i += workers {
				row := w[i*cols : (i+1)*cols]
				for j, x := range row {
					acc[j] = float64(x)
				}
				for _, d := range ds {
					p := d.p
					for k, b := range p.B[(r0+i)*p.Rank : (r0+i+1)*p.Rank] {
						fb := d.f * float64(b)
						for j, a := range p.A[k*cols : (k+1)*cols] {
							acc[j] += fb * float64(a)
						}
					}
				}
				for j := range row {
					row[j] = float32(acc[j])
				}
			}
		})
	}
	wg.Wait()
}

// sameFile reports whether a and b name one file (b need not exist).
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	if err == nil {
		return os.SameFile(sa, sb)
	}
	aa, _ := filepath.Abs(a)
	ab, _ := filepath.Abs(b)
	return aa == ab
}
