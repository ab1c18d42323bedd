package library

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// hfMaxDepth is how deep a snapshot is searched: repositories put each
// quantization of a split model in its own folder (Q4_K_M/NAME-00001-of-
// 00002.gguf), seldom deeper.
const hfMaxDepth = 4

// scanHuggingFace lists the GGUF files of the Hugging Face hub cache at
// root: models--OWNER--REPO/snapshots/COMMIT/**.gguf, each a link into the
// repository's blobs/.
func scanHuggingFace(root string) []Entry {
	if root == "" {
		return nil
	}
	dirs, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return []Entry{unreadable(SourceHuggingFace, root, err)}
	}
	var entries []Entry
	for _, d := range dirs {
		// datasets--*, spaces--*, .locks and version.txt are not models.
		rest, ok := strings.CutPrefix(d.Name(), "models--")
		if !ok {
			continue
		}
		// The hub forbids "--" in owner and repository names, so the first
		// one separates them; a legacy repository has no owner ("gpt2").
		repo := strings.Replace(rest, "--", "/", 1)
		entries = append(entries, scanHFRepo(filepath.Join(root, d.Name()), repo)...)
	}
	return entries
}

// hfFile is one GGUF file of one snapshot.
type hfFile struct {
	path, commit string
	mtime        time.Time
}

// scanHFRepo lists the GGUF files of one cached repository. A file several
// snapshots hold is listed once: from the snapshot refs/main names (what
// hf_hub_download gives by default), else from the newest snapshot.
func scanHFRepo(dir, repo string) []Entry {
	var main string
	if b, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err == nil {
		main = strings.TrimSpace(string(b))
	}
	snapDir := filepath.Join(dir, "snapshots")
	snaps, err := os.ReadDir(snapDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a repository whose download never got a file
		}
		return []Entry{unreadable(SourceHuggingFace, snapDir, err)}
	}
	var entries []Entry
	best := map[string]hfFile{} // by path within the snapshot
	for _, s := range snaps {
		commit := s.Name()
		snap := filepath.Join(snapDir, commit)
		st, err := os.Stat(snap)
		if err != nil || !st.IsDir() {
			continue
		}
		w := walker{
			maxDepth: hfMaxDepth,
			file: func(path, rel string) {
				if !isGGUFName(rel) {
					return
				}
				f := hfFile{path: path, commit: commit, mtime: st.ModTime()}
				if old, ok := best[rel]; !ok || hfPrefer(f, old, main) {
					best[rel] = f
				}
			},
			fail: func(dir string, err error) {
				entries = append(entries, unreadable(SourceHuggingFace, dir, err))
			},
		}
		w.walk(snap)
	}
	for _, rel := range slices.Sorted(maps.Keys(best)) {
		if e, ok := modelFile(best[rel].path, repo+":"+rel, SourceHuggingFace); ok {
			entries = append(entries, e)
		}
	}
	return entries
}

// hfPrefer reports whether snapshot file a is to be listed rather than b.
func hfPrefer(a, b hfFile, main string) bool {
	if (a.commit == main) != (b.commit == main) {
		return a.commit == main
	}
	if !a.mtime.Equal(b.mtime) {
		return a.mtime.After(b.mtime)
	}
	return a.commit > b.commit // any fixed order, so scans agree
}
