package download

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// serveTree answers the hub's tree API,
// /api/models/{owner}/{name}/tree/{rev}[/{dir}], with the files and
// folders directly in dir, pageSize at a time behind a Link header.
func (h *fakeHub) serveTree(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/api/models/"), "/")
	if len(parts) < 4 || parts[2] != "tree" {
		http.NotFound(w, r)
		return
	}
	repo := parts[0] + "/" + parts[1]
	rev, _ := url.PathUnescape(parts[3])
	dir, _ := url.PathUnescape(strings.Join(parts[4:], "/"))
	type lfs struct {
		OID  string `json:"oid"`
		Size int    `json:"size"`
	}
	type entry struct {
		Type string `json:"type"`
		Path string `json:"path"`
		Size int    `json:"size"`
		LFS  *lfs   `json:"lfs,omitempty"`
	}
	var entries []entry
	known, dirs := false, map[string]bool{}
	for k, f := range h.files {
		p, ok := strings.CutPrefix(k, repo+"/")
		if !ok {
			continue
		}
		known = true
		rest := p
		if dir != "" {
			if rest, ok = strings.CutPrefix(p, dir+"/"); !ok {
				continue
			}
		}
		if sub, _, ok := strings.Cut(rest, "/"); ok {
			dirs[strings.TrimPrefix(dir+"/"+sub, "/")] = true
			continue
		}
		e := entry{Type: "file", Path: p, Size: len(f.data)}
		if f.lfs {
			e.Size = 134 // the pointer's size, as the hub gives it
			e.LFS = &lfs{OID: sha256Hex(f.data), Size: len(f.data)}
		}
		entries = append(entries, e)
	}
	for d := range dirs {
		entries = append(entries, entry{Type: "directory", Path: d})
	}
	switch {
	case !known:
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	case rev != "main" && rev != testCommit:
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	case len(entries) == 0:
		w.Header().Set("X-Error-Code", "EntryNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	if h.pageSize > 0 {
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		to := min(from+h.pageSize, len(entries))
		if to < len(entries) {
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?cursor=%d>; rel="next"`, h.hub.URL, r.URL.EscapedPath(), to))
		}
		entries = entries[from:to]
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(entries)
}

func TestListFiles(t *testing.T) {
	h := newFakeHub(t, false)
	var want []RepoFile
	for i := range 5 {
		name := fmt.Sprintf("voices/v%d.pt", i)
		data := h.add("owner/repo", name, 100+i, true)
		want = append(want, RepoFile{Path: name, Size: int64(len(data)), SHA256: sha256Hex(data)})
	}
	h.add("owner/repo", "voices/deeper/x.pt", 10, true)
	cfg := h.add("owner/repo", "config.json", 50, false)
	h.pageSize = 2 // three pages for the voices
	o := h.options()

	got, err := ListFiles(context.Background(), "owner/repo", "main", "voices", o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("voices/ lists %+v, want %+v (LFS sizes and SHA-256, no sub-folder)", got, want)
	}
	root, err := ListFiles(context.Background(), "owner/repo", testCommit, "", o)
	if err != nil {
		t.Fatal(err)
	}
	if w := []RepoFile{{Path: "config.json", Size: int64(len(cfg))}}; !slices.Equal(root, w) {
		t.Errorf("the root lists %+v, want %+v", root, w)
	}

	for _, c := range []struct {
		repo, rev, dir string
		is             error
		want           string
	}{
		{"owner/none", "main", "", ErrNotFound, "no repository owner/none"},
		{"owner/repo", "v9", "voices", ErrNotFound, "no revision v9"},
		{"owner/repo", "main", "nothing", ErrNotFound, "nothing"},
		{"owner/repo", "main", "../up", nil, `".." segment`},
	} {
		_, err := ListFiles(context.Background(), c.repo, c.rev, c.dir, o)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ListFiles(%s@%s, %q): %v, want %v saying %q", c.repo, c.rev, c.dir, err, c.is, c.want)
		}
	}
}

// TestListFilesRefusesAHostileListing: a path that climbs out of the
// folder, or an LFS id that is not a SHA-256, ends the listing.
func TestListFilesRefusesAHostileListing(t *testing.T) {
	for _, body := range []string{
		`[{"type":"file","path":"voices/../../etc/passwd","size":1}]`,
		`[{"type":"file","path":"other/x.pt","size":1}]`,
		`[{"type":"file","path":"voices/x.pt","size":1,"lfs":{"oid":"../x","size":1}}]`,
		`{"error":"not a list"}`,
	} {
		h := newFakeHub(t, false)
		h.hub.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) })
		if files, err := ListFiles(context.Background(), "owner/repo", "main", "voices", h.options()); err == nil {
			t.Errorf("listing %s: %+v, want an error", body, files)
		}
	}
}

// TestDownloadFileOfAnyKind: Download fetches any file of a repository
// (Kokoro's weights, voices and config); only ParseSpec, which reads what
// a user types, keeps to .gguf.
func TestDownloadFileOfAnyKind(t *testing.T) {
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "voices/af_heart.pt", 3000, true)
	o := h.options()
	res, err := Download(context.Background(), Spec{"owner/repo", "main", "voices/af_heart.pt"}, o)
	if err != nil {
		t.Fatal(err)
	}
	checkCached(t, o.CacheDir, "owner/repo", "voices/af_heart.pt", data, res)
	if _, err := ParseSpec("owner/repo:voices/af_heart.pt"); err == nil || !strings.Contains(err.Error(), "only .gguf files") {
		t.Errorf("ParseSpec of a .pt: %v, want only .gguf files", err)
	}
}
