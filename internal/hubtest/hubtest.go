// Package hubtest is a local stand-in for the Hugging Face hub, for tests
// of what downloads from it (hearth pull, the Voice tab's download): the
// resolve URLs answer HEAD and GET with X-Repo-Commit and the ETag, LFS
// files redirect to a CDN path that serves byte ranges, and the tree API
// lists folders, as huggingface.co does. Nothing leaves the machine.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Commit is the commit every revision of the fake hub resolves to.
const Commit = "fedcba9876543210fedcba9876543210fedcba98"

// Hub is the fake hub.
type Hub struct {
	URL string
	// PageSize is how many entries a page of a tree listing holds, the
	// next page named by a Link header as the hub does; 0 lists all on
	// one page.
	PageSize int

	mu    sync.Mutex
	files map[string]*file // "owner/name/path" → file
	gets  []string         // the Range header of each GET of a file's bytes ("" for none), as "path range"
}

type file struct {
	data  []byte
	lfs   bool
	etag  string // published in place of the true SHA-256 when not ""
	cutAt int64  // the next GET of the bytes drops the connection after this many, once
}

// New starts a hub and points $HF_ENDPOINT at it, $HF_HUB_CACHE at a new
// temporary folder, and empties $HF_TOKEN, for the test's duration.
func New(t testing.TB) *Hub {
	t.Helper()
	h := &Hub{files: map[string]*file{}}
	srv := httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")
	return h
}

// Add puts a file into repo: in LFS (served through the CDN, with its
// SHA-256 published) or in git (served directly, its ETag the git blob id).
func (h *Hub) Add(repo, path string, data []byte, lfs bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[repo+"/"+path] = &file{data: data, lfs: lfs}
}

// PublishWrongSHA256 makes the hub publish a SHA-256 for an LFS file that
// its bytes do not have.
func (h *Hub) PublishWrongSHA256(repo, path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[repo+"/"+path].etag = strings.Repeat("ab", 32)
}

// CutAfter makes the next GET of an LFS file's bytes drop the connection
// after n bytes.
func (h *Hub) CutAfter(repo, path string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[repo+"/"+path].cutAt = n
}

// Gets lists the GETs of files' bytes so far, each "path range", the
// range "" when the GET asked for the whole file.
func (h *Hub) Gets() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.gets)
}

// SHA256 is data's SHA-256 in hex.
func SHA256(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func gitBlobID(b []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(b))
	s.Write(b)
	return hex.EncodeToString(s.Sum(nil))
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, "/cdn/"):
		h.serveCDN(w, r, strings.TrimPrefix(p, "/cdn/"))
	case strings.HasPrefix(p, "/api/models/"):
		h.serveTree(w, r, strings.Split(strings.TrimPrefix(p, "/api/models/"), "/"))
	default:
		h.serveResolve(w, r, strings.Split(strings.TrimPrefix(p, "/"), "/"))
	}
}

// repoState answers for a repository and revision that do not exist; it
// reports whether it did.
func (h *Hub) repoState(w http.ResponseWriter, repo, rev string) bool {
	known := false
	for k := range h.files {
		known = known || strings.HasPrefix(k, repo+"/")
	}
	switch {
	case !known:
		w.Header().Set("X-Error-Code", "RepoNotFound")
	case rev != "main" && rev != Commit:
		w.Header().Set("X-Error-Code", "RevisionNotFound")
	default:
		return false
	}
	w.WriteHeader(http.StatusNotFound)
	return true
}

func (h *Hub) serveResolve(w http.ResponseWriter, r *http.Request, parts []string) {
	if len(parts) < 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo := parts[0] + "/" + parts[1]
	rev, _ := url.PathUnescape(parts[3])
	path, _ := url.PathUnescape(strings.Join(parts[4:], "/"))
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.repoState(w, repo, rev) {
		return
	}
	f := h.files[repo+"/"+path]
	if f == nil {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", Commit)
	if !f.lfs {
		w.Header().Set("ETag", `"`+gitBlobID(f.data)+`"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
		if r.Method == http.MethodGet {
			h.gets = append(h.gets, path+" "+r.Header.Get("Range"))
			w.Write(f.data)
		}
		return
	}
	etag := f.etag
	if etag == "" {
		etag = SHA256(f.data)
	}
	w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.data)))
	w.Header().Set("Location", h.URL+"/cdn/"+url.PathEscape(repo+"/"+path))
	w.WriteHeader(http.StatusFound)
}

func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request, key string) {
	key, _ = url.PathUnescape(key)
	h.mu.Lock()
	f := h.files[key]
	var cut int64
	if f != nil {
		cut, f.cutAt = f.cutAt, 0
		h.gets = append(h.gets, strings.SplitN(key, "/", 3)[2]+" "+r.Header.Get("Range"))
	}
	h.mu.Unlock()
	if f == nil {
		http.NotFound(w, r)
		return
	}
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if err != nil || n >= len(f.data) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(f.data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(f.data)-1, len(f.data)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)-start))
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	body := f.data[start:]
	if cut > 0 && cut < int64(len(body)) {
		w.Write(body[:cut])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}
	w.Write(body)
}

// serveTree answers /api/models/{owner}/{name}/tree/{rev}[/{dir}] with
// the files and folders directly in dir, as the hub lists them.
func (h *Hub) serveTree(w http.ResponseWriter, r *http.Request, parts []string) {
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
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.repoState(w, repo, rev) {
		return
	}
	var entries []entry
	dirs := map[string]bool{}
	for k, f := range h.files {
		p, ok := strings.CutPrefix(k, repo+"/")
		if !ok {
			continue
		}
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
			e.Size = 134 // the LFS pointer's size, as the hub gives it
			e.LFS = &lfs{OID: SHA256(f.data), Size: len(f.data)}
		}
		entries = append(entries, e)
	}
	for d := range dirs {
		entries = append(entries, entry{Type: "directory", Path: d})
	}
	if len(entries) == 0 {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	if h.PageSize > 0 {
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		to := min(from+h.PageSize, len(entries))
		if to < len(entries) {
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?cursor=%d>; rel="next"`, h.URL, r.URL.EscapedPath(), to))
		}
		entries = entries[from:to]
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(entries)
}
