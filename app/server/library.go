package server

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/hearthstudio/hearth/app/library"
)

// Library is the catalogue of a model library: the models its scans find
// that Hearth can run. Names resolve through library.ResolveName, which
// matches only the scanned names and never opens a path built from one.
// Pass Resolve and Projector to the engine too (app.EngineOptions.Resolve
// and Projector).
func Library(lib *library.Library) LibraryModels { return LibraryModels{lib} }

// LibraryModels is the Models of a library, as Library makes them.
type LibraryModels struct{ lib *library.Library }

// List scans again on each call, so a model pulled while the server runs
// is there on the next request; the library re-reads only the headers of
// files that changed.
func (l LibraryModels) List() []Model {
	var out []Model
	for _, e := range l.lib.Scan() {
		if e.Err != "" || e.Info == nil {
			continue // a broken or unsupported model cannot be served
		}
		m := Model{Name: e.Name, Size: e.Size, Family: e.Info.Arch, Params: uint64(max(e.Info.Params, 0)),
			Quant: e.Info.Quant, Context: e.Info.Context, Vision: e.Projector != ""}
		if st, err := os.Stat(e.Path); err == nil {
			m.Modified = st.ModTime()
		}
		// Ollama names its blobs by their content's SHA-256.
		if hex, ok := strings.CutPrefix(filepath.Base(e.Path), "sha256-"); ok && e.Source == library.SourceOllama {
			m.Digest = hex
		}
		if e.Ollama != nil {
			m.System, m.Options = e.Ollama.System, e.Ollama.Params
		}
		out = append(out, m)
	}
	return out
}

// Resolve is the file of the model called name.
func (l LibraryModels) Resolve(name string) (string, error) {
	e, err := l.lib.ResolveName(name)
	if err != nil {
		return "", err
	}
	return e.Path, nil
}

// Projector is the vision projector (mmproj file) of the model called
// name, "" for a model that reads no images. Like Resolve it takes only
// the catalogue's names, never a path; app.EngineOptions.Projector is
//
//	func(name, _ string) (string, error) { return models.Projector(name) }
func (l LibraryModels) Projector(name string) (string, error) { return l.lib.Projector(name) }
