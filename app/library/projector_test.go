package library

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/ggufedit"
)

// The projectors TestMain writes: tinyVision fits tiny-gemma3 (it projects
// to 128, tiny-gemma3's width), tinyVisionNarrow projects to 64 and fits
// no test model.
var tinyVision, tinyVisionNarrow string

func writeProjectors(dir string) error {
	p, ok := synth.ProjectorPresetByName("tiny-gemma3-vision")
	if !ok {
		return errors.New("no projector preset tiny-gemma3-vision")
	}
	narrow := p
	narrow.Name, narrow.TextHidden = "tiny-narrow-vision", 64
	tinyVision = filepath.Join(dir, p.Name+".gguf")
	tinyVisionNarrow = filepath.Join(dir, narrow.Name+".gguf")
	return errors.Join(synth.WriteProjector(tinyVision, p, 1), synth.WriteProjector(tinyVisionNarrow, narrow, 2))
}

// projectionTensor is the projection matrix pairing reads the width of.
const projectionTensor = "mm.input_projection.weight"

// writeProjectorHeader writes a projector reduced to what pairing reads: a
// projection width wide, of type typ, and general.file_type when
// fileType >= 0.
func writeProjectorHeader(t *testing.T, path string, width int, typ gguf.Type, fileType int) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	shape := []uint64{uint64(width), 48}
	size, ok := typ.RowSize(int64(width * 48))
	if !ok {
		t.Fatalf("%d values of %v are no whole blocks", width*48, typ)
	}
	w := gguf.NewWriter(f)
	errs := []error{w.SetString("general.architecture", "clip"), w.SetString("clip.projector_type", "gemma3")}
	if fileType >= 0 {
		errs = append(errs, w.SetUint32("general.file_type", uint32(fileType)))
	}
	errs = append(errs,
		w.AddTensor(projectionTensor, typ, shape),
		w.WriteTensorBytes(projectionTensor, make([]byte, size)),
		w.Close())
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestProjectorPairing pairs tiny-gemma3 in a folder with the projectors
// beside it, through ProjectorFor and through a scan of the folder.
func TestProjectorPairing(t *testing.T) {
	match, err := os.ReadFile(tinyVision)
	if err != nil {
		t.Fatal(err)
	}
	const (
		f32Key    = "f32 by general.file_type"
		q8Name    = "q8_0 by its name"
		truncData = "truncated in its data"
		truncHead = "truncated in its header"
		text      = "not GGUF"
	)
	tests := []struct {
		name  string
		model string            // the model's file name; "" is gemma.gguf
		files map[string]string // file name: tinyVision, tinyVisionNarrow, a model, or one of the consts
		want  string            // the file paired; "" for none
	}{
		{name: "one beside", files: map[string]string{"mmproj-model-f16.gguf": tinyVision}, want: "mmproj-model-f16.gguf"},
		{name: "the model's width over another model's", model: "gemma-3-4b-it.gguf",
			files: map[string]string{"gemma-3-4b-it-mmproj-f16.gguf": tinyVisionNarrow, "mmproj-f16.gguf": tinyVision}, want: "mmproj-f16.gguf"},
		{name: "another model's only", files: map[string]string{"mmproj-f16.gguf": tinyVisionNarrow}},
		// tinyVision has no general.file_type, and its name no type: the
		// most weights are F16.
		{name: "F16 over F32 over quantized",
			files: map[string]string{"mmproj-a.gguf": f32Key, "mmproj-b-q8_0.gguf": q8Name, "mmproj-c.gguf": tinyVision}, want: "mmproj-c.gguf"},
		{name: "F32 over quantized", files: map[string]string{"mmproj-a-q8_0.gguf": q8Name, "mmproj-b.gguf": f32Key}, want: "mmproj-b.gguf"},
		{name: "the longest shared prefix", model: "gemma-3-4b-it-Q4_K_M.gguf",
			files: map[string]string{"mmproj-f16.gguf": tinyVision, "gemma-3-4b-it-mmproj-f16.gguf": tinyVision}, want: "gemma-3-4b-it-mmproj-f16.gguf"},
		{name: "then the first name", files: map[string]string{"mmproj-b.gguf": tinyVision, "mmproj-a.gguf": tinyVision}, want: "mmproj-a.gguf"},
		{name: "a truncated one passed over", files: map[string]string{"mmproj-a-f16.gguf": truncData, "mmproj-b-f16.gguf": tinyVision}, want: "mmproj-b-f16.gguf"},
		{name: "truncated in its data", files: map[string]string{"mmproj-f16.gguf": truncData}},
		{name: "truncated in its header", files: map[string]string{"mmproj-f16.gguf": truncHead}},
		{name: "not GGUF", files: map[string]string{"mmproj-f16.gguf": text}},
		{name: "a language model named mmproj", files: map[string]string{"mmproj-f16.gguf": tinyQwen.path}},
		{name: "not .gguf", files: map[string]string{"mmproj-f16.bin": tinyVision}},
		{name: "no projector", files: map[string]string{"other.gguf": tinyQwen.path}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, cmpOr(tt.model, "gemma.gguf"))
			place(t, tinyGemma.path, model)
			for name, src := range tt.files {
				path := filepath.Join(dir, name)
				switch src {
				case f32Key:
					writeProjectorHeader(t, path, tinyGemma.embedding, gguf.TypeF32, 0) // 0: ALL_F32
				case q8Name:
					writeProjectorHeader(t, path, tinyGemma.embedding, gguf.TypeF32, -1)
				case truncData:
					write(t, path, match[:len(match)/2])
				case truncHead:
					write(t, path, match[:100])
				case text:
					write(t, path, []byte("not weights\n"))
				default:
					place(t, src, path)
				}
			}
			want := ""
			if tt.want != "" {
				want = filepath.Join(dir, tt.want)
			}

			got, err := ProjectorFor(model)
			if err != nil || got != want {
				t.Errorf("ProjectorFor: %q, %v; want %q", got, err, want)
			}
			var models []Entry
			for _, e := range Scan(Roots{Folders: []string{dir}}) {
				if e.Path == model {
					models = append(models, e)
				} else if isProjector(e.Name) {
					t.Errorf("projector %s listed as a model", e.Name)
				}
			}
			if len(models) != 1 || models[0].Err != "" || models[0].Projector != want {
				t.Errorf("scan: %+v, want the model with projector %q", models, want)
			}
		})
	}
}

// TestProjectorForErrors: a model ProjectorFor cannot read is an error; a
// model that pairs with nothing is not.
func TestProjectorForErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ProjectorFor(filepath.Join(dir, "nope.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing model: %v, want ErrNotExist", err)
	}
	notes := filepath.Join(dir, "notes.gguf")
	write(t, notes, []byte("not weights\n"))
	place(t, tinyVision, filepath.Join(dir, "mmproj-f16.gguf"))
	if p, err := ProjectorFor(notes); err == nil || p != "" {
		t.Errorf("a file that is not GGUF: %q, %v; want an error", p, err)
	}
	// A projector given as the model has no width of a language model.
	if p, err := ProjectorFor(filepath.Join(dir, "mmproj-f16.gguf")); err != nil || p != "" {
		t.Errorf("a projector: %q, %v; want none", p, err)
	}
	// tinyQwen's folder holds no projector.
	if p, err := ProjectorFor(tinyQwen.path); err != nil || p != "" {
		t.Errorf("a model without projectors: %q, %v; want none", p, err)
	}
}

// TestProjectorInStores pairs models and projectors as each store lays
// them out, and resolves the names to their projectors.
func TestProjectorInStores(t *testing.T) {
	base := t.TempDir()

	// The Hugging Face cache: the snapshot's files link into blobs/.
	hf := filepath.Join(base, "hf")
	repo := filepath.Join(hf, "models--google--gemma-3-4b-it-GGUF")
	place(t, tinyGemma.path, filepath.Join(repo, "blobs", "gemmablob"))
	place(t, tinyVision, filepath.Join(repo, "blobs", "projblob"))
	write(t, filepath.Join(repo, "refs", "main"), []byte("c1"))
	snap := filepath.Join(repo, "snapshots", "c1")
	hfModel, hfProj := filepath.Join(snap, "gemma-3-4b-it-Q4_K_M.gguf"), filepath.Join(snap, "mmproj-model-f16.gguf")
	symlink(t, "../../blobs/gemmablob", hfModel)
	symlink(t, "../../blobs/projblob", hfProj)

	// LM Studio: a repository with its projector, and one whose model is
	// narrower than the projector beside it.
	lm := filepath.Join(base, "lmstudio")
	lmModel := filepath.Join(lm, "lmstudio-community", "gemma-3-4b-it-GGUF", "gemma-3-4b-it-Q4_K_M.gguf")
	lmProj := filepath.Join(lm, "lmstudio-community", "gemma-3-4b-it-GGUF", "mmproj-model-f16.gguf")
	place(t, tinyGemma.path, lmModel)
	place(t, tinyVision, lmProj)
	place(t, tinyQwen.path, filepath.Join(lm, "pub", "qwen-GGUF", "qwen-q8_0.gguf"))
	place(t, tinyVision, filepath.Join(lm, "pub", "qwen-GGUF", "mmproj-f16.gguf"))

	// Ollama: a manifest with a projector layer, one whose projector blob
	// is missing, and one without.
	oll := filepath.Join(base, "ollama")
	gemmaHex, projHex, qwenHex := fileDigest(t, tinyGemma.path), fileDigest(t, tinyVision), fileDigest(t, tinyQwen.path)
	ollGemma, ollProj := filepath.Join(oll, "blobs", "sha256-"+gemmaHex), filepath.Join(oll, "blobs", "sha256-"+projHex)
	place(t, tinyGemma.path, ollGemma)
	place(t, tinyVision, ollProj)
	place(t, tinyQwen.path, filepath.Join(oll, "blobs", "sha256-"+qwenHex))
	gemmaLayer := layer{ollamaModel, "sha256:" + gemmaHex, tinyGemma.size}
	manifest(t, oll, "registry.ollama.ai/library/gemma3/4b", gemmaLayer, layer{ollamaProjector, "sha256:" + projHex, 0})
	manifest(t, oll, "registry.ollama.ai/library/gemma3/pruned", gemmaLayer, layer{ollamaProjector, "sha256:" + strings.Repeat("cd", 32), 0})
	manifest(t, oll, "registry.ollama.ai/library/qwen/latest", layer{ollamaModel, "sha256:" + qwenHex, tinyQwen.size})

	roots := Roots{Ollama: oll, HFCache: hf, LMStudio: []string{lm}}
	lib := New(roots)
	wants := map[string]want{
		"google/gemma-3-4b-it-GGUF:gemma-3-4b-it-Q4_K_M.gguf":             {source: SourceHuggingFace, path: hfModel, model: &tinyGemma, proj: hfProj},
		"lmstudio-community/gemma-3-4b-it-GGUF/gemma-3-4b-it-Q4_K_M.gguf": {source: SourceLMStudio, path: lmModel, model: &tinyGemma, proj: lmProj},
		"pub/qwen-GGUF/qwen-q8_0.gguf":                                    {source: SourceLMStudio, model: &tinyQwen},
		"gemma3:4b":                                                       {source: SourceOllama, path: ollGemma, model: &tinyGemma, proj: ollProj},
		"gemma3:pruned":                                                   {source: SourceOllama, path: ollGemma, model: &tinyGemma},
		"qwen:latest":                                                     {source: SourceOllama, model: &tinyQwen},
	}
	entries := lib.Scan()
	if len(entries) != len(wants) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name)
		}
		t.Errorf("listed %q, want %d models", names, len(wants))
	}
	for _, e := range entries {
		w, ok := wants[e.Name]
		if !ok {
			t.Errorf("unexpected entry %q (%s)", e.Name, e.Path)
			continue
		}
		checkEntry(t, e, w)
	}

	// A name resolves to its projector; a path to the one beside it.
	for name, w := range wants {
		e, err := lib.ResolveName(name)
		if err != nil || e.Projector != w.proj {
			t.Errorf("ResolveName(%q): projector %q, %v; want %q", name, e.Projector, err, w.proj)
		}
		p, err := lib.Projector(name)
		if err != nil || p != w.proj {
			t.Errorf("Projector(%q): %q, %v; want %q", name, p, err, w.proj)
		}
	}
	if e, err := lib.Resolve(lmModel); err != nil || e.Projector != lmProj {
		t.Errorf("Resolve(%s): projector %q, %v; want %q", lmModel, e.Projector, err, lmProj)
	}
	if _, err := lib.Projector("gemma3:27b"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Projector of an unknown name: %v, want ErrUnknown", err)
	}
	// Ollama's blobs have no names to pair by; the manifest pairs them.
	if p, err := ProjectorFor(ollGemma); err != nil || p != "" {
		t.Errorf("ProjectorFor(an Ollama blob): %q, %v; want none", p, err)
	}
	if p, err := ProjectorFor(hfModel); err != nil || p != hfProj {
		t.Errorf("ProjectorFor(%s): %q, %v; want %q", hfModel, p, err, hfProj)
	}

	// A projector deleted between scans is paired no more.
	if err := os.Remove(lmProj); err != nil {
		t.Fatal(err)
	}
	for _, e := range lib.Scan() {
		if e.Path == lmModel && e.Projector != "" {
			t.Errorf("%s: projector %q after it was deleted", e.Name, e.Projector)
		}
	}
}

func TestProjectorPrecision(t *testing.T) {
	for _, tt := range []struct {
		typ  string
		want int
	}{
		{"F16", halfPrecision}, {"bf16", halfPrecision}, {"F32", fullPrecision},
		{"Q8_0", quantized}, {"q4_k_m", quantized}, {"IQ4_XS", quantized}, {"TQ1_0", quantized},
		{"mmproj", unknownPrecision}, {"model", unknownPrecision}, {"", unknownPrecision}, {"qwen", unknownPrecision},
	} {
		if got := precisionOf(tt.typ); got != tt.want {
			t.Errorf("precisionOf(%q) = %d, want %d", tt.typ, got, tt.want)
		}
	}
}

// TestProjectorOnlyForItsFamily: a projector of the right width beside a
// model of another architecture, or one of another type (llava's) beside
// a Gemma 3 model, is not paired: Hearth would show the model no images. A
// Gemma 4 model pairs with a Gemma 4 projector (its projection stored the
// other way round) and with no Gemma 3 one, though both are as wide.
func TestProjectorOnlyForItsFamily(t *testing.T) {
	dir := t.TempDir()
	llama := filepath.Join(dir, "llama.gguf")
	place(t, tinyLlama.path, llama)
	writeProjectorHeader(t, filepath.Join(dir, "mmproj-f16.gguf"), tinyLlama.embedding, gguf.TypeF16, 1)
	if got, err := ProjectorFor(llama); got != "" || err != nil {
		t.Errorf("a llama model paired with %q (%v)", got, err)
	}

	dir = t.TempDir()
	gemma := filepath.Join(dir, "gemma.gguf")
	place(t, tinyGemma.path, gemma)
	good := filepath.Join(t.TempDir(), "good.gguf")
	writeProjectorHeader(t, good, tinyGemma.embedding, gguf.TypeF16, 1)
	ggufedit.Rewrite(t, good, filepath.Join(dir, "mmproj-llava-f16.gguf"), map[string]gguf.Value{"clip.projector_type": gguf.ValueOf("mlp")}, nil, nil)
	if got, err := ProjectorFor(gemma); got != "" || err != nil {
		t.Errorf("a gemma3 model paired with a llava projector %q (%v)", got, err)
	}

	// Gemma 4 beside Gemma 3's projector, then beside its own.
	dir = t.TempDir()
	g4 := filepath.Join(dir, "gemma4.gguf")
	mp, _ := synth.PresetByName("tiny-gemma4")
	if err := synth.WriteFile(g4, mp, synth.Options{Quant: "F32", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	pp, _ := synth.ProjectorPresetByName("tiny-gemma4-vision")
	if pp.TextHidden != tinyGemma.embedding || mp.Hidden != tinyGemma.embedding {
		t.Fatalf("the tiny Gemma 4 model and projector are %d and %d wide, the tiny Gemma 3 %d: the test needs them alike", mp.Hidden, pp.TextHidden, tinyGemma.embedding)
	}
	place(t, tinyVision, filepath.Join(dir, "mmproj-gemma3-f16.gguf"))
	if got, err := ProjectorFor(g4); got != "" || err != nil {
		t.Errorf("a gemma4 model paired with Gemma 3's projector %q (%v)", got, err)
	}
	own := filepath.Join(dir, "mmproj-gemma4-f16.gguf")
	if err := synth.WriteProjector(own, pp, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := ProjectorFor(g4); got != own || err != nil {
		t.Errorf("a gemma4 model paired with %q (%v), want %s", got, err, own)
	}
}
