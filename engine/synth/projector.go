package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/hearthstudio/hearth/gguf"
)

// ProjectorPreset is the shape of a vision projector (mmproj) file, as
// llama.cpp's converter writes it: a SigLIP tower and Gemma 3's projector,
// or Gemma 4's tower (Type "gemma4v").
type ProjectorPreset struct {
	Name, Model string
	// Type is the projector type: "" for gemma3, or "gemma4v".
	Type string
	// ImageSize and PatchSize are the image's and a patch's sides, in
	// pixels; Merge is the side of the pool over the patch grid. Gemma 4's
	// towers take any grid of at most PositionSize patches a side.
	ImageSize, PatchSize, Merge int
	PositionSize                int
	Hidden, FF, Layers, Heads   int
	// TextHidden is the language model's width, the projection's output.
	TextHidden int
	// Clamps gives Gemma 4's products their input and output bounds (E2B
	// and E4B), Standardize its pooled tokens a bias and scale (26B, 31B).
	Clamps, Standardize bool
}

// ProjectorPresets are the projector shapes synth writes: a tiny one for
// tiny-gemma3 and the real Gemma 3 4B's.
func ProjectorPresets() []ProjectorPreset {
	return []ProjectorPreset{
		{Name: "tiny-gemma3-vision", Model: "test projector: SigLIP, 2 blocks, a 32-pixel image of 8×8 patches pooled to 4×4 tokens, for tiny-gemma3",
			ImageSize: 32, PatchSize: 4, Merge: 2, Hidden: 48, FF: 96, Layers: 2, Heads: 3, TextHidden: 128},
		{Name: "gemma-3-4b-vision", Model: "Gemma 3 4B's SigLIP-So400m: 27 blocks, 896-pixel images of 64×64 patches pooled to 256 tokens",
			ImageSize: 896, PatchSize: 14, Merge: 4, Hidden: 1152, FF: 4304, Layers: 27, Heads: 16, TextHidden: 2560},
		{Name: "tiny-gemma4-vision", Model: "test projector: Gemma 4's tower, 2 blocks of 32, 4-pixel patches pooled 3×3, clamps and standardisation, for tiny-gemma4",
			Type: "gemma4v", PatchSize: 4, Merge: 3, PositionSize: 64, Hidden: 32, FF: 64, Layers: 2, Heads: 2, TextHidden: 128, Clamps: true, Standardize: true},
		{Name: "gemma-4-e2b-vision", Model: "Gemma 4 E2B's vision tower: 16 blocks of 768, 16-pixel patches pooled 3×3, clamped products",
			Type: "gemma4v", PatchSize: 16, Merge: 3, PositionSize: 10240, Hidden: 768, FF: 3072, Layers: 16, Heads: 12, TextHidden: 1536, Clamps: true},
		{Name: "gemma-4-31b-vision", Model: "Gemma 4 31B's vision tower: 27 blocks of 1152, 16-pixel patches pooled 3×3, standardised tokens",
			Type: "gemma4v", PatchSize: 16, Merge: 3, PositionSize: 10240, Hidden: 1152, FF: 4304, Layers: 27, Heads: 16, TextHidden: 5376, Standardize: true},
	}
}

// ProjectorPresetByName finds a projector preset.
func ProjectorPresetByName(name string) (ProjectorPreset, bool) {
	for _, p := range ProjectorPresets() {
		if p.Name == name {
			return p, true
		}
	}
	return ProjectorPreset{}, false
}

// WriteProjector writes an mmproj file of preset p with random weights
// from seed: what convert_hf_to_gguf.py --mmproj writes for Gemma 3 at
// f16 (the matrices and the projection F16, the patch embedding, the
// positions, norms and biases F32). Matrices have unit-variance outputs
// for unit-variance inputs, norm gains spread around 1, biases and
// positions small, so that a tower that drops any of them is visibly off.
// It writes path+".tmp" and renames it once complete.
func WriteProjector(path string, p ProjectorPreset, seed uint64) (err error) {
	if p.Type == "gemma4v" {
		return writeGemma4Projector(path, p, seed)
	}
	if p.ImageSize%p.PatchSize != 0 || (p.ImageSize/p.PatchSize)%p.Merge != 0 || p.Hidden%p.Heads != 0 {
		return fmt.Errorf("synth: projector %s: image %d, patch %d, merge %d and %d heads of %d do not fit", p.Name, p.ImageSize, p.PatchSize, p.Merge, p.Heads, p.Hidden)
	}
	side := p.ImageSize / p.PatchSize
	kvs := []keyValue{
		{"clip.projector_type", gguf.ValueOf("gemma3")},
		{"clip.use_gelu", gguf.ValueOf(true)},
		{"clip.vision.image_size", gguf.ValueOf(uint32(p.ImageSize))},
		{"clip.vision.image_mean", gguf.ArrayOf([]float32{0.5, 0.5, 0.5})},
		{"clip.vision.image_std", gguf.ArrayOf([]float32{0.5, 0.5, 0.5})},
	}
	kvs = append(kvs, towerKeys(p)...)
	if p.Merge != 4 {
		// The converter writes the key only where it is not gemma3's 4.
		kvs = append(kvs, keyValue{"clip.vision.projector.scale_factor", gguf.ValueOf(uint32(p.Merge))})
	}
	d, ff, pw := uint64(p.Hidden), uint64(p.FF), uint64(3*p.PatchSize*p.PatchSize)
	matrix := func(name string, rows, cols uint64) tensor {
		return tensor{name, gguf.TypeF16, []uint64{cols, rows}, 1 / math.Sqrt(float64(cols)), 0}
	}
	gain := func(name string) tensor { return tensor{name, gguf.TypeF32, []uint64{d}, normSigma, 1} }
	bias := func(name string, n uint64) tensor { return tensor{name, gguf.TypeF32, []uint64{n}, biasSigma, 0} }
	ts := []tensor{
		{"v.patch_embd.weight", gguf.TypeF32, []uint64{uint64(p.PatchSize), uint64(p.PatchSize), 3, d}, 1 / math.Sqrt(float64(pw)), 0},
		bias("v.patch_embd.bias", d),
		{"v.position_embd.weight", gguf.TypeF32, []uint64{d, uint64(side * side)}, 0.1, 0},
	}
	for i := range p.Layers {
		b := func(s string) string { return fmt.Sprintf("v.blk.%d.%s", i, s) }
		ts = append(ts,
			gain(b("ln1.weight")), bias(b("ln1.bias"), d),
			matrix(b("attn_q.weight"), d, d), bias(b("attn_q.bias"), d),
			matrix(b("attn_k.weight"), d, d), bias(b("attn_k.bias"), d),
			matrix(b("attn_v.weight"), d, d), bias(b("attn_v.bias"), d),
			matrix(b("attn_out.weight"), d, d), bias(b("attn_out.bias"), d),
			gain(b("ln2.weight")), bias(b("ln2.bias"), d),
			matrix(b("ffn_up.weight"), ff, d), bias(b("ffn_up.bias"), ff),
			matrix(b("ffn_down.weight"), d, ff), bias(b("ffn_down.bias"), d),
		)
	}
	ts = append(ts, gain("v.post_ln.weight"), bias("v.post_ln.bias", d), gain("mm.soft_emb_norm.weight"),
		// transformers' mm_input_projection_weight [Hidden, TextHidden]: x·W.
		tensor{"mm.input_projection.weight", gguf.TypeF16, []uint64{uint64(p.TextHidden), d}, 1 / math.Sqrt(float64(d)), 0})
	return writeProjector(path, p, kvs, ts, seed)
}

// towerKeys are the keys every projector file of p has: its encoder's
// shape and the projection's width.
func towerKeys(p ProjectorPreset) []keyValue {
	return []keyValue{
		{"clip.has_vision_encoder", gguf.ValueOf(true)},
		{"clip.vision.patch_size", gguf.ValueOf(uint32(p.PatchSize))},
		{"clip.vision.embedding_length", gguf.ValueOf(uint32(p.Hidden))},
		{"clip.vision.feed_forward_length", gguf.ValueOf(uint32(p.FF))},
		{"clip.vision.projection_dim", gguf.ValueOf(uint32(p.TextHidden))},
		{"clip.vision.block_count", gguf.ValueOf(uint32(p.Layers))},
		{"clip.vision.attention.head_count", gguf.ValueOf(uint32(p.Heads))},
		{"clip.vision.attention.layer_norm_epsilon", gguf.ValueOf(float32(1e-6))},
	}
}

// keyValue is one metadata key of a projector file.
type keyValue struct {
	key string
	v   gguf.Value
}

// tensor is one tensor of a projector file and how its random values are
// drawn: mean + sigma·N(0, 1).
type tensor struct {
	name  string
	typ   gguf.Type
	shape []uint64 // ggml's, innermost first
	sigma float64
	mean  float64
}

// writeProjector writes the clip file of p's keys and tensors, the values
// drawn from seed, to path+".tmp", and renames it once complete.
func writeProjector(path string, p ProjectorPreset, kvs []keyValue, ts []tensor, seed uint64) (err error) {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
		}
	}()
	w := gguf.NewWriter(f)
	head := []keyValue{
		{"general.architecture", gguf.ValueOf("clip")},
		{"general.name", gguf.ValueOf(p.Name)},
		{"general.description", gguf.ValueOf(p.Model)},
	}
	for _, kv := range append(head, kvs...) {
		if err := w.Set(kv.key, kv.v); err != nil {
			return err
		}
	}
	for _, t := range ts {
		if err := w.AddTensor(t.name, t.typ, t.shape); err != nil {
			return err
		}
	}
	if err := w.WriteHeader(); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d6d70726f6a))
	for _, t := range ts {
		vals := make([]float32, elements(t.shape))
		for i := range vals {
			vals[i] = float32(t.mean + t.sigma*rng.NormFloat64())
		}
		size, _ := t.typ.RowSize(int64(len(vals)))
		data := make([]byte, size)
		if err := gguf.Quantize(t.typ, vals, data); err != nil {
			return fmt.Errorf("synth: %s: %w", t.name, err)
		}
		if err := w.WriteTensorBytes(t.name, data); err != nil {
			return err
		}
	}
	return w.Close()
}

// writeGemma4Projector writes Gemma 4's tower as llama.cpp's converter
// does (convert_hf_to_gguf.py's Gemma4VisionAudioModel at f16): the
// projector type under clip.vision, a placeholder image size, F16 matrices
// and patch embedding, F32 position tables, norms and one-value clamp
// tensors. The clamps sit 2.5 to 4 standard deviations out, so that a few
// values cross them; the standardisation's scales spread around 1.
func writeGemma4Projector(path string, p ProjectorPreset, seed uint64) error {
	if p.Hidden%p.Heads != 0 || (p.Hidden/p.Heads)%4 != 0 || p.PositionSize <= 0 || p.Merge <= 0 {
		return fmt.Errorf("synth: projector %s: %d heads of %d, %d positions and a pool of %d do not fit Gemma 4's tower", p.Name, p.Heads, p.Hidden, p.PositionSize, p.Merge)
	}
	kvs := []keyValue{
		{"clip.vision.projector_type", gguf.ValueOf("gemma4v")},
		{"clip.vision.image_size", gguf.ValueOf(uint32(224))}, // a placeholder: the grid follows the image
		{"clip.vision.image_mean", gguf.ArrayOf([]float32{0, 0, 0})},
		{"clip.vision.image_std", gguf.ArrayOf([]float32{1, 1, 1})},
	}
	kvs = append(kvs, towerKeys(p)...)
	if p.Merge != 3 {
		kvs = append(kvs, keyValue{"clip.vision.projector.scale_factor", gguf.ValueOf(uint32(p.Merge))})
	}
	d, ff, hd := uint64(p.Hidden), uint64(p.FF), uint64(p.Hidden/p.Heads)
	ps := uint64(p.PatchSize)
	matrix := func(name string, rows, cols uint64) tensor {
		return tensor{name, gguf.TypeF16, []uint64{cols, rows}, 1 / math.Sqrt(float64(cols)), 0}
	}
	gain := func(name string, n uint64) tensor { return tensor{name, gguf.TypeF32, []uint64{n}, normSigma, 1} }
	ts := []tensor{
		{"v.patch_embd.weight", gguf.TypeF16, []uint64{ps, ps, 3, d}, 1 / math.Sqrt(float64(3*ps*ps)), 0},
		{"v.position_embd.weight", gguf.TypeF32, []uint64{d, uint64(p.PositionSize), 2}, 0.1, 0},
	}
	for i := range p.Layers {
		b := func(s string) string { return fmt.Sprintf("v.blk.%d.%s", i, s) }
		ts = append(ts,
			gain(b("ln1.weight"), d), gain(b("attn_post_norm.weight"), d),
			gain(b("ln2.weight"), d), gain(b("ffn_post_norm.weight"), d),
			gain(b("attn_q_norm.weight"), hd), gain(b("attn_k_norm.weight"), hd),
			matrix(b("attn_q.weight"), d, d), matrix(b("attn_k.weight"), d, d),
			matrix(b("attn_v.weight"), d, d), matrix(b("attn_out.weight"), d, d),
			matrix(b("ffn_gate.weight"), ff, d), matrix(b("ffn_up.weight"), ff, d), matrix(b("ffn_down.weight"), d, ff))
		if p.Clamps {
			for _, l := range []string{"attn_q", "attn_k", "attn_v", "attn_out", "ffn_gate", "ffn_up", "ffn_down"} {
				for _, bound := range []struct {
					key  string
					mean float64
				}{{"input_min", -3.25}, {"input_max", 3.25}, {"output_min", -3.25}, {"output_max", 3.25}} {
					ts = append(ts, tensor{b(l + "." + bound.key), gguf.TypeF32, []uint64{1}, 0.25, bound.mean})
				}
			}
		}
	}
	if p.Standardize {
		ts = append(ts, tensor{"v.std_bias", gguf.TypeF32, []uint64{d}, 0.5, 0}, gain("v.std_scale", d))
	}
	ts = append(ts, matrix("mm.input_projection.weight", uint64(p.TextHidden), d))
	return writeProjector(path, p, kvs, ts, seed)
}
