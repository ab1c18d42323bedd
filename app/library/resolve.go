package library

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUnknown is wrapped by the error for a name no model has.
var ErrUnknown = errors.New("unknown model")

// maxSuggestions bounds the near matches an unknown name's error lists.
const maxSuggestions = 5

// minStem is the shortest model part unknown compares by prefix.
const minStem = 3

// Resolve finds the model the user named, by name or by path; see
// Library.Resolve.
func Resolve(r Roots, name string) (Entry, error) { return New(r).Resolve(name) }

// ResolveName finds the model of an exact name, never a path; see
// Library.ResolveName.
func ResolveName(r Roots, name string) (Entry, error) { return New(r).ResolveName(name) }

// Resolve finds the model the user named, for the command line: a path to
// an existing file wins (any file: Ollama's blobs have no extension; a file
// that is not GGUF is refused when its header is read), else a name, as
// ResolveName takes it. The entry comes with its Info and its Projector (for
// a path, the one beside it, as ProjectorFor finds it). A model that is found
// but cannot be used (a missing blob, a split file, an unsupported
// architecture) is returned with an error saying why.
func (l *Library) Resolve(name string) (Entry, error) {
	st, err := os.Stat(name)
	switch {
	case err == nil && st.IsDir():
		return Entry{}, fmt.Errorf("model %q is a folder, not a .gguf file (hearth models --folder %s lists the models in it)", name, name)
	case err == nil:
		e, ok := modelFile(name, name, SourceFile)
		if !ok {
			// Not named *.gguf, or a projector: still the file the user
			// asked for, and its header decides.
			e = Entry{Name: name, Path: name, Source: SourceFile, Size: st.Size()}
		}
		return l.usable(e)
	}
	e, rerr := l.ResolveName(name)
	if errors.Is(rerr, ErrUnknown) && looksLikePath(name) {
		return Entry{}, fmt.Errorf("no such file %q, and %w", name, rerr)
	}
	return e, rerr
}

// ResolveName finds the model of a name for a caller that must not open a
// path it was given (the API server): only the names of the scanned models
// match, case-sensitively, so "../../etc/passwd" is an unknown model. Besides
// a name as listed, it takes the forms Ollama accepts for its own models: the
// tag left out (gemma3 for gemma3:latest), and the registry or namespace
// spelled out (library/gemma3:1b, registry.ollama.ai/library/gemma3:1b).
// An unknown name's error wraps ErrUnknown and lists near matches. The
// entry comes with its Info and its Projector.
func (l *Library) ResolveName(name string) (Entry, error) {
	if name == "" {
		return Entry{}, fmt.Errorf("%w: no name given; hearth models lists the models on this machine", ErrUnknown)
	}
	entries := l.find()
	matches := named(entries, name)
	if len(matches) == 0 {
		if alias, ok := ollamaCanonical(name); ok {
			for _, e := range named(entries, alias) {
				if e.Source == SourceOllama {
					matches = append(matches, e)
				}
			}
		}
	}
	switch len(matches) {
	case 0:
		return Entry{}, unknown(name, entries)
	case 1:
		return l.usable(matches[0])
	}
	paths := make([]string, len(matches))
	for i, e := range matches {
		paths[i] = e.Path
	}
	return Entry{}, fmt.Errorf("model %q is ambiguous: %d models have that name (%s); give the path", name, len(matches), strings.Join(paths, ", "))
}

// usable reads e's header and returns e, with an error when the model
// cannot be used.
func (l *Library) usable(e Entry) (Entry, error) {
	if e.Err == "" {
		l.describe(&e)
	}
	if e.Adapter != nil {
		return e, fmt.Errorf("%q is %w (for %s): give a model with -m and this with --lora %s", e.Name, ErrAdapter, e.Adapter.For(), e.Name)
	}
	if e.Err != "" {
		return e, fmt.Errorf("model %q: %s", e.Name, e.Err)
	}
	return e, nil
}

// ResolveAdapter finds the LoRA adapter the user named, for --lora: an
// existing file or folder wins (its contents are checked when the adapter
// is applied), else the name of an adapter the library lists. A name that
// is a model's, or no adapter's, is an error that says so and lists the
// adapters there are.
func (l *Library) ResolveAdapter(name string) (Entry, error) {
	if _, err := os.Stat(name); err == nil {
		return Entry{Name: name, Path: name, Source: SourceFile}, nil
	}
	if name == "" {
		return Entry{}, fmt.Errorf("%w: no adapter name given", ErrUnknown)
	}
	var adapters []Entry
	for _, e := range named(l.find(), name) {
		if e.Err == "" {
			l.describe(&e)
		}
		if e.Adapter == nil {
			if e.Err == "" {
				return Entry{}, fmt.Errorf("%q is a model, not a LoRA adapter: run it with -m %s", name, name)
			}
			continue
		}
		adapters = append(adapters, e)
	}
	switch len(adapters) {
	case 1:
		e := adapters[0]
		if e.Err != "" {
			return e, fmt.Errorf("adapter %q: %s", e.Name, e.Err)
		}
		return e, nil
	case 0:
		_, all := l.ScanAll()
		var names []string
		for _, e := range all {
			if e.Err == "" {
				names = append(names, e.Name)
			}
		}
		where := "no adapters in the library; give the adapter's path"
		if len(names) > 0 {
			where = "the library's adapters: " + strings.Join(names, ", ")
		}
		if looksLikePath(name) {
			return Entry{}, fmt.Errorf("no such file %q, and %w adapter %q; %s", name, ErrUnknown, name, where)
		}
		return Entry{}, fmt.Errorf("%w adapter %q; %s (hearth models lists them)", ErrUnknown, name, where)
	}
	paths := make([]string, len(adapters))
	for i, e := range adapters {
		paths[i] = e.Path
	}
	return Entry{}, fmt.Errorf("adapter %q is ambiguous: %d adapters have that name (%s); give the path", name, len(adapters), strings.Join(paths, ", "))
}

// named is the entries called name. An unreadable folder's entry, named by
// its path, is a report and not a model, so no name reaches it.
func named(entries []Entry, name string) []Entry {
	var out []Entry
	for _, e := range entries {
		if e.Name == name && e.Name != e.Path {
			out = append(out, e)
		}
	}
	return out
}

// ollamaCanonical is name as Ollama lists it (gemma3:latest for gemma3,
// library/gemma3:1b or registry.ollama.ai/library/gemma3:1b for
// gemma3:1b), and whether that differs from name.
func ollamaCanonical(name string) (string, bool) {
	s := name
	if rest, ok := strings.CutPrefix(s, ollamaRegistry+"/"); ok {
		s = rest
	}
	if rest, ok := strings.CutPrefix(s, "library/"); ok {
		s = rest
	}
	if last := s[strings.LastIndex(s, "/")+1:]; last != "" && !strings.Contains(last, ":") {
		s += ":latest"
	}
	return s, s != name
}

// unknown is the error for a name no entry has, with the names that look
// like it, closest first: the same name in another case, then the same model
// part (gemma3:1b for gemma3:27b), then names whose model part starts with
// its or the other way round (gemma3-tools, gemma), then names that contain
// it. A model part shorter than minStem letters would match too much to be
// compared by prefix.
func unknown(name string, entries []Entry) error {
	q := strings.ToLower(name)
	qStem := stem(q)
	type suggestion struct {
		rank int
		name string
	}
	var near []suggestion
	for _, e := range entries {
		if e.Name == e.Path {
			continue // an unreadable folder, not a model
		}
		n := strings.ToLower(e.Name)
		nStem := stem(n)
		rank := 0
		switch {
		case n == q:
			rank = 1
		case nStem == qStem && qStem != "":
			rank = 2
		case min(len(qStem), len(nStem)) >= minStem && (strings.HasPrefix(nStem, qStem) || strings.HasPrefix(qStem, nStem)):
			rank = 3
		case strings.Contains(n, q):
			rank = 4
		default:
			continue
		}
		near = append(near, suggestion{rank, e.Name})
	}
	if len(near) == 0 {
		return fmt.Errorf("%w %q; hearth models lists the models on this machine", ErrUnknown, name)
	}
	slices.SortFunc(near, func(a, b suggestion) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.name, b.name))
	})
	names := make([]string, 0, maxSuggestions)
	for _, s := range near {
		if len(names) == maxSuggestions {
			break
		}
		if !slices.Contains(names, s.name) {
			names = append(names, s.name)
		}
	}
	more := ""
	if len(near) > len(names) {
		more = fmt.Sprintf(" (and %d more)", len(near)-len(names))
	}
	return fmt.Errorf("%w %q; did you mean %s%s? hearth models lists them", ErrUnknown, name, strings.Join(names, ", "), more)
}

// stem is a lower-cased name's model part: before the tag of an Ollama
// name or the file of a Hugging Face one, without Ollama's library/ prefix.
func stem(name string) string {
	s, _ := ollamaCanonical(name)
	s = strings.TrimPrefix(s, "library/")
	if i := strings.Index(s, ":"); i >= 0 {
		s = s[:i]
	}
	return s
}

// looksLikePath reports whether the user seems to have meant a file: a
// path separator or the .gguf extension, and no Ollama tag after them.
func looksLikePath(name string) bool {
	return isGGUFName(name) || strings.ContainsRune(name, filepath.Separator) || strings.HasPrefix(name, ".")
}
