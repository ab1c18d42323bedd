package kokoro

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/hearthstudio/hearth/pth"
	"github.com/hearthstudio/hearth/safetensors"
)

// Modules are the parts of Kokoro's checkpoint, in the order KModel builds
// them: the PL-BERT duration encoder, its projection, the prosody
// predictor, the text encoder and the iSTFTNet decoder.
var Modules = []string{"bert", "bert_encoder", "predictor", "text_encoder", "decoder"}

// A Tensor is one weight, row-major and in f32: the .pth reader's tensor,
// which the safetensors path fills too, so a checkpoint's tensors are used
// as read.
type Tensor = pth.Tensor

// Weights is every tensor of a Kokoro checkpoint by its full name,
// "module.param" as in the safetensors conversion
// ("decoder.generator.conv_post.weight"), weight norm already folded.
type Weights struct {
	Path    string
	tensors map[string]*Tensor
}

// OpenWeights reads a Kokoro checkpoint: the released kokoro-v1_0.pth (a
// torch.save zip of {module: state_dict}) or the same weights as one
// safetensors file, told apart by their first bytes. Every tensor is read
// into memory as f32 (82M parameters, 330 MB) so that a bad file fails
// here and not in the middle of a synthesis.
//
// Weight norm is folded at load: the decoder's convolutions are stored as
// a magnitude g and a direction v (name.weight_g / name.weight_v from
// torch.nn.utils.weight_norm, or name.parametrizations.weight.original0 /
// original1 from torch.nn.utils.parametrizations.weight_norm); the model
// only ever uses w = g · v / ‖v‖, the norm taken over every dimension but
// the one g keeps (dimension 0 for all of Kokoro's), so that is what
// Weights holds, as name.weight.
func OpenWeights(path string) (*Weights, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	var tensors map[string]*Tensor
	if pth.IsZip(f) {
		tensors, err = pth.ReadStateDicts(f, info.Size())
	} else {
		tensors, err = readSafetensors(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return NewWeights(path, tensors)
}

// NewWeights makes Weights of tensors as a checkpoint stores them, keyed
// by full name (weight-norm parts included, which it folds), as OpenWeights
// does after reading a file; name stands for the file in errors. It takes
// ownership of the map. Tests use it for weights they generate.
func NewWeights(name string, tensors map[string]*Tensor) (*Weights, error) {
	if err := foldWeightNorm(tensors); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w := &Weights{Path: name, tensors: tensors}
	if err := w.checkModules(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return w, nil
}

// readSafetensors reads a flat safetensors file of "module.param" names
// through package safetensors, which checks the header against the file.
func readSafetensors(path string) (map[string]*Tensor, error) {
	st, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("neither a PyTorch zip nor a safetensors file: %w", err)
	}
	defer st.Close()
	out := map[string]*Tensor{}
	for _, t := range st.Tensors {
		conv, err := pth.ElementDecoder(string(t.DType))
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		n := t.Elements()
		if n > pth.MaxTensorElements {
			return nil, fmt.Errorf("tensor %q: shape %v: over %d elements", t.Name, t.Shape, int64(pth.MaxTensorElements))
		}
		es := dtypeSize(string(t.DType))
		raw := make([]byte, n*es)
		if _, err := t.ReadAt(raw, 0); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		shape := make([]int, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int(d)
		}
		// A conversion from a DataParallel state dict may keep the prefix
		// after the module name: decoder.module.generator.….
		name := t.Name
		if mod, rest, ok := strings.Cut(name, "."); ok {
			name = mod + "." + strings.TrimPrefix(rest, "module.")
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice (with and without the module. prefix?)", name)
		}
		d := &Tensor{Name: name, Shape: shape, DType: string(t.DType), Data: make([]float32, n)}
		for i := range d.Data {
			d.Data[i] = conv(raw[int64(i)*es:])
		}
		out[name] = d
	}
	return out, nil
}

func dtypeSize(dtype string) int64 {
	switch dtype {
	case "F64", "I64":
		return 8
	case "F32", "I32":
		return 4
	case "F16", "BF16", "I16":
		return 2
	}
	return 1
}

// foldWeightNorm replaces every (g, v) pair by w = g·v/‖v‖.
func foldWeightNorm(ts map[string]*Tensor) error {
	type pair struct{ g, v string }
	pairs := map[string]pair{} // weight name → its parts
	for name := range ts {
		switch {
		case strings.HasSuffix(name, ".weight_g"):
			base := strings.TrimSuffix(name, "_g")
			pairs[base] = pair{name, base + "_v"}
		case strings.HasSuffix(name, ".parametrizations.weight.original0"):
			base := strings.TrimSuffix(name, ".parametrizations.weight.original0") + ".weight"
			pairs[base] = pair{name, strings.TrimSuffix(name, "0") + "1"}
		}
	}
	bases := make([]string, 0, len(pairs))
	for b := range pairs {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	for _, base := range bases {
		p := pairs[base]
		g, v := ts[p.g], ts[p.v]
		if v == nil {
			return fmt.Errorf("weight norm: %q has no %q", p.g, p.v)
		}
		if _, clash := ts[base]; clash {
			return fmt.Errorf("weight norm: both %q and its parts %q, %q", base, p.g, p.v)
		}
		w, err := weightNorm(g, v)
		if err != nil {
			return fmt.Errorf("weight norm of %q: %w", base, err)
		}
		w.Name = base
		delete(ts, p.g)
		delete(ts, p.v)
		ts[base] = w
	}
	for name := range ts {
		if strings.HasSuffix(name, ".weight_v") || strings.HasSuffix(name, ".parametrizations.weight.original1") {
			return fmt.Errorf("weight norm: %q has no magnitude (weight_g / original0)", name)
		}
	}
	return nil
}

// weightNorm computes torch's _weight_norm(v, g, dim): w = g · v/‖v‖, the
// L2 norm over every dimension of v but dim, where dim is the one axis on
// which g is not 1 (torch keeps g shaped like v with ones elsewhere). A g
// of one element is either dim 0 of size 1 or dim=None (the norm of all v):
// both divide by the norm of all of v.
func weightNorm(g, v *Tensor) (*Tensor, error) {
	if len(v.Shape) == 0 || len(v.Data) == 0 {
		return nil, fmt.Errorf("v has shape %v", v.Shape)
	}
	dim := -1
	if len(g.Data) > 1 {
		if len(g.Shape) != len(v.Shape) {
			return nil, fmt.Errorf("g shape %v does not match v shape %v", g.Shape, v.Shape)
		}
		for i, d := range g.Shape {
			if d == 1 {
				continue
			}
			if d != v.Shape[i] || dim >= 0 {
				return nil, fmt.Errorf("g shape %v does not match v shape %v", g.Shape, v.Shape)
			}
			dim = i
		}
	} else if len(g.Data) != 1 {
		return nil, fmt.Errorf("g is empty")
	}
	// View v as [outer, n, inner] around dim: g has one value per n.
	outer, n, inner := 1, 1, 1
	if dim >= 0 {
		n = v.Shape[dim]
		for _, d := range v.Shape[:dim] {
			outer *= d
		}
		for _, d := range v.Shape[dim+1:] {
			inner *= d
		}
	} else {
		inner = len(v.Data)
	}
	norms := make([]float64, n)
	for o := 0; o < outer; o++ {
		for j := 0; j < n; j++ {
			row := v.Data[(o*n+j)*inner : (o*n+j+1)*inner]
			for _, x := range row {
				norms[j] += float64(x) * float64(x)
			}
		}
	}
	w := &Tensor{Shape: slices.Clone(v.Shape), DType: v.DType, Data: make([]float32, len(v.Data))}
	for j := range norms {
		norms[j] = float64(g.Data[j]) / math.Sqrt(norms[j])
	}
	for o := 0; o < outer; o++ {
		for j := 0; j < n; j++ {
			base := (o*n + j) * inner
			for k := 0; k < inner; k++ {
				w.Data[base+k] = float32(float64(v.Data[base+k]) * norms[j])
			}
		}
	}
	return w, nil
}

// checkModules requires a tensor under each of Modules and none outside
// them (KModel asserts the same: every key of the file is one of its
// attributes).
func (w *Weights) checkModules() error {
	seen := map[string]bool{}
	for name := range w.tensors {
		mod, _, _ := strings.Cut(name, ".")
		if !slices.Contains(Modules, mod) {
			return fmt.Errorf("tensor %q belongs to no Kokoro module (want one of %s)", name, strings.Join(Modules, ", "))
		}
		seen[mod] = true
	}
	var missing []string
	for _, m := range Modules {
		if !seen[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("module(s) %s missing: not a complete Kokoro checkpoint", strings.Join(missing, ", "))
	}
	return nil
}

// ErrNoTensor is wrapped by Tensor's error for a name the file lacks.
var ErrNoTensor = errors.New("no such tensor")

// Tensor returns the named weight, checking its shape when shape is given
// (every dimension must match; -1 matches any size). Errors name the file
// and the tensor.
func (w *Weights) Tensor(name string, shape ...int) (*Tensor, error) {
	t, ok := w.tensors[name]
	if !ok {
		hint := ""
		if near := w.near(name); len(near) > 0 {
			hint = " (the file has " + strings.Join(near, ", ") + ")"
		}
		return nil, fmt.Errorf("kokoro: %s: tensor %q: %w%s", w.Path, name, ErrNoTensor, hint)
	}
	if shape != nil && !shapeMatches(t.Shape, shape) {
		return nil, fmt.Errorf("kokoro: %s: tensor %q has shape %v, want %v", w.Path, name, t.Shape, shape)
	}
	return t, nil
}

func shapeMatches(got, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if want[i] != -1 && got[i] != want[i] {
			return false
		}
	}
	return true
}

// near lists up to five names sharing the longest dotted prefix with name,
// to point at a typo or a renamed layer.
func (w *Weights) near(name string) []string {
	parts := strings.Split(name, ".")
	for k := len(parts) - 1; k > 0; k-- {
		prefix := strings.Join(parts[:k], ".") + "."
		var out []string
		for n := range w.tensors {
			if strings.HasPrefix(n, prefix) {
				out = append(out, n)
			}
		}
		if len(out) > 0 {
			sort.Strings(out)
			if len(out) > 5 {
				out = append(out[:5], "…")
			}
			return out
		}
	}
	return nil
}

// Has reports whether the file holds the named tensor.
func (w *Weights) Has(name string) bool { _, ok := w.tensors[name]; return ok }

// Names lists every tensor name, sorted.
func (w *Weights) Names() []string {
	out := make([]string, 0, len(w.tensors))
	for n := range w.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Module returns the names under one of Modules ("decoder" gives
// "decoder.…"), sorted.
func (w *Weights) Module(module string) []string {
	var out []string
	for _, n := range w.Names() {
		if strings.HasPrefix(n, module+".") {
			out = append(out, n)
		}
	}
	return out
}
