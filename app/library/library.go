// Package library finds the GGUF language models already on the machine, in
// the places other tools keep them, without copying a byte: the Ollama store,
// the Hugging Face hub cache, LM Studio's models folder, Hearth's own models
// and adapters folders, and any folder the user adds. The studio and every
// command scan the same roots, so a model one of them writes, the other
// finds. Each model becomes an Entry with the name the user types
// (gemma3:1b, Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q4_k_m.gguf),
// the file to load, and what its GGUF header says (architecture, parameters,
// quantization, context, a GPU memory estimate).
//
// A model that sees images has a vision projector: llama.cpp's mmproj GGUF
// file beside it, or the projector layer of its Ollama manifest. The
// projector is not listed; it is the Projector of the models it fits.
//
// LoRA adapters (a GGUF file with general.type = adapter, a PEFT folder)
// found in the same places are listed apart from the models, each with the
// architecture it adapts and the library's models it fits.
//
// A store is often half-written: a pull that was interrupted, a manifest
// whose blob was pruned, a file another tool is still downloading. Such a
// model is listed with Err saying what is wrong, and the scan goes on; Scan
// never fails as a whole.
//
// Resolve turns what the user typed into an Entry, accepting a path as well
// as a name; ResolveName accepts names only and never opens a path built
// from its argument, so that a name from an HTTP request cannot reach a file
// outside the scanned set.
package library

import (
	"cmp"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hearthstudio/hearth/app/download"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/engine/vision"
)

// The sources an Entry can come from.
const (
	SourceOllama      = "ollama"
	SourceHuggingFace = "huggingface"
	SourceLMStudio    = "lmstudio"
	SourceHearth      = "hearth" // Hearth's own models and adapters folders
	SourceFolder      = "folder"
	SourceFile        = "file" // a path given to Resolve
)

// Roots are the places a scan looks. An empty or missing root is skipped
// quietly: most machines have one tool or none.
type Roots struct {
	Ollama   string   // the Ollama store: manifests/ and blobs/
	HFCache  string   // the Hugging Face hub cache: models--OWNER--REPO/
	LMStudio []string // LM Studio models folders: PUBLISHER/REPO/FILE.gguf
	// Hearth are Hearth's own folders: where the studio makes models and
	// training writes adapters (HearthFolders). Scanned as user folders are.
	Hearth  []string
	Folders []string // folders the user added, scanned recursively
}

// HearthFolders are the folders Hearth writes into, under its config folder
// dir (settings.Dir): models/, where the studio makes the models it offers
// to a new user, and adapters/, where the Tune tab writes what it trains.
func HearthFolders(dir string) []string {
	return []string{filepath.Join(dir, "models"), filepath.Join(dir, "adapters")}
}

// DefaultRoots are where the tools keep their models by default, after the
// environment variables each tool honours: OLLAMA_MODELS for Ollama; for the
// Hugging Face cache the folder hearth pull and huggingface_hub download to
// (HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub); Hearth's own folders in its config folder
// (XDG_CONFIG_HOME/hearth, else ~/.config/hearth on Linux). It adds no user
// folders.
func DefaultRoots() Roots {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "" // no home: only the environment variables name roots
	}
	r := Roots{Ollama: os.Getenv("OLLAMA_MODELS"), HFCache: download.DefaultCacheDir()}
	if home != "" {
		if r.Ollama == "" {
			r.Ollama = filepath.Join(home, ".ollama", "models")
		}
		// LM Studio 0.3 moved its models from ~/.cache/lm-studio to
		// ~/.lmstudio; machines upgraded from older versions still have
		// the first.
		r.LMStudio = []string{
			filepath.Join(home, ".lmstudio", "models"),
			filepath.Join(home, ".cache", "lm-studio", "models"),
		}
	}
	if dir, err := settings.Dir(); err == nil {
		r.Hearth = HearthFolders(dir)
	}
	return r
}

// Entry is one model found on the machine.
type Entry struct {
	// Name is what the user types: NAME:TAG for the Ollama library,
	// OWNER/REPO:FILE for the Hugging Face cache, PUBLISHER/REPO/FILE.gguf
	// for LM Studio, the file's base name for a user folder.
	Name string
	// Path is the GGUF file (for a split model, its first part). An entry
	// that has no file to give (a broken Ollama manifest) names the file that
	// describes it instead.
	Path   string
	Source string // one of the Source constants
	Size   int64  // bytes on disk, of every part of a split model
	// Parts is the number of files of a split GGUF (NAME-00001-of-00003.gguf),
	// 0 for a single file.
	Parts int
	// Info is what the GGUF header says; nil when it could not be read.
	Info *Info
	// Projector is the vision projector (an mmproj GGUF file) that lets the
	// model see images; "" for a text-only model. For an Ollama model it is
	// the blob of the manifest's projector layer, when the blob is there.
	// Otherwise it is a file in the model's folder whose name contains
	// "mmproj" and whose projection is Info.Embedding wide; one of another
	// width is another model's. Of several, the F16 or BF16 one comes
	// before F32 before a quantized one, then the one whose name shares the
	// longest prefix with the model's, then the first by name. A projector
	// whose header cannot be read is passed over.
	Projector string
	// Err says why the model cannot be used; "" when it can.
	Err string
	// Ollama is the rest of an Ollama model's manifest; nil for other sources.
	Ollama *OllamaLayers
	// Adapter is set when the entry is a LoRA adapter, not a model (Info is
	// then nil): what its header or PEFT config says.
	Adapter *AdapterInfo
}

// OllamaLayers are the blob files of an Ollama manifest's layers other than
// the model: what `ollama create` took from a Modelfile. A path is "" when
// the manifest has no such layer or its blob is missing.
type OllamaLayers struct {
	Template string   // application/vnd.ollama.image.template: a Go template
	System   string   // application/vnd.ollama.image.system: the system prompt
	Params   string   // application/vnd.ollama.image.params: JSON sampling options
	Adapters []string // application/vnd.ollama.image.adapter: LoRA adapters
}

// Library scans a set of roots. It remembers what it read of each file, by
// path, size and modification time, so a repeated Scan (the studio's Models
// tab, the API server's model list) reads only the headers of files that
// changed. Its methods may be called concurrently.
type Library struct {
	roots Roots

	mu    sync.Mutex
	known map[fileKey]described
	// projectors are the projector headers read to pair them with models.
	projectors map[fileKey]projectorRead
}

// fileKey identifies a version of a file: a model replaced under the same
// name (ollama pull of a newer tag) has another size or modification time.
type fileKey struct {
	path  string
	size  int64
	mtime time.Time
}

type described struct {
	info    *Info
	adapter *AdapterInfo
	err     string
}

// New returns a library of the models under r.
func New(r Roots) *Library {
	return &Library{roots: r, known: map[fileKey]described{}, projectors: map[fileKey]projectorRead{}}
}

// Scan lists the models under r, sorted by name; see Library.Scan.
func Scan(r Roots) []Entry { return New(r).Scan() }

// ScanAll lists the models and the adapters under r; see Library.ScanAll.
func ScanAll(r Roots) (models, adapters []Entry) { return New(r).ScanAll() }

// Scan lists every model under the library's roots, sorted by name, each
// with its header read. A model that cannot be used is listed with Err; a
// folder that cannot be read becomes an entry named by its path with Err.
// LoRA adapters are not models and are left out; ScanAll lists them.
func (l *Library) Scan() []Entry {
	models, _ := l.ScanAll()
	return models
}

// ScanAll lists what Scan does, and apart from it the LoRA adapters under
// the roots, sorted by name, each with the names of the models it fits
// (AdapterInfo.Bases).
func (l *Library) ScanAll() (models, adapters []Entry) {
	entries := l.find()
	l.describeAll(entries)
	models, adapters = splitAdapters(entries)
	matchBases(adapters, models)
	return models, adapters
}

// splitAdapters separates the adapters from the models, keeping the order.
func splitAdapters(entries []Entry) (models, adapters []Entry) {
	for _, e := range entries {
		if e.Adapter != nil {
			adapters = append(adapters, e)
		} else {
			models = append(models, e)
		}
	}
	return models, adapters
}

// find lists the models without reading their headers: the part of a scan
// that only walks folders and reads Ollama manifests.
func (l *Library) find() []Entry {
	var entries []Entry
	entries = append(entries, scanOllama(l.roots.Ollama)...)
	entries = append(entries, scanHuggingFace(l.roots.HFCache)...)
	for _, root := range l.roots.LMStudio {
		entries = append(entries, scanLMStudio(root)...)
	}
	for _, root := range l.roots.Hearth {
		entries = append(entries, scanHearth(root)...)
	}
	for _, root := range l.roots.Folders {
		entries = append(entries, scanFolder(root)...)
	}
	entries = dropDuplicateFiles(entries)
	disambiguateFolders(entries)
	slices.SortStableFunc(entries, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Path, b.Path))
	})
	return entries
}

// dropDuplicateFiles drops an LM Studio or user-folder entry whose file an
// earlier entry already lists: a user folder that holds LM Studio's models,
// or LM Studio's old folder linked to its new one, would otherwise list
// every model twice. The sources come in a fixed order, so a model keeps the
// name its own tool gives it. Ollama entries are never dropped: two tags of
// one model (gemma3:latest, gemma3:1b) share a blob by design.
func dropDuplicateFiles(entries []Entry) []Entry {
	seen := map[string]bool{}
	out := entries[:0]
	for _, e := range entries {
		if e.Err == "" {
			if real, err := filepath.EvalSymlinks(e.Path); err == nil {
				if seen[real] && (e.Source == SourceLMStudio || e.Source == SourceHearth || e.Source == SourceFolder) {
					continue
				}
				seen[real] = true
			}
		}
		out = append(out, e)
	}
	return out
}

// disambiguateFolders renames user-folder (and Hearth-folder) entries whose
// base name another entry also has: each such entry takes one more folder of its path
// (models/llama.gguf and old/llama.gguf become models/llama and old/llama),
// until the names differ or the paths run out of folders.
func disambiguateFolders(entries []Entry) {
	depth := make([]int, len(entries)) // path elements beyond the base name
	for range 8 {
		count := map[string]int{}
		for _, e := range entries {
			count[e.Name]++
		}
		changed := false
		for i := range entries {
			e := &entries[i]
			if (e.Source != SourceFolder && e.Source != SourceHearth) || count[e.Name] < 2 {
				continue
			}
			name, ok := folderName(e.Path, depth[i]+1)
			if !ok {
				continue
			}
			depth[i]++
			e.Name, changed = name, true
		}
		if !changed {
			return
		}
	}
}

// describeAll reads the header of every entry that has a file, on as many
// goroutines as there are cores: a header is read from disk (a cold one
// from a spinning disk takes tens of milliseconds), and parsing one with a
// 150K-token vocabulary takes a few milliseconds of CPU.
func (l *Library) describeAll(entries []Entry) {
	work := make(chan *Entry)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for e := range work {
				l.describe(e)
			}
		})
	}
	for i := range entries {
		if entries[i].Err == "" {
			work <- &entries[i]
		}
	}
	close(work)
	wg.Wait()

	// Forget the files no longer listed, and the projectors in folders
	// that no longer hold a model, so a long-lived library does not grow
	// with every model ever deleted.
	keep, dirs := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		keep[e.Path] = true
		dirs[filepath.Dir(e.Path)] = true
	}
	l.mu.Lock()
	maps.DeleteFunc(l.known, func(k fileKey, _ described) bool { return !keep[k.path] })
	maps.DeleteFunc(l.projectors, func(k fileKey, _ projectorRead) bool { return !dirs[filepath.Dir(k.path)] })
	l.mu.Unlock()
}

// describe fills e.Info and e.Err from the file's header, or from what the
// library read of the same file before, and pairs a model outside Ollama's
// store (whose manifest names its projector) with the projector beside it.
func (l *Library) describe(e *Entry) {
	st, err := os.Stat(e.Path)
	isDir := err == nil && st.IsDir()
	if isDir {
		// A PEFT folder: its config says what it is, and changes with it.
		st, err = os.Stat(filepath.Join(e.Path, peftConfig))
	}
	if err != nil {
		e.Err = err.Error()
		return
	}
	key := fileKey{e.Path, st.Size(), st.ModTime()}
	l.mu.Lock()
	d, ok := l.known[key]
	l.mu.Unlock()
	if !ok {
		info, ad, err := describeAny(e.Path, isDir)
		d = described{info: info, adapter: ad}
		if err != nil {
			d.err = err.Error()
		}
		l.mu.Lock()
		l.known[key] = d
		l.mu.Unlock()
	}
	e.Info, e.Adapter, e.Err = d.info, d.adapter, d.err
	if e.Source == SourceOllama && e.Projector != "" && (e.Info == nil || !vision.SeesImages(e.Info.Arch)) {
		// A manifest's projector layer for a model Hearth shows no images
		// (llava's, Qwen's): the model reads text.
		e.Projector = ""
	}
	if e.Source == SourceOllama && e.Projector != "" {
		if h, err := l.readProjector(e.Projector); err != nil || h.arch != e.Info.Arch {
			e.Projector = ""
		}
	}
	if e.Adapter != nil {
		// A copy: Bases is filled per scan, and the cached one is shared.
		a := *e.Adapter
		e.Adapter = &a
	}
	if e.Info != nil && e.Source != SourceOllama {
		// A folder that cannot be listed has no projector to offer; the
		// model itself is still usable.
		e.Projector, _ = pairProjector(e.Path, e.Info.Arch, e.Info.Embedding, l.readProjector)
	}
}
