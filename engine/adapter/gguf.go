package adapter

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/atomicfile"
)

// The GGUF LoRA format, as llama.cpp reads it (llama_adapter_lora_init_impl
// in src/llama-adapter.cpp) and convert_lora_to_gguf.py writes it:
//
//   - general.type = "adapter", adapter.type = "lora", general.architecture
//     the base's (a mismatch is refused: "model arch and LoRA arch
//     mismatch"), adapter.lora.alpha a FLOAT32 (absent: 0, which means the
//     factor is the user's scale alone);
//   - per targeted base tensor NAME, the tensors NAME.lora_a and NAME.lora_b
//     (a name ending otherwise is "unexpected suffix", a lone half "missing
//     one component");
//   - shapes, as ggml's ne (innermost first; PyTorch's shape reversed): for
//     a base weight of ne [cols, rows], lora_a is [cols, rank] (PEFT's
//     lora_A, rank × cols) and lora_b [rank, rows] (lora_B, rows × rank);
//     llama.cpp checks model ne[0] == a ne[0], model ne[1] == b ne[1] and
//     a ne[1] == b ne[0], and takes the rank from b ne[0];
//   - token_embd.weight is the exception: the lookup takes rows of lora_a
//     (llm_graph_context::build_inp_embd in src/llama-graph.cpp:
//     ggml_mul_mat(lora_b, ggml_get_rows(lora_a, tokens)), scaled, added
//     before any architecture's embedding scale), so lora_a is [rank,
//     vocab] and lora_b [rank, n_embd]; the
//     converter transposes lora_a for it ("here we only need to transpose
//     token_embd.lora_a"), and llama.cpp checks model ne[0] == b ne[1],
//     model ne[1] == a ne[1].
//
// The converter writes F32 by default (--outtype f16, bf16, q8_0 also);
// ReadGGUF dequantizes any type gguf can, WriteGGUF writes F32.

// tokenEmbd is the one target whose pair llama.cpp stores transposed.
const tokenEmbd = "token_embd.weight"

// WriteGGUF writes a as a llama.cpp GGUF LoRA adapter at path, atomically:
// a crash or an error leaves the old file or none.
func WriteGGUF(path string, a *Adapter) error {
	if err := a.validate(); err != nil {
		return err
	}
	if a.Arch == "" {
		return fmt.Errorf("adapter: no base architecture to write as general.architecture")
	}
	err := atomicfile.WriteFrom(path, 0o644, func(out io.Writer) error {
		return writeGGUF(out, a)
	})
	if err != nil {
		return fmt.Errorf("adapter: %s: %w", path, err)
	}
	return nil
}

func writeGGUF(out io.Writer, a *Adapter) error {
	w := gguf.NewWriter(out)
	w.SetString("general.architecture", a.Arch)
	w.SetString("general.type", "adapter")
	w.SetString("adapter.type", "lora")
	w.SetFloat32("adapter.lora.alpha", a.Alpha)
	names := sortTargets(a.Names())
	type tensor struct {
		name string
		ne   []uint64
		data []float32
	}
	var ts []tensor
	for _, n := range names {
		p := a.Pairs[n]
		r, rows, cols := uint64(p.Rank), uint64(p.Rows), uint64(p.Cols)
		if n == tokenEmbd {
			ts = append(ts, tensor{n + ".lora_a", []uint64{r, rows}, p.B},
				tensor{n + ".lora_b", []uint64{r, cols}, ref.Transpose(p.A, p.Rank, p.Cols)})
			continue
		}
		ts = append(ts, tensor{n + ".lora_a", []uint64{cols, r}, p.A},
			tensor{n + ".lora_b", []uint64{r, rows}, p.B})
	}
	for _, t := range ts {
		if err := w.AddTensor(t.name, gguf.TypeF32, t.ne); err != nil {
			return err
		}
	}
	for _, t := range ts {
		if err := w.WriteTensorBytes(t.name, f32Bytes(t.data)); err != nil {
			return err
		}
	}
	return w.Close()
}

// ReadGGUF reads a llama.cpp GGUF LoRA adapter, checking its keys and that
// its pairs are complete and agree on their rank. Check validates it
// against a base model.
func ReadGGUF(path string) (*Adapter, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("adapter: %w", err)
	}
	defer f.Close()
	a, err := fromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("adapter: %s: %w", path, err)
	}
	return a, nil
}

func fromGGUF(f *gguf.File) (*Adapter, error) {
	typ, _ := f.StringOr("general.type", "")
	if typ != "adapter" {
		return nil, fmt.Errorf("general.type is %q, not \"adapter\": a model, not a LoRA adapter", typ)
	}
	if at, _ := f.StringOr("adapter.type", ""); at != "lora" {
		return nil, fmt.Errorf("adapter.type is %q, not \"lora\"", at)
	}
	a := &Adapter{Arch: f.Architecture(), Pairs: map[string]*Pair{}}
	if a.Arch == "" {
		return nil, fmt.Errorf("general.architecture is missing")
	}
	var err error
	if a.Alpha, err = f.Float32Or("adapter.lora.alpha", 0); err != nil {
		return nil, err
	}
	halves := map[string][2]*gguf.TensorInfo{}
	for _, t := range f.Tensors() {
		base, half := "", 0
		switch {
		case strings.HasSuffix(t.Name, ".lora_a"):
			base = strings.TrimSuffix(t.Name, ".lora_a")
		case strings.HasSuffix(t.Name, ".lora_b"):
			base, half = strings.TrimSuffix(t.Name, ".lora_b"), 1
		default:
			return nil, fmt.Errorf("tensor %q is neither a .lora_a nor a .lora_b", t.Name)
		}
		h := halves[base]
		h[half] = &t
		halves[base] = h
	}
	for _, base := range sortTargets(mapKeys(halves)) {
		h := halves[base]
		if h[0] == nil || h[1] == nil {
			return nil, fmt.Errorf("tensor %q has only one of its lora_a and lora_b", base)
		}
		ta, tb := *h[0], *h[1]
		an, err := matrixShape(ta)
		if err != nil {
			return nil, err
		}
		bn, err := matrixShape(tb)
		if err != nil {
			return nil, err
		}
		av, err := tensorF32(f, ta)
		if err != nil {
			return nil, err
		}
		bv, err := tensorF32(f, tb)
		if err != nil {
			return nil, err
		}
		p := &Pair{}
		if base == tokenEmbd {
			// lora_a [rank, vocab] is B; lora_b [rank, n_embd] is Aᵀ.
			p.Rank, p.Rows, p.Cols = an[0], an[1], bn[1]
			if bn[0] != p.Rank {
				return nil, fmt.Errorf("tensor %q: lora_a has rank %d (ne %v) but lora_b %d (ne %v)", base, p.Rank, ta.Shape, bn[0], tb.Shape)
			}
			p.B, p.A = av, ref.Transpose(bv, p.Cols, p.Rank)
		} else {
			p.Cols, p.Rank, p.Rows = an[0], an[1], bn[1]
			if bn[0] != p.Rank {
				return nil, fmt.Errorf("tensor %q: lora_a has rank %d (ne %v) but lora_b %d (ne %v)", base, p.Rank, ta.Shape, bn[0], tb.Shape)
			}
			p.A, p.B = av, bv
		}
		a.Pairs[base] = p
	}
	if err := a.validate(); err != nil {
		return nil, err
	}
	return a, nil
}

// matrixShape is t's ne as two positive dimensions; ggml drops trailing
// dimensions of 1, so a rank-1 lora_a may have one.
func matrixShape(t gguf.TensorInfo) ([2]int, error) {
	ne := [2]int{1, 1}
	for i, d := range t.Shape {
		if i >= 2 && d != 1 {
			return ne, fmt.Errorf("tensor %q has shape %v: not a matrix", t.Name, t.Shape)
		}
		if i < 2 {
			ne[i] = int(d)
		}
	}
	if len(t.Shape) == 0 || ne[0] <= 0 || ne[1] <= 0 {
		return ne, fmt.Errorf("tensor %q has shape %v: not a matrix", t.Name, t.Shape)
	}
	return ne, nil
}

func tensorF32(f *gguf.File, t gguf.TensorInfo) ([]float32, error) {
	if !gguf.CanDequantize(t.Type) {
		return nil, fmt.Errorf("tensor %q: type %v cannot be read", t.Name, t.Type)
	}
	b, err := f.Data(t)
	if err != nil {
		return nil, err
	}
	v := make([]float32, t.Elements())
	if err := gguf.Dequantize(t.Type, b, v); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return v, nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		putF32(b[4*i:], x)
	}
	return b
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sortTargets orders names as a model file does: token_embd, the blocks in
// number order, then the rest.
func sortTargets(names []string) []string {
	key := func(n string) (int, string) {
		if n == tokenEmbd {
			return -1, n
		}
		if rest, ok := strings.CutPrefix(n, "blk."); ok {
			if i := strings.IndexByte(rest, '.'); i > 0 {
				if l, err := strconv.Atoi(rest[:i]); err == nil {
					return l, rest[i:]
				}
			}
		}
		return 1 << 30, n
	}
	slices.SortFunc(names, func(a, b string) int {
		la, ra := key(a)
		lb, rb := key(b)
		if la != lb {
			return la - lb
		}
		return strings.Compare(ra, rb)
	})
	return names
}

// isDir reports whether path is a folder (a PEFT adapter) rather than a file.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

func putF32(b []byte, x float32) {
	binary.LittleEndian.PutUint32(b, math.Float32bits(x))
}
