package library

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Ollama's layer media types. The store holds one GGUF per model, the model
// layer; the others are what a Modelfile adds. A vision model's projector
// is not a language model and is not listed: it is the model's Projector.
const (
	ollamaModel     = "application/vnd.ollama.image.model"
	ollamaAdapter   = "application/vnd.ollama.image.adapter"
	ollamaTemplate  = "application/vnd.ollama.image.template"
	ollamaSystem    = "application/vnd.ollama.image.system"
	ollamaParams    = "application/vnd.ollama.image.params"
	ollamaProjector = "application/vnd.ollama.image.projector"
)

// ollamaRegistry is the host of Ollama's own registry, which its names leave
// out: registry.ollama.ai/library/gemma3/1b is gemma3:1b.
const ollamaRegistry = "registry.ollama.ai"

// ollamaMaxManifest bounds what is read of a manifest: a real one is under
// 2 KB, so anything far larger is not a manifest and is not read whole.
const ollamaMaxManifest = 1 << 20

// ollamaDigest is a layer digest: sha256 and 64 hex digits. The manifest
// writes "sha256:HEX", the blob file is named "sha256-HEX" (or
// "sha256:HEX" by Ollama before 0.1.34, and still where the file system
// allows colons); nothing else becomes part of a path.
var ollamaDigest = regexp.MustCompile(`^sha256[:-]([0-9a-fA-F]{64})$`)

// errMissingBlob is wrapped by ollamaBlob's error for a digest that has no
// file: what `ollama pull` repairs.
var errMissingBlob = errors.New("missing")

type ollamaManifest struct {
	Layers []ollamaLayer `json:"layers"`
}

type ollamaLayer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// scanOllama lists the models of the Ollama store at root: one per manifest
// at manifests/HOST/NAMESPACE/MODEL/TAG.
func scanOllama(root string) []Entry {
	if root == "" {
		return nil
	}
	dir := filepath.Join(root, "manifests")
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // no Ollama here
		}
		return []Entry{unreadable(SourceOllama, dir, err)}
	}
	var entries []Entry
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			entries = append(entries, unreadable(SourceOllama, path, err))
			return nil // WalkDir skips the folder and goes on
		}
		if strings.HasPrefix(d.Name(), ".") && path != dir {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil // .DS_Store and the like
		}
		rel, _ := filepath.Rel(dir, path)
		elems := strings.Split(filepath.ToSlash(rel), "/")
		if d.IsDir() {
			if len(elems) >= 4 {
				return fs.SkipDir // deeper than a tag: not Ollama's layout
			}
			return nil
		}
		if len(elems) == 4 {
			entries = append(entries, ollamaEntry(root, path, elems))
		}
		return nil
	})
	return entries
}

// ollamaName is the name Ollama shows for the manifest at
// HOST/NAMESPACE/MODEL/TAG.
func ollamaName(elems []string) string {
	host, ns, model, tag := elems[0], elems[1], elems[2], elems[3]
	switch {
	case strings.EqualFold(host, ollamaRegistry) && ns == "library":
		return model + ":" + tag
	case strings.EqualFold(host, ollamaRegistry):
		return ns + "/" + model + ":" + tag
	}
	return host + "/" + ns + "/" + model + ":" + tag
}

// ollamaEntry reads one manifest. Every way it can be broken (not JSON, no
// model layer, a blob missing or of the wrong size) is the entry's Err.
func ollamaEntry(root, manifestPath string, elems []string) Entry {
	e := Entry{Name: ollamaName(elems), Path: manifestPath, Source: SourceOllama}
	m, err := readOllamaManifest(manifestPath)
	if err != nil {
		e.Err = err.Error()
		return e
	}
	e.Ollama = &OllamaLayers{}
	var model *ollamaLayer
	for i, l := range m.Layers {
		switch l.MediaType {
		case ollamaModel:
			if model == nil {
				model = &m.Layers[i]
			}
		case ollamaTemplate:
			e.Ollama.Template, _ = ollamaBlob(root, l.Digest)
		case ollamaSystem:
			e.Ollama.System, _ = ollamaBlob(root, l.Digest)
		case ollamaParams:
			e.Ollama.Params, _ = ollamaBlob(root, l.Digest)
		case ollamaAdapter:
			if p, err := ollamaBlob(root, l.Digest); err == nil {
				e.Ollama.Adapters = append(e.Ollama.Adapters, p)
			}
		case ollamaProjector:
			// A projector blob that is missing leaves the model usable,
			// for text.
			if p, err := ollamaBlob(root, l.Digest); err == nil && e.Projector == "" {
				e.Projector = p
			}
		}
	}
	if model == nil {
		e.Err = fmt.Sprintf("%s: the manifest has no model layer (%s)", manifestPath, ollamaModel)
		return e
	}
	blob, err := ollamaBlob(root, model.Digest)
	if err != nil {
		e.Err = fmt.Sprintf("%s: model layer: %v", manifestPath, err)
		if errors.Is(err, errMissingBlob) {
			e.Err += fmt.Sprintf(" (`ollama pull %s` fetches it again)", e.Name)
		}
		return e
	}
	e.Path = blob
	st, err := os.Stat(blob)
	if err != nil {
		e.Err = err.Error()
		return e
	}
	e.Size = st.Size()
	// Ollama checks digests when it pulls; hashing gigabytes on every scan
	// would make listing slow, so only the size, which an interrupted copy
	// gets wrong, is checked.
	if model.Size > 0 && model.Size != e.Size {
		e.Err = fmt.Sprintf("%s: %d bytes, but the manifest says %d (a pull that did not finish?)", blob, e.Size, model.Size)
		return e
	}
	if len(e.Ollama.Adapters) > 0 {
		// Running the base model alone would answer as a different model
		// than the one the user picked.
		e.Err = fmt.Sprintf("%s: the model applies a LoRA adapter (%s), which Hearth does not load yet", manifestPath, ollamaAdapter)
	}
	return e
}

func readOllamaManifest(path string) (*ollamaManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, ollamaMaxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > ollamaMaxManifest {
		return nil, fmt.Errorf("%s: over %d bytes: not an Ollama manifest", path, ollamaMaxManifest)
	}
	var m ollamaManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not an Ollama manifest: %w", path, err)
	}
	return &m, nil
}

// ollamaBlob is the file of a layer digest under root/blobs, under either
// name the store has used.
func ollamaBlob(root, digest string) (string, error) {
	m := ollamaDigest.FindStringSubmatch(digest)
	if m == nil {
		return "", fmt.Errorf("digest %q is not sha256:<64 hex digits>", digest)
	}
	hex := strings.ToLower(m[1])
	var first string
	for _, name := range []string{"sha256-" + hex, "sha256:" + hex} {
		p := filepath.Join(root, "blobs", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if first == "" {
			first = p
		}
	}
	return "", fmt.Errorf("blob %s is %w", first, errMissingBlob)
}
