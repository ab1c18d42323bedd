package library

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// splitName matches the parts of a split GGUF as llama.cpp's gguf-split
// names them: PREFIX-00001-of-00003.gguf.
var splitName = regexp.MustCompile(`(?i)^(.+)-(\d{5})-of-(\d{5})(\.gguf)$`)

// isGGUFName reports whether a file name has the .gguf extension, in any case.
func isGGUFName(name string) bool {
	return strings.EqualFold(filepath.Ext(name), ".gguf")
}

// isProjector reports whether a file is a multimodal projector (mmproj-*.gguf,
// or *-mmproj-*.gguf as some repositories name it): the image encoder a
// llava-style model loads beside its language model. It is GGUF, but alone it
// is not a language model, so no source lists it; it is the Projector of the
// model entries beside it that it fits (pairProjector).
func isProjector(name string) bool {
	return strings.Contains(strings.ToLower(name), "mmproj")
}

// splitParts returns the paths of every part of the split GGUF whose part
// path is (any one of them), or nil when the name is not a part's.
func splitParts(path string) []string {
	m := splitName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return nil
	}
	n, err := strconv.Atoi(m[3])
	if err != nil || n < 1 {
		return nil
	}
	dir := filepath.Dir(path)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = filepath.Join(dir, fmt.Sprintf("%s-%05d-of-%s%s", m[1], i+1, m[3], m[4]))
	}
	return parts
}

// modelFile is the entry of a file a folder walk found, with the name the
// source gives it; ok is false for a file that is not listed: not .gguf, a
// projector, a folder, or a later part of a split model (the first part
// stands for the whole).
func modelFile(path, name, source string) (e Entry, ok bool) {
	base := filepath.Base(path)
	if !isGGUFName(base) || isProjector(base) {
		return Entry{}, false
	}
	e = Entry{Name: name, Path: path, Source: source}
	parts := splitParts(path)
	if parts != nil {
		if parts[0] != path {
			return Entry{}, false
		}
		if len(parts) > 1 {
			e.Parts = len(parts)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		if _, lerr := os.Lstat(path); lerr == nil && errors.Is(err, fs.ErrNotExist) {
			e.Err = fmt.Sprintf("%s: the link points to a missing file (a download that did not finish?)", path)
		} else {
			e.Err = err.Error()
		}
		return e, true
	}
	if st.IsDir() {
		return Entry{}, false
	}
	e.Size = st.Size()
	for _, p := range parts[min(1, len(parts)):] {
		if st, err := os.Stat(p); err == nil {
			e.Size += st.Size()
		}
	}
	return e, true
}

// unreadable is the entry that reports a folder a scan could not read, so
// that the user learns why models they expect are missing.
func unreadable(source, dir string, err error) Entry {
	return Entry{Name: dir, Path: dir, Source: source, Err: fmt.Sprintf("cannot read the folder: %v", err)}
}

// folderName is the name of a user-folder file with depth folders of its
// path in front of its base name (depth 0: the base name alone), the .gguf
// extension dropped; ok is false when the path has fewer folders.
func folderName(path string, depth int) (name string, ok bool) {
	elems := strings.Split(filepath.ToSlash(filepath.Clean(path)), "/")
	if depth+1 > len(elems) || (depth+1 == len(elems) && elems[0] == "") {
		return "", false
	}
	elems = elems[len(elems)-depth-1:]
	last := len(elems) - 1
	elems[last] = strings.TrimSuffix(elems[last], filepath.Ext(elems[last]))
	return strings.Join(elems, "/"), true
}

// walker visits the files under a folder, to a bounded depth, skipping
// hidden entries: .git, .cache, .locks and the like hold tool state and
// copies, not the user's models.
type walker struct {
	maxDepth int  // folders below the root that are entered
	follow   bool // enter links to folders
	// visited holds the real paths of the folders entered, so that a link
	// to a folder above it (models/loop -> ..) is entered once, not until
	// the depth runs out in every branch.
	visited map[string]bool
	file    func(path, rel string)      // rel: slash-separated, from the root
	fail    func(dir string, err error) // a folder that could not be read
}

func (w *walker) walk(root string) {
	w.visited = map[string]bool{}
	w.walkDir(root, "", 0)
}

func (w *walker) walkDir(dir, rel string, depth int) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		if w.visited[real] {
			return
		}
		w.visited[real] = true
	}
	// ReadDir returns what it read before an error; those entries are still
	// listed.
	ents, err := os.ReadDir(dir)
	if err != nil {
		w.fail(dir, err)
	}
	for _, d := range ents {
		name := d.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p, r := filepath.Join(dir, name), name
		if rel != "" {
			r = rel + "/" + name
		}
		isDir := d.IsDir()
		if d.Type()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				if !w.follow {
					continue
				}
				isDir = true
			}
		}
		if isDir {
			if depth < w.maxDepth {
				w.walkDir(p, r, depth+1)
			}
			continue
		}
		w.file(p, r)
	}
}
