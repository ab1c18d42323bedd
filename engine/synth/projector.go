package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/hearthstudio/hearth/gguf"
)

// ProjectorPreset is the shape of a vision projector (mmproj) file: a
// SigLIP tower and Gemma 3's projector, as llama.cpp's converter writes
// them.
type ProjectorPreset struct {
	Name, Model string
	// ImageSize and PatchSize are the image's and a patch's sides, in
	// pixels; Merge is the side of the pool over the patch grid.
	ImageSize, PatchSize, Merge int
	Hidden, FF, Layers, Heads   int
	// TextHidden is the language model's width, the projection's output.
	TextHidden int
}

// ProjectorPresets are the projector shapes synth writes: a tiny one for
// tiny-gemma3 and the real Gemma 3 4B's.
func ProjectorPresets() []ProjectorPreset {
	return []ProjectorPreset{
		{Name: "tiny-gemma3-vision", Model: "test projector: SigLIP, 2 blocks, a 32-pixel image of 8×8 patches pooled to 4×4 tokens, for tiny-gemma3",
			ImageSize: 32, PatchSize: 4, Merge: 2, Hidden: 48, FF: 96, Layers: 2, Heads: 3, TextHidden: 128},
		{Name: "gemma-3-4b-vision", Model: "Gemma 3 4B's SigLIP-So400m: 27 blocks, 896-pixel images of 64×64 patches pooled to 256 tokens",
			ImageSize: 896, PatchSize: 14, Merge: 4, Hidden: 1152, FF: 4304, Layers: 27, Heads: 16, TextHidden: 2560},
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
	if p.ImageSize%p.PatchSize != 0 || (p.ImageSize/p.PatchSize)%p.Merge != 0 || p.Hidden%p.Heads != 0 {
		return fmt.Errorf("synth: projector %s: image %d, patch %d, merge %d and %d heads of %d do not fit", p.Name, p.ImageSize, p.PatchSize, p.Merge, p.Heads, p.Hidden)
	}
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
	side := p.ImageSize / p.PatchSize
	for _, kv := range []struct {
		key string
		v   gguf.Value
	}{
		{"general.architecture", gguf.ValueOf("clip")},
		{"general.name", gguf.ValueOf(p.Name)},
		{"general.description", gguf.ValueOf(p.Model)},
		{"clip.projector_type", gguf.ValueOf("gemma3")},
		{"clip.has_vision_encoder", gguf.ValueOf(true)},
		{"clip.use_gelu", gguf.ValueOf(true)},
		{"clip.vision.image_size", gguf.ValueOf(uint32(p.ImageSize))},
		{"clip.vision.patch_size", gguf.ValueOf(uint32(p.PatchSize))},
		{"clip.vision.embedding_length", gguf.ValueOf(uint32(p.Hidden))},
		{"clip.vision.feed_forward_length", gguf.ValueOf(uint32(p.FF))},
		{"clip.vision.projection_dim", gguf.ValueOf(uint32(p.TextHidden))},
		{"clip.vision.block_count", gguf.ValueOf(uint32(p.Layers))},
		{"clip.vision.attention.head_count", gguf.ValueOf(uint32(p.Heads))},
		{"clip.vision.attention.layer_norm_epsilon", gguf.ValueOf(float32(1e-6))},
		{"clip.vision.image_mean", gguf.ArrayOf([]float32{0.5, 0.5, 0.5})},
		{"clip.vision.image_std", gguf.ArrayOf([]float32{0.5, 0.5, 0.5})},
	} {
		if err := w.Set(kv.key, kv.v); err != nil {
			return err
		}
	}
	if p.Merge != 4 {
		// The converter writes the key only where it is not gemma3's 4.
		if err := w.SetUint32("clip.vision.projector.scale_factor", uint32(p.Merge)); err != nil {
			return err
		}
	}

	type tensor struct {
		name  string
		typ   gguf.Type
		shape []uint64 // ggml's, innermost first
		sigma float64
		mean  float64
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
