package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/app/download"
	"github.com/hearthstudio/hearth/vocoder/kokoro"
)

// KokoroRepo is the Hugging Face repository Kokoro-82M is pulled from.
const KokoroRepo = "hexgrad/Kokoro-82M"

// DefaultKokoroVoices are the packs a pull fetches unless told which:
// af_heart, Kokoro's default and best-rated voice, and a second American
// woman, two American men and a British woman and man, so that each of
// OpenAI's voice names the API server maps has a voice of its kind.
var DefaultKokoroVoices = []string{"af_heart", "af_bella", "am_michael", "am_adam", "bf_emma", "bm_george"}

// Voice sets a pull may name instead of packs.
const (
	AllVoices     = "all"     // every pack in the repository's voices/
	EnglishVoices = "english" // every American (a…) and British (b…) English pack: the ones Hearth phonemizes
)

// KokoroPullOptions say what PullKokoro fetches and where it puts it.
type KokoroPullOptions struct {
	// Revision is a branch, tag or commit of KokoroRepo; "" means main.
	Revision string
	// Voices are pack names (af_heart), AllVoices or EnglishVoices, each
	// alone or several in one comma-separated string; none means
	// DefaultKokoroVoices.
	Voices []string
	// Dir is the Kokoro directory to fill; "" means DefaultKokoroDir.
	Dir string
	// Download sets the endpoint, token, cache, retries and Waiting of
	// every file's download; its Progress is replaced by Progress.
	Download download.Options
	// Progress, when not nil, is called as bytes arrive, with the bytes
	// of all the pull's files.
	Progress func(KokoroProgress)
}

// KokoroProgress is how far a pull is.
type KokoroProgress struct {
	File  string // the file downloading now, as the repository names it
	Done  int64  // bytes of all the pull's files present so far
	Total int64  // bytes of all of them
}

// KokoroPull describes a finished pull.
type KokoroPull struct {
	Dir      string   // the Kokoro directory, ready to speak
	Snapshot string   // the hub cache's snapshots/<commit> folder the files are in
	Commit   string   // the commit the revision resolved to
	Voices   []string // the packs pulled, sorted
	Bytes    int64    // of all the files
	Fetched  int64    // bytes received by this pull; 0 when the cache had everything
}

// PullKokoro downloads Kokoro-82M's config.json, kokoro-v1_0.pth and the
// voices asked for from KokoroRepo into the Hugging Face cache, through
// package download (resumed where an earlier pull stopped, checked
// against the SHA-256 the hub publishes), all from one commit, and then
// puts them in the Kokoro directory, where Speak and Voices read them.
//
// The files are hard links to the cache's blobs: no second copy on disk,
// and the directory keeps working when the cache is cleaned. Where a hard
// link cannot be made (the cache on another disk) they are symbolic
// links, and failing that copies. Nothing is put in the directory until
// every file has arrived, and a file there that is not Kokoro-82M's (a
// voice of the user's own under a stock name) is never replaced.
func PullKokoro(ctx context.Context, o KokoroPullOptions) (KokoroPull, error) {
	dir := o.Dir
	if dir == "" {
		d, err := DefaultKokoroDir()
		if err != nil {
			return KokoroPull{}, err
		}
		dir = d
	}
	rev := o.Revision
	if rev == "" {
		rev = "main"
	}
	dl := o.Download
	dl.Progress = nil

	// config.json first, by the revision asked for: its answer pins the
	// commit every other file comes from, so that a push to main during
	// the pull cannot mix two versions of the model.
	cfg, err := download.Download(ctx, download.Spec{Repo: KokoroRepo, Revision: rev, File: kokoro.ConfigFile}, dl)
	if err != nil {
		return KokoroPull{}, err
	}
	pull := KokoroPull{Dir: dir, Commit: cfg.Commit, Snapshot: filepath.Dir(cfg.Path), Bytes: cfg.Size, Fetched: cfg.Fetched}

	root, err := download.ListFiles(ctx, KokoroRepo, cfg.Commit, "", dl)
	if err != nil {
		return KokoroPull{}, err
	}
	i := slices.IndexFunc(root, func(f download.RepoFile) bool { return f.Path == kokoro.WeightsFile })
	if i < 0 {
		return KokoroPull{}, fmt.Errorf("%s at %s has no %s: Hearth runs Kokoro v1.0's weights", KokoroRepo, rev, kokoro.WeightsFile)
	}
	files := []download.RepoFile{root[i]}
	listed, err := download.ListFiles(ctx, KokoroRepo, cfg.Commit, kokoro.VoicesDir, dl)
	if err != nil {
		return KokoroPull{}, err
	}
	voices, err := chooseVoices(o.Voices, listed)
	if err != nil {
		return KokoroPull{}, err
	}
	for _, v := range voices {
		pull.Voices = append(pull.Voices, strings.TrimSuffix(path.Base(v.Path), ".pt"))
	}
	files = append(files, voices...)
	for _, f := range files {
		pull.Bytes += f.Size
	}

	got := []download.Result{cfg}
	done := cfg.Size
	report := func(file string, n int64) {
		if o.Progress != nil {
			o.Progress(KokoroProgress{File: file, Done: done + n, Total: pull.Bytes})
		}
	}
	report(kokoro.ConfigFile, 0)
	for _, f := range files {
		opts := dl
		opts.Progress = func(n, _ int64) { report(f.Path, n) }
		res, err := download.Download(ctx, download.Spec{Repo: KokoroRepo, Revision: cfg.Commit, File: f.Path}, opts)
		if err != nil {
			return KokoroPull{}, err
		}
		got = append(got, res)
		done += f.Size
		pull.Fetched += res.Fetched
	}

	// Every file is checked before any is placed, so that a file of the
	// user's in the way leaves the directory as it was.
	blobs := filepath.Dir(cfg.Blob)
	var place []download.Result
	var dests []string
	for _, r := range got {
		rel, err := filepath.Rel(pull.Snapshot, r.Path)
		if err != nil {
			return KokoroPull{}, err
		}
		dest := filepath.Join(dir, rel)
		if fi, err := os.Lstat(dest); err == nil {
			there, err := placedBefore(r, dest, fi, blobs)
			if err != nil {
				return KokoroPull{}, err
			}
			if there {
				continue
			}
		}
		place, dests = append(place, r), append(dests, dest)
	}
	if err := os.MkdirAll(filepath.Join(dir, kokoro.VoicesDir), 0o755); err != nil {
		return KokoroPull{}, fmt.Errorf("kokoro directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, kokoro.VoicesDir), 0o755); err != nil {
		return KokoroPull{}, fmt.Errorf("kokoro directory: %w", err)
	}
	for i, r := range place {
		if err := placeFile(r, dests[i]); err != nil {
			return KokoroPull{}, err
		}
	}
	return pull, nil
}

// chooseVoices picks the packs named in want out of the repository's
// voices/ listing; an unknown name is refused with the names there are.
func chooseVoices(want []string, listed []download.RepoFile) ([]download.RepoFile, error) {
	byName := map[string]download.RepoFile{}
	var names []string
	for _, f := range listed {
		if n, ok := strings.CutSuffix(path.Base(f.Path), ".pt"); ok {
			byName[n] = f
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no voice packs (*.pt) in %s/", KokoroRepo, kokoro.VoicesDir)
	}
	if len(want) == 0 {
		want = DefaultKokoroVoices
	}
	chosen := map[string]bool{}
	var terms []string
	for _, w := range want {
		terms = append(terms, strings.Split(w, ",")...)
	}
	for _, w := range terms {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
		case strings.EqualFold(w, AllVoices):
			for _, n := range names {
				chosen[n] = true
			}
		case strings.EqualFold(w, EnglishVoices):
			for _, n := range names {
				if strings.HasPrefix(n, "a") || strings.HasPrefix(n, "b") {
					chosen[n] = true
				}
			}
		default:
			if _, ok := byName[w]; !ok {
				return nil, fmt.Errorf("%s has no voice %q: it has %s (or say %s or %s)", KokoroRepo, w, strings.Join(names, ", "), AllVoices, EnglishVoices)
			}
			chosen[w] = true
		}
	}
	if len(chosen) == 0 {
		return nil, fmt.Errorf("no voices chosen: name packs such as af_heart, or %s or %s", AllVoices, EnglishVoices)
	}
	var out []download.RepoFile
	for _, n := range names {
		if chosen[n] {
			out = append(out, byName[n])
		}
	}
	return out, nil
}

// placeFile makes dest the downloaded file r: a hard link to its blob,
// else a symbolic link, else a copy, put in place by a rename so that a
// reader never sees half a file.
func placeFile(r download.Result, dest string) error {
	tmp := dest + ".pull-tmp"
	os.Remove(tmp)
	if err := os.Link(r.Blob, tmp); err != nil {
		abs, aerr := filepath.Abs(r.Blob)
		if aerr != nil {
			return fmt.Errorf("place %s: %w", dest, aerr)
		}
		if serr := os.Symlink(abs, tmp); serr != nil {
			if cerr := copyInto(r.Blob, tmp); cerr != nil {
				return fmt.Errorf("place %s: a hard link (%v), a symbolic link (%v) and a copy all failed: %w", dest, err, serr, cerr)
			}
		}
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("place %s: %w", dest, err)
	}
	return nil
}

// placedBefore reports whether dest, which exists, is r already (true),
// or may be replaced (false): a link, which holds no data of its own, or
// a hard link to another blob of the repository (an earlier pull's, which
// the cache keeps). Any other file is the user's, and an error.
func placedBefore(r download.Result, dest string, fi os.FileInfo, blobs string) (bool, error) {
	if target, err := os.Stat(dest); err == nil {
		if blob, err := os.Stat(r.Blob); err == nil && os.SameFile(target, blob) {
			return true, nil
		}
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return false, nil // a link holds no data of its own
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s is in the way of Kokoro-82M's file there: it is not a file; move it elsewhere and pull again", dest)
	}
	entries, _ := os.ReadDir(blobs)
	for _, e := range entries {
		if bi, err := e.Info(); err == nil && os.SameFile(fi, bi) {
			return false, nil // an earlier pull's file: the cache keeps it
		}
	}
	if fi.Size() == r.Size {
		sum, err := fileSHA256(dest)
		if err != nil {
			return false, err
		}
		if sum == r.SHA256 {
			return true, nil // a copy, by hand or by an earlier pull
		}
	}
	return false, fmt.Errorf("%s is not Kokoro-82M's %s (a file of your own?): it is kept; move it elsewhere to pull the stock one",
		dest, filepath.Base(dest))
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyInto copies src to a new file dst.
func copyInto(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return err
	}
	return nil
}
