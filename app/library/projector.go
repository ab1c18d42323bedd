package library

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/engine/vision"
	"github.com/hearthstudio/hearth/gguf"
)

// A model that sees images (Gemma 3, Gemma 4) comes, in llama.cpp's layout, as two
// GGUF files: the language model, and a vision projector (mmproj) holding
// the image encoder and the projection of its output into the model's
// embeddings. Repositories put the projector beside the model files it
// serves, often beside several quantizations of the model and several of
// the projector (mmproj-model-f16.gguf, mmproj-F32.gguf), and a folder of
// the user's may hold the projectors of other models too. The projection
// decides what belongs together: a projector whose output is not the
// model's width would feed it vectors of the wrong size.

// A projector pairs only with models of the architecture its type feeds
// (vision.ReadHeader): one of the right width beside a model of another
// architecture is not paired with it.

// The precisions of a projector, best first. F16 (or BF16) is what
// convert_hf_to_gguf.py writes by default and what the vision tower is
// trained in; F32 gives the same results from twice the bytes; a quantized
// encoder is smaller but sees less exactly.
const (
	halfPrecision = iota
	fullPrecision
	quantized
	unknownPrecision
)

// quantToken matches a llama.cpp quantization as a file name spells it:
// q8_0, q4_k_m, iq4_xs, tq1_0.
var quantToken = regexp.MustCompile(`^[it]?q[0-9]`)

// projectorHeader is what pairing reads of a projector's header.
type projectorHeader struct {
	arch      string // the architecture of the models it feeds
	width     int    // the language model width it projects to
	precision int    // halfPrecision … unknownPrecision
}

// projectorRead is a projector header as the library remembers it: read,
// or why it could not be.
type projectorRead struct {
	header projectorHeader
	err    error
}

// ProjectorFor is the vision projector beside the model at modelPath: a
// GGUF file in the same folder whose name contains "mmproj" and whose
// projection is the model's width, chosen as a scan chooses it (see
// Entry.Projector). It is "" with no error when there is none, as for a
// model in Ollama's store, whose blobs hold no names; a name resolved by a
// Library gives the projector an Ollama manifest names (Library.Projector).
// The error is for a model whose header cannot be read.
func ProjectorFor(modelPath string) (string, error) {
	f, err := gguf.Open(modelPath)
	if err != nil {
		return "", err // gguf's errors name the file
	}
	info := headerInfo(f)
	f.Close()
	return pairProjector(modelPath, info.Arch, info.Embedding, readProjector)
}

// Projector is the vision projector of the model called name, as
// ResolveName finds the model (and with its errors): "" for a model that
// sees no images. It takes the same names ResolveName does and never a
// path, so a server can hand it to the engine beside ResolveName.
func (l *Library) Projector(name string) (string, error) {
	e, err := l.ResolveName(name)
	if err != nil {
		return "", err
	}
	return e.Projector, nil
}

// pairProjector is the projector beside the model at modelPath whose
// projection is width wide, "" for none. Of several, it prefers the better
// precision, then the name sharing the longest prefix with the model's
// (gemma-3-4b-it-mmproj.gguf for gemma-3-4b-it-Q4_K_M.gguf), then the
// first name. read reads a candidate's header; one it cannot read (a
// download that did not finish, a projector of a kind Hearth lacks) is
// passed over.
func pairProjector(modelPath, arch string, width int, read func(path string) (projectorHeader, error)) (string, error) {
	if width <= 0 || !vision.SeesImages(arch) {
		return "", nil // a model without a known width, or one Hearth shows no images
	}
	dir := filepath.Dir(modelPath)
	ents, err := os.ReadDir(dir)
	if err != nil && len(ents) == 0 {
		return "", fmt.Errorf("cannot read the folder of %s: %w", modelPath, err)
	}
	model := strings.ToLower(filepath.Base(modelPath))
	type candidate struct {
		path, name        string
		precision, prefix int
	}
	var found []candidate
	for _, d := range ents {
		name := d.Name()
		if strings.HasPrefix(name, ".") || !isGGUFName(name) || !isProjector(name) || d.IsDir() || strings.ToLower(name) == model {
			continue
		}
		path := filepath.Join(dir, name)
		h, err := read(path)
		if err != nil || h.width != width || h.arch != arch {
			continue
		}
		found = append(found, candidate{path, name, h.precision, commonPrefix(model, strings.ToLower(name))})
	}
	if len(found) == 0 {
		return "", nil
	}
	best := slices.MinFunc(found, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.precision, b.precision), cmp.Compare(b.prefix, a.prefix), strings.Compare(a.name, b.name))
	})
	return best.path, nil
}

// readProjector reads the header of the projector at path.
func readProjector(path string) (projectorHeader, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return projectorHeader{}, err
	}
	defer f.Close()
	_, arch, width, err := vision.ReadHeader(f)
	if err != nil {
		return projectorHeader{}, fmt.Errorf("%s: %w", path, err)
	}
	return projectorHeader{arch: arch, width: width, precision: projectorPrecision(f, filepath.Base(path))}, nil
}

// readProjector is readProjector of a file the library has not read at
// this size and modification time: a folder of five quantizations and one
// projector pairs each of the five with it.
func (l *Library) readProjector(path string) (projectorHeader, error) {
	st, err := os.Stat(path)
	if err != nil {
		return projectorHeader{}, err
	}
	key := fileKey{path, st.Size(), st.ModTime()}
	l.mu.Lock()
	r, ok := l.projectors[key]
	l.mu.Unlock()
	if !ok {
		r.header, r.err = readProjector(path)
		l.mu.Lock()
		l.projectors[key] = r
		l.mu.Unlock()
	}
	return r.header, r.err
}

// projectorPrecision ranks a projector's precision by its general.file_type,
// else by its file name (mmproj-model-f16.gguf), else by the type that
// holds the most weights.
func projectorPrecision(f *gguf.File, name string) int {
	if _, ok := f.FileType(); ok {
		return precisionOf(quantName(f))
	}
	stem := strings.TrimSuffix(strings.ToLower(name), filepath.Ext(name))
	for _, tok := range strings.FieldsFunc(stem, func(r rune) bool { return r == '-' || r == '.' }) {
		if p := precisionOf(tok); p != unknownPrecision {
			return p
		}
	}
	return precisionOf(quantName(f))
}

// precisionOf ranks a type as quantName or a file name spells it.
func precisionOf(typ string) int {
	switch t := strings.ToLower(typ); {
	case t == "f16" || t == "bf16":
		return halfPrecision
	case t == "f32":
		return fullPrecision
	case quantToken.MatchString(t):
		return quantized
	}
	return unknownPrecision
}

// commonPrefix is the length of the longest prefix a and b share.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
