package download

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// DefaultEndpoint is the hub Fetch talks to when Options.Endpoint is empty:
// $HF_ENDPOINT when set (a mirror, or a hub of one's own), else
// https://huggingface.co, as huggingface_hub chooses it.
func DefaultEndpoint() string {
	if e := strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"); e != "" {
		return e
	}
	return "https://huggingface.co"
}

// DefaultCacheDir is the hub cache huggingface_hub uses, so that a model
// downloaded by either is found by the other: $HF_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (on every platform, Windows included). It is ""
// only when none is set and the home folder is unknown.
func DefaultCacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	// The name huggingface_hub read before 0.15, still honoured by it.
	if d := os.Getenv("HUGGINGFACE_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// repoDir is a model repository's folder in the cache:
// models--OWNER--NAME, as huggingface_hub's repo_folder_name spells it.
func repoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// linkSnapshot makes snap (snapshots/<commit>/<file>) point at blob with a
// relative symlink, so the cache folder can be moved as a whole. Where
// symlinks are not allowed (Windows without developer mode) it makes a hard
// link, and failing that a copy, as huggingface_hub falls back to a copy.
func linkSnapshot(blob, snap string) error {
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	target, err := filepath.Rel(filepath.Dir(snap), blob)
	if err != nil {
		return fmt.Errorf("download: link %s: %w", snap, err)
	}
	if fi, err := os.Lstat(snap); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(snap); err == nil && t == target {
				return nil
			}
		} else if bi, err := os.Stat(blob); err == nil && fi.Mode().IsRegular() && fi.Size() == bi.Size() {
			// A hard link or a copy made earlier; a snapshot's file never
			// changes for a given commit, so the same size is the same file.
			return nil
		}
		if err := os.Remove(snap); err != nil {
			return fmt.Errorf("download: replace %s: %w", snap, err)
		}
	}
	serr := os.Symlink(target, snap)
	if serr == nil {
		return nil
	}
	if os.Link(blob, snap) == nil {
		return nil
	}
	if err := copyFile(blob, snap); err != nil {
		return fmt.Errorf("download: link %s: symlink failed (%v), and so did a copy: %w", snap, serr, err)
	}
	return nil
}

// copyFile copies src to dst through a temporary file beside dst, so that
// an interrupted copy never looks complete.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".incomplete"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// writeRef records that rev resolved to commit, in refs/<rev> (a revision
// such as refs/pr/1 makes sub-folders), so that tools reading the cache
// offline find the snapshot by its branch or tag name. The file holds the
// commit with no newline, as huggingface_hub writes it.
func writeRef(dir, rev, commit string) error {
	ref := filepath.Join(dir, "refs", filepath.FromSlash(rev))
	if b, err := os.ReadFile(ref); err == nil && string(b) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	// Written aside and renamed, so a reader never sees half a hash.
	f, err := os.CreateTemp(filepath.Dir(ref), "."+filepath.Base(ref)+".tmp-*")
	if err != nil {
		return fmt.Errorf("download: write %s: %w", ref, err)
	}
	_, err = f.WriteString(commit)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), ref)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("download: write %s: %w", ref, err)
	}
	return nil
}

// blobComplete reports whether blob exists with the size the hub gave
// (any size when the hub gave none).
func blobComplete(blob string, size int64) (bool, error) {
	fi, err := os.Stat(blob)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("download: %w", err)
	}
	return fi.Mode().IsRegular() && (size < 0 || fi.Size() == size), nil
}
