// Package library finds the GGUF language models already on the machine, in
// the places other tools keep them, without copying a byte: the Ollama store,
// the Hugging Face hub cache, LM Studio's models folder and any folder the
// user adds. Each model becomes an Entry with the name the user types
// (gemma3:1b, Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q4_k_m.gguf),
// the file to load, and what its GGUF header says (architecture, parameters,
// quantization, context, a GPU memory estimate).
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
)

// The sources an Entry can come from.
const (
	SourceOllama      = "ollama"
	SourceHuggingFace = "huggingface"
	SourceLMStudio    = "lmstudio"
	SourceFolder      = "folder"
	SourceFile        = "file" // a path given to Resolve
)

// Roots are the places a scan looks. An empty or missing root is skipped
// quietly: most machines have one tool or none.
type Roots struct {
	Ollama   string   // the Ollama store: manifests/ and blobs/
	HFCache  string   // the Hugging Face hub cache: models--OWNER--REPO/
	LMStudio []string // LM Studio models folders: PUBLISHER/REPO/FILE.gguf
	Folders  []string // folders the user added, scanned recursively
}

// DefaultRoots are where the tools keep their models by default, after the
// environment variables each tool honours: OLLAMA_MODELS for Ollama; for the
// Hugging Face cache the folder hearth pull and huggingface_hub download to
// (HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub). It adds no user folders.
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
	// Err says why the model cannot be used; "" when it can.
	Err string
	// Ollama is the rest of an Ollama model's manifest; nil for other sources.
	Ollama *OllamaLayers
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
}

// fileKey identifies a version of a file: a model replaced under the same
// name (ollama pull of a newer tag) has another size or modification time.
type fileKey struct {
	path  string
	size  int64
	mtime time.Time
}

type described struct {
	info *Info
	err  string
}

// New returns a library of the models under r.
func New(r Roots) *Library {
	return &Library{roots: r, known: map[fileKey]described{}}
}

// Scan lists the models under r, sorted by name; see Library.Scan.
func Scan(r Roots) []Entry { return New(r).Scan() }

// Scan lists every model under the library's roots, sorted by name, each
// with its header read. A model that cannot be used is listed with Err; a
// folder that cannot be read becomes an entry named by its path with Err.
func (l *Library) Scan() []Entry {
	entries := l.find()
	l.describeAll(entries)
	return entries
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
				if seen[real] && (e.Source == SourceLMStudio || e.Source == SourceFolder) {
					continue
				}
				seen[real] = true
			}
		}
		out = append(out, e)
	}
	return out
}

// disambiguateFolders renames user-folder entries whose base name another
// entry also has: each such entry takes one more folder of its path
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
			if e.Source != SourceFolder || count[e.Name] < 2 {
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

	// Forget the files no longer listed, so a long-lived library does not
	// grow with every model ever deleted.
	keep := map[string]bool{}
	for _, e := range entries {
		keep[e.Path] = true
	}
	l.mu.Lock()
	maps.DeleteFunc(l.known, func(k fileKey, _ described) bool { return !keep[k.path] })
	l.mu.Unlock()
}

// describe fills e.Info and e.Err from the file's header, or from what the
// library read of the same file before.
func (l *Library) describe(e *Entry) {
	st, err := os.Stat(e.Path)
	if err != nil {
		e.Err = err.Error()
		return
	}
	key := fileKey{e.Path, st.Size(), st.ModTime()}
	l.mu.Lock()
	d, ok := l.known[key]
	l.mu.Unlock()
	if !ok {
		info, err := Describe(e.Path)
		d = described{info: info}
		if err != nil {
			d.err = err.Error()
		}
		l.mu.Lock()
		l.known[key] = d
		l.mu.Unlock()
	}
	e.Info, e.Err = d.info, d.err
}
