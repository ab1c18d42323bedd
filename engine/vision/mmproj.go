package vision

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/hearthstudio/hearth/gguf"
)

// Config is a vision tower's shape, from an mmproj file's clip.* keys.
type Config struct {
	// Projector is the projector type (clip.projector_type): "gemma3" or
	// "gemma4v".
	Projector string
	// ImageSize is the side of the square image Gemma 3's tower takes, in
	// pixels, and PatchSize the side of a patch: the tower sees
	// (ImageSize/PatchSize)² patches. Gemma 4's takes any grid (Grid).
	ImageSize, PatchSize int
	// Hidden is the tower's width, FF its MLP's, Layers its blocks and
	// Heads its attention heads.
	Hidden, FF, Layers, Heads int
	// Eps is the LayerNorms' epsilon.
	Eps float32
	// Merge is the side of the average pool over the patch grid (Gemma 3's
	// 4: 64×64 patches become 16×16 tokens).
	Merge int
	// TextHidden is the width of the projected tokens: the language
	// model's embedding width.
	TextHidden int
	// Mean and Std normalise the pixels, channel by channel.
	Mean, Std [3]float32
	// PositionSize is the rows of each of Gemma 4's position tables: the
	// patch grid's sides must be smaller.
	PositionSize int
	// MaxTokens is Gemma 4's image token budget (Gemma4Tokens unless
	// Tower.SetBudget sets another): GridFor keeps an image's tokens
	// within it.
	MaxTokens int
}

// Side is the side of Gemma 3's square patch grid.
func (c Config) Side() int { return c.ImageSize / c.PatchSize }

// Patches is the number of patches the tower sees.
func (c Config) Patches() int { return c.Side() * c.Side() }

// Tokens is the number of tokens an image becomes in Gemma 3's tower.
func (c Config) Tokens() int { s := c.Side() / c.Merge; return s * s }

// PatchWidth is the number of values in one patch: 3 channels of
// PatchSize² pixels.
func (c Config) PatchWidth() int { return 3 * c.PatchSize * c.PatchSize }

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.Hidden / c.Heads }

// Preprocess is how the tower wants its pixels: transformers' Gemma 3
// processor's resize to ImageSize, rescale and normalisation. Its resize is
// torchvision's; of the two arithmetics that has, the uint8 kernel is the
// one an x86 CPU with AVX2 runs, and the fixture made on such a host
// (testdata/gemma3) matches it to the bit.
func (c Config) Preprocess() Preprocess {
	return Preprocess{Size: c.ImageSize, Mean: c.Mean, Std: c.Std, Rescale: 1.0 / 255, Resample: TorchvisionUint8}
}

// Weight is one tensor of the tower as the file stores it: Rows rows of
// Cols values of Type.
type Weight struct {
	Name       string
	Type       gguf.Type
	Rows, Cols int
	Data       []byte
}

// F32 decodes the whole weight.
func (w *Weight) F32() ([]float32, error) {
	out := make([]float32, w.Rows*w.Cols)
	if err := gguf.Dequantize(w.Type, w.Data, out); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", w.Name, err)
	}
	return out, nil
}

// Block is one of Gemma 3's encoder blocks' weights: pre-norms with biases, attention
// projections with biases, and the MLP (up, GELU, down) with biases.
type Block struct {
	LN1, LN1Bias, LN2, LN2Bias *Weight
	Q, QBias, K, KBias         *Weight
	V, VBias, O, OBias         *Weight
	Up, UpBias, Down, DownBias *Weight
}

// Tower is an mmproj file's vision encoder and projector. Gemma 3's
// (SigLIP and its multi-modal projector): patch embedding, learned
// positions, pre-norm blocks, a final LayerNorm, an average pool over the
// patch grid, an RMSNorm and a projection to the language model's width.
// Gemma 4's: gemma4v.go.
type Tower struct {
	Config Config
	Path   string

	// Patch is the patch embedding: Hidden rows of PatchWidth values
	// (the convolution's [out][channel][y][x]), and its bias (Gemma 3).
	Patch, PatchBias *Weight
	// Position is the learned position table: Patches rows of Hidden
	// (Gemma 3), or Gemma 4's x table's PositionSize rows then y's.
	Position *Weight
	Blocks   []Block  // Gemma 3
	Blocks4  []Block4 // Gemma 4
	// StdBias and StdScale standardise Gemma 4's pooled tokens, (x - bias)
	// · scale, in the files that have them (26B, 31B).
	StdBias, StdScale *Weight
	// PostLN is the final LayerNorm.
	PostLN, PostLNBias *Weight
	// SoftNorm is the projector's RMSNorm gain (the converter stores it
	// with Gemma's +1 already added).
	SoftNorm *Weight
	// Projection is the projector's matrix as the file stores it: Gemma
	// 3's Hidden rows of TextHidden (transformers' mm_input_projection_weight,
	// x·W), the transpose of the other products' rows of inputs; Gemma 4's
	// TextHidden rows of Hidden.
	Projection *Weight

	file *gguf.File
}

// ErrNotProjector is the error of a GGUF file that holds no vision tower.
var ErrNotProjector = errors.New("not a vision projector (mmproj) file")

// Open reads an mmproj GGUF file (llama.cpp's convert_hf_to_gguf.py
// --mmproj output). Close the tower when done: its weights point into the
// memory-mapped file.
func Open(path string) (*Tower, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	t, err := load(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Path = path
	return t, nil
}

// Close releases the file.
func (t *Tower) Close() error {
	if t.file == nil {
		return nil
	}
	err := t.file.Close()
	t.file = nil
	return err
}

// load reads the config and the weights of f.
func load(f *gguf.File) (*Tower, error) {
	arch, _ := f.StringOr("general.architecture", "")
	if arch != "clip" {
		return nil, fmt.Errorf("%w: general.architecture is %q, want \"clip\"", ErrNotProjector, arch)
	}
	if has, err := f.BoolOr("clip.has_vision_encoder", false); err != nil || !has {
		return nil, fmt.Errorf("%w: it has no vision encoder (clip.has_vision_encoder is not true; an audio projector?)", ErrNotProjector)
	}
	c, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	t := &Tower{Config: c, file: f}
	ld := &loader{f: f}
	if c.Projector == projGemma4 {
		if loadGemma4(ld, t); ld.err != nil {
			return nil, ld.err
		}
		return t, nil
	}
	d := c.Hidden
	t.Patch = ld.patch("v.patch_embd.weight", c)
	t.PatchBias = ld.tensor("v.patch_embd.bias", d)
	t.Position = ld.tensor("v.position_embd.weight", c.Patches(), d)
	for i := range c.Layers {
		p := func(s string) string { return fmt.Sprintf("v.blk.%d.%s", i, s) }
		t.Blocks = append(t.Blocks, Block{
			LN1: ld.tensor(p("ln1.weight"), d), LN1Bias: ld.tensor(p("ln1.bias"), d),
			Q: ld.tensor(p("attn_q.weight"), d, d), QBias: ld.tensor(p("attn_q.bias"), d),
			K: ld.tensor(p("attn_k.weight"), d, d), KBias: ld.tensor(p("attn_k.bias"), d),
			V: ld.tensor(p("attn_v.weight"), d, d), VBias: ld.tensor(p("attn_v.bias"), d),
			O: ld.tensor(p("attn_out.weight"), d, d), OBias: ld.tensor(p("attn_out.bias"), d),
			LN2: ld.tensor(p("ln2.weight"), d), LN2Bias: ld.tensor(p("ln2.bias"), d),
			Up: ld.tensor(p("ffn_up.weight"), c.FF, d), UpBias: ld.tensor(p("ffn_up.bias"), c.FF),
			Down: ld.tensor(p("ffn_down.weight"), d, c.FF), DownBias: ld.tensor(p("ffn_down.bias"), d),
		})
	}
	t.PostLN = ld.tensor("v.post_ln.weight", d)
	t.PostLNBias = ld.tensor("v.post_ln.bias", d)
	t.SoftNorm = ld.tensor("mm.soft_emb_norm.weight", d)
	t.Projection = ld.projection(projectionTensor, d)
	if ld.err != nil {
		return nil, ld.err
	}
	t.Config.TextHidden = t.Projection.Cols
	return t, nil
}

// projectorArchs maps the projector types Hearth runs to the architecture
// of the language models they feed.
var projectorArchs = map[string]string{"gemma3": "gemma3", projGemma4: "gemma4"}

// ProjectorArch is the architecture of the language models a projector of
// type typ feeds, "" for a type Hearth does not run.
func ProjectorArch(typ string) string { return projectorArchs[typ] }

// SeesImages says whether Hearth reads images for models of arch.
func SeesImages(arch string) bool {
	for _, a := range projectorArchs {
		if a == arch {
			return true
		}
	}
	return false
}

// projectorType is an mmproj file's projector type, as llama.cpp's clip
// loader reads it: the vision one of a mixed-modality file
// (clip.vision.projector_type, where Gemma 4's converter writes it) first.
func projectorType(f *gguf.File) (string, error) {
	proj, err := f.StringOr("clip.vision.projector_type", "")
	if err == nil && proj == "" {
		proj, err = f.StringOr("clip.projector_type", "")
	}
	if err != nil {
		return "", err
	}
	if ProjectorArch(proj) == "" {
		return proj, fmt.Errorf("vision projector type %q is not supported (Hearth runs gemma3's and gemma4v's)", proj)
	}
	return proj, nil
}

// ReadHeader reads, from an mmproj file's header alone, its projector type
// and the architecture and width of the language models it feeds (the
// projection's output: Gemma 3's matrix is [TextHidden, Hidden] in ggml's
// order, Gemma 4's [Hidden, TextHidden]). A type Hearth does not run, or no
// projection matrix, is an error.
func ReadHeader(f *gguf.File) (typ, arch string, width int, err error) {
	if typ, err = projectorType(f); err != nil {
		return typ, "", 0, err
	}
	t, ok := f.Tensor(projectionTensor)
	if !ok || len(t.Shape) != 2 {
		return typ, "", 0, fmt.Errorf("no %s matrix: not a vision projector Hearth reads", projectionTensor)
	}
	width = int(t.Shape[0])
	if typ == projGemma4 {
		width = int(t.Shape[1])
	}
	return typ, ProjectorArch(typ), width, nil
}

// projectionTensor is the projection into the language model's embeddings.
const projectionTensor = "mm.input_projection.weight"

// readConfig reads the clip.vision keys a projector needs.
func readConfig(f *gguf.File) (Config, error) {
	var c Config
	proj, err := projectorType(f)
	if err != nil {
		return c, err
	}
	c.Projector = proj
	ints := []struct {
		key string
		v   *int
	}{
		{"clip.vision.image_size", &c.ImageSize}, {"clip.vision.patch_size", &c.PatchSize},
		{"clip.vision.embedding_length", &c.Hidden}, {"clip.vision.feed_forward_length", &c.FF},
		{"clip.vision.block_count", &c.Layers}, {"clip.vision.attention.head_count", &c.Heads},
	}
	for _, k := range ints {
		if *k.v, err = f.Int(k.key); err != nil {
			return c, err
		}
		if *k.v <= 0 {
			return c, fmt.Errorf("%s is %d, want a positive number", k.key, *k.v)
		}
	}
	if c.Eps, err = f.Float32("clip.vision.attention.layer_norm_epsilon"); err != nil {
		return c, err
	}
	if !(c.Eps >= 0) || math.IsInf(float64(c.Eps), 0) {
		return c, fmt.Errorf("clip.vision.attention.layer_norm_epsilon is %v, want a finite number >= 0", c.Eps)
	}
	// llama.cpp's default for gemma3, written only when it differs (the
	// converter's tiny test models).
	if c.Merge, err = f.IntOr("clip.vision.projector.scale_factor", 4); err != nil {
		return c, err
	}
	for _, k := range []struct {
		key string
		v   *[3]float32
	}{{"clip.vision.image_mean", &c.Mean}, {"clip.vision.image_std", &c.Std}} {
		vs, err := f.Float32s(k.key)
		if err != nil {
			return c, err
		}
		if len(vs) != 3 {
			return c, fmt.Errorf("%s has %d values, want one per RGB channel", k.key, len(vs))
		}
		copy(k.v[:], vs)
	}
	if slices.Contains(c.Std[:], 0) {
		return c, fmt.Errorf("clip.vision.image_std %v has a zero", c.Std)
	}
	if proj == projGemma4 {
		// Its clip.vision.image_size is a placeholder (224): the grid
		// follows each image.
		return c, gemma4Config(f, &c)
	}
	switch {
	case c.ImageSize > MaxSize:
		// Preprocess takes no larger image, and a size past it could
		// overflow the patch and token counts.
		return c, fmt.Errorf("clip.vision.image_size is %d, over the %d Hearth preprocesses", c.ImageSize, MaxSize)
	case c.ImageSize%c.PatchSize != 0:
		return c, fmt.Errorf("image size %d is not a multiple of the patch size %d", c.ImageSize, c.PatchSize)
	case c.Merge <= 0 || c.Side()%c.Merge != 0:
		return c, fmt.Errorf("the %d-patch grid side does not pool by %d (clip.vision.projector.scale_factor)", c.Side(), c.Merge)
	case c.Hidden%c.Heads != 0:
		return c, fmt.Errorf("width %d does not split into %d heads", c.Hidden, c.Heads)
	}
	return c, nil
}

// loader fetches tensors, keeping the first error.
type loader struct {
	f   *gguf.File
	err error
}

// get returns the named tensor if its ggml shape is shape (innermost
// first).
func (ld *loader) get(name string, shape ...uint64) *Weight {
	if ld.err != nil {
		return nil
	}
	t, ok := ld.f.Tensor(name)
	if !ok {
		ld.err = fmt.Errorf("tensor %q is missing", name)
		return nil
	}
	if !slices.Equal(t.Shape, shape) || slices.Contains(shape, 0) {
		ld.err = fmt.Errorf("tensor %q has shape %v, but the clip.vision keys imply %v", name, t.Shape, shape)
		return nil
	}
	if !gguf.CanDequantize(t.Type) {
		ld.err = fmt.Errorf("tensor %q: type %v is not supported", name, t.Type)
		return nil
	}
	data, err := ld.f.Data(t)
	if err != nil {
		ld.err = err
		return nil
	}
	rows := 1
	for _, s := range shape[1:] {
		rows *= int(s)
	}
	return &Weight{Name: name, Type: t.Type, Rows: rows, Cols: int(shape[0]), Data: data}
}

// tensor returns a vector of n values (one dimension) or a matrix of rows
// rows of n (dims: rows).
func (ld *loader) tensor(name string, dims ...int) *Weight {
	shape := make([]uint64, len(dims))
	for i, d := range dims {
		shape[len(dims)-1-i] = uint64(d)
	}
	return ld.get(name, shape...)
}

// patch returns the patch embedding, a convolution [Hidden][3][P][P] (ggml
// [P, P, 3, Hidden]), as Hidden rows of 3·P² values.
func (ld *loader) patch(name string, c Config) *Weight {
	p := uint64(c.PatchSize)
	w := ld.get(name, p, p, 3, uint64(c.Hidden))
	if w != nil {
		w.Rows, w.Cols = c.Hidden, c.PatchWidth()
	}
	return w
}

// projection returns the projector's matrix, Hidden rows of however many
// values the language model takes.
func (ld *loader) projection(name string, hidden int) *Weight {
	if ld.err != nil {
		return nil
	}
	t, ok := ld.f.Tensor(name)
	if !ok || len(t.Shape) != 2 || t.Shape[0] == 0 {
		return ld.get(name, 0, uint64(hidden)) // the error names what is wrong
	}
	return ld.get(name, t.Shape[0], uint64(hidden))
}
