package download

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// hubFile is a file in the fake hub.
type hubFile struct {
	data []byte
	lfs  bool   // served through a redirect to the CDN, as large files are
	etag string // what the hub publishes; "" means the true one
}

// getLog is one GET the fake hub or its CDN answered.
type getLog struct {
	path, rng, auth string
}

// fakeHub serves the hub's URL layout: HEAD and GET on
// /{owner}/{name}/resolve/{rev}/{file} answer with X-Repo-Commit and the
// ETag, and LFS files redirect to /cdn/{sha256} on cdn, which serves the
// bytes with Range support. Its knobs reproduce the faults a download
// meets; the ones on the body act on the first GET of the CDN only.
type fakeHub struct {
	t     *testing.T
	hub   *httptest.Server
	cdn   *httptest.Server // the hub itself unless a test splits them
	files map[string]*hubFile
	gated map[string]string // repository → the token that opens it

	ignoreRange bool          // answer a Range request with the whole file (200)
	rejectRange bool          // answer a Range request with 416
	chunkDelay  time.Duration // pause between 64 KiB chunks
	cutAt       int64         // abort the connection after this many body bytes
	pauseAt     int64         // stop after this many bytes, close paused, wait for the client to go
	paused      chan struct{}
	started     chan struct{} // closed when the first body GET arrives, when not nil
	hold        chan struct{} // that GET then waits for this, when not nil

	mu      sync.Mutex
	heads   int
	gets    []getLog
	hubAuth []string
	served  int64
	cdnGets int
}

func newFakeHub(t *testing.T, split bool) *fakeHub {
	t.Helper()
	// The developer's own token must not reach the fake hub, nor decide
	// the gated cases.
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")
	h := &fakeHub{t: t, files: map[string]*hubFile{}, gated: map[string]string{}}
	h.hub = httptest.NewServer(http.HandlerFunc(h.serveHub))
	t.Cleanup(h.hub.Close)
	h.cdn = h.hub
	if split {
		h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
		t.Cleanup(h.cdn.Close)
	}
	return h
}

// add puts a file into the fake hub and returns its content.
func (h *fakeHub) add(repo, path string, size int, lfs bool) []byte {
	rng := rand.New(rand.NewChaCha8([32]byte{byte(size), byte(len(path))}))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	h.files[repo+"/"+path] = &hubFile{data: data, lfs: lfs}
	return data
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// gitBlobID is the git object id the hub sends as the ETag of a file kept
// in git rather than LFS.
func gitBlobID(b []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(b))
	s.Write(b)
	return hex.EncodeToString(s.Sum(nil))
}

func (h *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/cdn/") {
		h.serveCDN(w, r)
		return
	}
	h.mu.Lock()
	h.hubAuth = append(h.hubAuth, r.Header.Get("Authorization"))
	if r.Method == http.MethodHead {
		h.heads++
	} else {
		h.gets = append(h.gets, getLog{r.URL.Path, r.Header.Get("Range"), r.Header.Get("Authorization")})
	}
	h.mu.Unlock()

	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if len(parts) < 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo := parts[0] + "/" + parts[1]
	rev, _ := url.PathUnescape(parts[3])
	file, _ := url.PathUnescape(strings.Join(parts[4:], "/"))
	known := false
	for k := range h.files {
		known = known || strings.HasPrefix(k, repo+"/")
	}
	if need, ok := h.gated[repo]; ok && r.Header.Get("Authorization") != "Bearer "+need {
		status := http.StatusUnauthorized
		if r.Header.Get("Authorization") != "" {
			status = http.StatusForbidden
		}
		w.Header().Set("X-Error-Code", "GatedRepo")
		w.WriteHeader(status)
		return
	}
	f := h.files[repo+"/"+file]
	switch {
	case !known:
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	case rev != "main" && rev != testCommit:
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	case f == nil:
		w.Header().Set("X-Error-Code", "EntryNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", testCommit)
	if !f.lfs {
		w.Header().Set("ETag", `"`+gitBlobID(f.data)+`"`)
		h.serveBytes(w, r, f.data)
		return
	}
	etag := f.etag
	if etag == "" {
		etag = sha256Hex(f.data)
	}
	w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.data)))
	w.Header().Set("Location", h.cdn.URL+"/cdn/"+sha256Hex(f.data)+"?X-Amz-Signature=abc")
	w.WriteHeader(http.StatusFound)
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.gets = append(h.gets, getLog{r.URL.Path, r.Header.Get("Range"), r.Header.Get("Authorization")})
	h.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/cdn/")
	for _, f := range h.files {
		if sha256Hex(f.data) == key {
			h.serveBytes(w, r, f.data)
			return
		}
	}
	http.NotFound(w, r)
}

// serveBytes answers a GET of data, honouring "Range: bytes=N-" unless
// told otherwise, and applies the body knobs to the first CDN GET.
func (h *fakeHub) serveBytes(w http.ResponseWriter, r *http.Request, data []byte) {
	w.Header().Set("Accept-Ranges", "bytes")
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		return
	}
	h.mu.Lock()
	h.cdnGets++
	first := h.cdnGets == 1
	h.mu.Unlock()

	start, status := 0, http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" && !h.ignoreRange {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if h.rejectRange || err != nil || n >= len(data) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start, status = n, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(data)-1, len(data)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)-start))
	w.WriteHeader(status)
	if first && h.started != nil {
		close(h.started)
	}
	if first && h.hold != nil {
		<-h.hold
	}
	body := data[start:]
	var sent int64
	for len(body) > 0 {
		n := min(len(body), 64<<10)
		if first && h.cutAt > 0 {
			n = min(n, int(h.cutAt-sent))
		}
		if first && h.pauseAt > 0 {
			n = min(n, int(h.pauseAt-sent))
		}
		m, err := w.Write(body[:n])
		h.mu.Lock()
		h.served += int64(m)
		h.mu.Unlock()
		if err != nil {
			return
		}
		body, sent = body[n:], sent+int64(n)
		if first && sent == h.cutAt {
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection drops mid-body
		}
		if first && sent == h.pauseAt {
			w.(http.Flusher).Flush()
			close(h.paused)
			<-r.Context().Done()
			return
		}
		if h.chunkDelay > 0 {
			w.(http.Flusher).Flush()
			time.Sleep(h.chunkDelay)
		}
	}
}

func (h *fakeHub) stats() (heads int, gets []getLog, served int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heads, append([]getLog(nil), h.gets...), h.served
}

// options points a download at the fake hub and a fresh cache.
func (h *fakeHub) options() Options {
	return Options{Endpoint: h.hub.URL, CacheDir: h.t.TempDir()}
}

// checkCached checks the cache layout after a download of repo's file.
func checkCached(t *testing.T, cache, repo, file string, data []byte, res Result) {
	t.Helper()
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	blob := filepath.Join(dir, "blobs", sha256Hex(data))
	snap := filepath.Join(dir, "snapshots", testCommit, filepath.FromSlash(file))
	if res.Path != snap || res.Blob != blob || res.Commit != testCommit {
		t.Errorf("result %+v, want path %s, blob %s", res, snap, blob)
	}
	if res.SHA256 != sha256Hex(data) || res.Size != int64(len(data)) {
		t.Errorf("result sha256 %s size %d, want %s %d", res.SHA256, res.Size, sha256Hex(data), len(data))
	}
	if got, err := os.ReadFile(blob); err != nil || !bytes.Equal(got, data) {
		t.Errorf("blob %s: %d bytes, err %v; want the file's %d bytes", blob, len(got), err, len(data))
	}
	want := strings.Repeat("../", 2+strings.Count(file, "/")) + "blobs/" + sha256Hex(data)
	if target, err := os.Readlink(snap); err != nil || target != filepath.FromSlash(want) {
		t.Errorf("snapshot link %s → %q (%v), want → %q", snap, target, err, want)
	}
	if got, err := os.ReadFile(snap); err != nil || !bytes.Equal(got, data) {
		t.Errorf("reading through the snapshot link: %v", err)
	}
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err != nil || string(ref) != testCommit {
		t.Errorf("refs/main = %q (%v), want %s", ref, err, testCommit)
	}
	for _, leftover := range []string{blob + ".incomplete", blob + ".lock"} {
		if _, err := os.Stat(leftover); err == nil {
			t.Errorf("%s left behind", leftover)
		}
	}
}

func TestDownloadFresh(t *testing.T) {
	for _, file := range []string{"model-Q4_K_M.gguf", "sub/dir/model-Q4_K_M.gguf"} {
		t.Run(file, func(t *testing.T) {
			h := newFakeHub(t, false)
			data := h.add("owner/repo", file, 3<<20+123, true)
			o := h.options()
			res, err := Download(context.Background(), Spec{"owner/repo", "main", file}, o)
			if err != nil {
				t.Fatal(err)
			}
			checkCached(t, o.CacheDir, "owner/repo", file, data, res)
			if res.Fetched != int64(len(data)) {
				t.Errorf("Fetched = %d, want %d", res.Fetched, len(data))
			}
			_, gets, _ := h.stats()
			// The HEAD's redirect names the CDN URL, fetched directly.
			if len(gets) != 1 || gets[0].rng != "" || !strings.HasPrefix(gets[0].path, "/cdn/") {
				t.Errorf("GETs %+v, want one whole-file GET of the CDN", gets)
			}
		})
	}
}

func TestDownloadByCommitWritesNoRef(t *testing.T) {
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "m.gguf", 1000, true)
	o := h.options()
	path, err := Fetch(context.Background(), Spec{"owner/repo", testCommit, "m.gguf"}, o)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%s: %v", path, err)
	}
	if _, err := os.Stat(filepath.Join(o.CacheDir, "models--owner--repo", "refs")); err == nil {
		t.Error("a download by commit wrote refs/, which only names branches and tags")
	}
}

func TestDownloadFileKeptInGit(t *testing.T) {
	// A small file outside LFS: HEAD answers 200 with the git blob id as
	// ETag, and the resolve URL serves the bytes itself.
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "tiny.gguf", 5000, false)
	o := h.options()
	res, err := Download(context.Background(), Spec{"owner/repo", "main", "tiny.gguf"}, o)
	if err != nil {
		t.Fatal(err)
	}
	wantBlob := filepath.Join(o.CacheDir, "models--owner--repo", "blobs", gitBlobID(data))
	if res.Blob != wantBlob || res.SHA256 != sha256Hex(data) || res.Size != int64(len(data)) {
		t.Errorf("result %+v, want blob %s and the content's SHA-256", res, wantBlob)
	}
	if got, err := os.ReadFile(res.Path); err != nil || !bytes.Equal(got, data) {
		t.Errorf("%s: %v", res.Path, err)
	}
}

func TestDownloadProgress(t *testing.T) {
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "m.gguf", 3<<20, true)
	h.chunkDelay = 8 * time.Millisecond // 48 chunks: about 400 ms
	o := h.options()
	type call struct {
		done, total int64
		at          time.Time
	}
	// Each call is stamped with the time the throttle judged it by, not
	// the time the callback ran: a callback delayed by load would shrink
	// the gap to the next one without the throttle being wrong.
	var stamp time.Time
	defer func(c func() time.Time) { clock = c }(clock)
	clock = func() time.Time { stamp = time.Now(); return stamp }
	var calls []call
	o.Progress = func(done, total int64) { calls = append(calls, call{done, total, stamp}) }
	if _, err := Fetch(context.Background(), Spec{"owner/repo", "main", "m.gguf"}, o); err != nil {
		t.Fatal(err)
	}
	if len(calls) < 3 {
		t.Fatalf("%d progress calls over a slow download, want the start, some in between and the end", len(calls))
	}
	for i, c := range calls {
		if c.total != int64(len(data)) {
			t.Errorf("call %d: total %d, want %d", i, c.total, len(data))
		}
		if i > 0 && c.done < calls[i-1].done {
			t.Errorf("call %d: done went back from %d to %d", i, calls[i-1].done, c.done)
		}
		// Every call but the last is throttled.
		if i > 0 && i < len(calls)-1 && c.at.Sub(calls[i-1].at) < progressEvery {
			t.Errorf("calls %d and %d only %v apart", i-1, i, c.at.Sub(calls[i-1].at))
		}
	}
	if last := calls[len(calls)-1]; last.done != last.total {
		t.Errorf("last call %d of %d, want done == total", last.done, last.total)
	}
}

func TestDownloadResumes(t *testing.T) {
	const size = 3<<20 + 77
	cases := []struct {
		name    string
		setup   func(h *fakeHub, blob string, data []byte)
		retries int
		runs    int   // Downloads until one succeeds
		rangeAt int64 // the Range the resuming GET must carry; -1: any after a cut
	}{
		{
			name: "a part left by an earlier run",
			setup: func(h *fakeHub, blob string, data []byte) {
				writePart(h.t, blob, data[:size/3])
			},
			runs: 1, rangeAt: size / 3,
		},
		{
			name:  "a connection cut half way, run again",
			setup: func(h *fakeHub, _ string, _ []byte) { h.cutAt = size / 2 },
			runs:  2, rangeAt: -1,
		},
		{
			name:    "a connection cut half way, retried in the same run",
			setup:   func(h *fakeHub, _ string, _ []byte) { h.cutAt = size / 2 },
			retries: 1, runs: 1, rangeAt: -1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHub(t, false)
			data := h.add("owner/repo", "m.gguf", size, true)
			o := h.options()
			o.Retries = c.retries
			blob := filepath.Join(o.CacheDir, "models--owner--repo", "blobs", sha256Hex(data))
			c.setup(h, blob, data)
			spec := Spec{"owner/repo", "main", "m.gguf"}
			var partSize int64
			for run := 1; ; run++ {
				res, err := Download(context.Background(), spec, o)
				if run < c.runs {
					if err == nil || !strings.Contains(err.Error(), "connection lost") {
						t.Fatalf("run %d: %v, want a lost connection", run, err)
					}
					fi, serr := os.Stat(blob + ".incomplete")
					if serr != nil || fi.Size() == 0 || fi.Size() > size/2 {
						t.Fatalf("after the cut: %v, %v; want a part of at most %d bytes kept", fi, serr, size/2)
					}
					partSize = fi.Size()
					continue
				}
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				checkCached(t, o.CacheDir, "owner/repo", "m.gguf", data, res)
				break
			}
			_, gets, served := h.stats()
			last := gets[len(gets)-1]
			want := fmt.Sprintf("bytes=%d-", c.rangeAt)
			if c.rangeAt < 0 && partSize > 0 {
				want = fmt.Sprintf("bytes=%d-", partSize)
			}
			if c.rangeAt < 0 && partSize == 0 {
				// Retried in one run: the part's size is not visible from here.
				if !strings.HasPrefix(last.rng, "bytes=") || last.rng == "bytes=0-" {
					t.Errorf("the resuming GET carried Range %q, want bytes=N- with N > 0", last.rng)
				}
			} else if last.rng != want {
				t.Errorf("the resuming GET carried Range %q, want %q", last.rng, want)
			}
			// The file crosses the wire once (a cut may lose what was in
			// flight), plus nothing for a part made beforehand.
			wantServed := int64(size)
			if c.rangeAt > 0 {
				wantServed -= c.rangeAt
			}
			if served < wantServed || served > wantServed+wantServed/10 {
				t.Errorf("served %d bytes, want about %d", served, wantServed)
			}
		})
	}
}

// writePart puts the first bytes of a file where an interrupted download
// leaves them.
func writePart(t *testing.T, blob string, part []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob+".incomplete", part, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDownloadStartsOverWhenTheServerCannotResume(t *testing.T) {
	cases := []struct {
		name    string
		knob    func(h *fakeHub)
		retries int
	}{
		{"Range ignored (200)", func(h *fakeHub) { h.ignoreRange = true }, 0},
		{"Range refused (416)", func(h *fakeHub) { h.rejectRange = true }, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHub(t, false)
			data := h.add("owner/repo", "m.gguf", 1<<20+5, true)
			c.knob(h)
			o := h.options()
			o.Retries = c.retries
			blob := filepath.Join(o.CacheDir, "models--owner--repo", "blobs", sha256Hex(data))
			// A part whose bytes would be wrong if the whole file were
			// appended to it.
			writePart(t, blob, data[:4000])
			res, err := Download(context.Background(), Spec{"owner/repo", "main", "m.gguf"}, o)
			if err != nil {
				t.Fatal(err)
			}
			checkCached(t, o.CacheDir, "owner/repo", "m.gguf", data, res)
		})
	}
}

func TestDownloadChecksumMismatch(t *testing.T) {
	h := newFakeHub(t, false)
	h.add("owner/repo", "m.gguf", 200000, true)
	wrong := strings.Repeat("ab", 32)
	h.files["owner/repo/m.gguf"].etag = wrong
	o := h.options()
	_, err := Download(context.Background(), Spec{"owner/repo", "main", "m.gguf"}, o)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("err = %v, want ErrChecksum", err)
	}
	data := h.files["owner/repo/m.gguf"].data
	for _, want := range []string{wrong, sha256Hex(data)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	blob := filepath.Join(o.CacheDir, "models--owner--repo", "blobs", wrong)
	for _, p := range []string{blob, blob + ".incomplete", filepath.Join(o.CacheDir, "models--owner--repo", "snapshots", testCommit, "m.gguf")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after a checksum mismatch", p)
		}
	}
}

func TestDownloadHubErrors(t *testing.T) {
	h := newFakeHub(t, false)
	h.add("owner/repo", "m.gguf", 100, true)
	h.add("owner/gated", "m.gguf", 100, true)
	h.gated["owner/gated"] = "right-token"
	cases := []struct {
		spec  Spec
		token string
		is    error
		want  string
	}{
		{Spec{"owner/none", "main", "m.gguf"}, "", ErrNotFound, "no repository owner/none"},
		{Spec{"owner/repo", "main", "other.gguf"}, "", ErrNotFound, "no file other.gguf in repository owner/repo at revision main"},
		{Spec{"owner/repo", "v9", "m.gguf"}, "", ErrNotFound, "no revision v9 in repository owner/repo"},
		{Spec{"owner/gated", "main", "m.gguf"}, "", ErrAccess, "gated or private repository: set HF_TOKEN"},
		{Spec{"owner/gated", "main", "m.gguf"}, "wrong-token", ErrAccess, "HF_TOKEN does not open it"},
	}
	for _, c := range cases {
		o := h.options()
		o.Token = c.token
		_, err := Download(context.Background(), c.spec, o)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v with token %q: %v, want %v containing %q", c.spec, c.token, err, c.is, c.want)
		}
	}
	// The right token opens the gated repository.
	o := h.options()
	o.Token = "right-token"
	if _, err := Download(context.Background(), Spec{"owner/gated", "main", "m.gguf"}, o); err != nil {
		t.Errorf("gated repository with its token: %v", err)
	}
}

func TestDownloadSkipsACachedBlob(t *testing.T) {
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "m.gguf", 100000, true)
	o := h.options()
	spec := Spec{"owner/repo", "main", "m.gguf"}
	first, err := Download(context.Background(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	// Take away the snapshot link and the ref: the next call must fix
	// them up without downloading again.
	os.Remove(first.Path)
	os.RemoveAll(filepath.Join(o.CacheDir, "models--owner--repo", "refs"))
	_, getsBefore, _ := h.stats()
	var calls [][2]int64
	o.Progress = func(done, total int64) { calls = append(calls, [2]int64{done, total}) }
	res, err := Download(context.Background(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	heads, gets, _ := h.stats()
	if len(gets) != len(getsBefore) || heads != 2 {
		t.Errorf("second download: %d HEADs and %d new GETs, want 2 HEADs in all and no GET", heads, len(gets)-len(getsBefore))
	}
	if res.Fetched != 0 {
		t.Errorf("Fetched = %d, want 0", res.Fetched)
	}
	checkCached(t, o.CacheDir, "owner/repo", "m.gguf", data, res)
	if len(calls) != 1 || calls[0] != [2]int64{int64(len(data)), int64(len(data))} {
		t.Errorf("progress calls %v, want one saying the file is complete", calls)
	}
}

func TestDownloadCancelThenResume(t *testing.T) {
	const size, pause = 2<<20 + 9, 1 << 20
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "m.gguf", size, true)
	h.pauseAt, h.paused = pause, make(chan struct{})
	o := h.options()
	blob := filepath.Join(o.CacheDir, "models--owner--repo", "blobs", sha256Hex(data))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the bytes sent are on disk, so what is kept is known.
		<-h.paused
		for {
			if fi, err := os.Stat(blob + ".incomplete"); err == nil && fi.Size() == pause {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	spec := Spec{"owner/repo", "main", "m.gguf"}
	_, err := Download(ctx, spec, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if fi, err := os.Stat(blob + ".incomplete"); err != nil || fi.Size() != pause {
		t.Fatalf("after the cancel: %v %v, want a part of %d bytes", fi, err, pause)
	}
	res, err := Download(context.Background(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	checkCached(t, o.CacheDir, "owner/repo", "m.gguf", data, res)
	_, gets, served := h.stats()
	if last := gets[len(gets)-1]; last.rng != fmt.Sprintf("bytes=%d-", pause) {
		t.Errorf("the resuming GET carried Range %q, want bytes=%d-", last.rng, pause)
	}
	if served != size || res.Fetched != size-pause {
		t.Errorf("served %d bytes, the resume fetched %d; want %d and %d", served, res.Fetched, size, size-pause)
	}
}

func TestDownloadTokenStaysOnTheEndpoint(t *testing.T) {
	h := newFakeHub(t, true)
	data := h.add("owner/gated", "m.gguf", 70000, true)
	h.gated["owner/gated"] = "secret"
	o := h.options()
	o.Token = "secret"
	res, err := Download(context.Background(), Spec{"owner/gated", "main", "m.gguf"}, o)
	if err != nil {
		t.Fatal(err)
	}
	checkCached(t, o.CacheDir, "owner/gated", "m.gguf", data, res)
	_, gets, _ := h.stats()
	if len(gets) != 1 || !strings.HasPrefix(gets[0].path, "/cdn/") || gets[0].auth != "" {
		t.Errorf("GETs %+v, want one to the CDN on its other host, without Authorization", gets)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.hubAuth {
		if a != "Bearer secret" {
			t.Errorf("the hub got Authorization %q, want the token", a)
		}
	}
}

func TestDownloadTokenFollowsRedirectsOnTheEndpointOnly(t *testing.T) {
	// A file kept in git is fetched from the resolve URL itself, through
	// whatever redirects the hub makes: here to another host, which must
	// not get the token, and back to the hub, which needs it again.
	h := newFakeHub(t, false)
	data := h.add("owner/gated", "m.gguf", 3000, false)
	h.gated["owner/gated"] = "secret"
	var mu sync.Mutex
	var away []string // Authorization headers the other host got
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		away = append(away, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Redirect(w, r, h.hub.URL+r.URL.Path+"?back=1", http.StatusFound)
	}))
	defer other.Close()
	hub := h.hub.Config.Handler
	h.hub.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("back") == "" {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		hub.ServeHTTP(w, r)
	})
	o := h.options()
	o.Token = "secret"
	res, err := Download(context.Background(), Spec{"owner/gated", "main", "m.gguf"}, o)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(res.Path); !bytes.Equal(got, data) {
		t.Error("the snapshot does not hold the file")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(away) != 1 || away[0] != "" {
		t.Errorf("the other host got Authorization headers %q, want one request without", away)
	}
}

func TestDownloadTokenFromEnvironment(t *testing.T) {
	h := newFakeHub(t, false)
	h.add("owner/gated", "m.gguf", 100, true)
	h.gated["owner/gated"] = "from-env"
	t.Setenv("HF_TOKEN", "from-env")
	if _, err := Download(context.Background(), Spec{"owner/gated", "main", "m.gguf"}, h.options()); err != nil {
		t.Fatal(err)
	}
}

func TestDownloadLockMakesASecondDownloadWait(t *testing.T) {
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "m.gguf", 1<<20, true)
	h.started, h.hold = make(chan struct{}), make(chan struct{})
	o := h.options()
	spec := Spec{"owner/repo", "main", "m.gguf"}

	type outcome struct {
		res Result
		err error
	}
	first := make(chan outcome)
	go func() {
		res, err := Download(context.Background(), spec, o)
		first <- outcome{res, err}
	}()
	<-h.started // the first download holds the lock and is fetching

	waited := make(chan string, 1)
	second := make(chan outcome)
	o2 := o
	o2.Waiting = func(lock string) { waited <- lock }
	go func() {
		res, err := Download(context.Background(), spec, o2)
		second <- outcome{res, err}
	}()
	lock := <-waited
	if !strings.HasSuffix(lock, sha256Hex(data)+".lock") {
		t.Errorf("waited on %s, want blobs/<sha256>.lock", lock)
	}
	close(h.hold)
	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatalf("first: %v, second: %v", a.err, b.err)
	}
	checkCached(t, o.CacheDir, "owner/repo", "m.gguf", data, b.res)
	if a.res.Fetched != int64(len(data)) || b.res.Fetched != 0 {
		t.Errorf("fetched %d and %d bytes, want the file once, by the first", a.res.Fetched, b.res.Fetched)
	}
	if _, _, served := h.stats(); served != int64(len(data)) {
		t.Errorf("served %d bytes, want the file once (%d)", served, len(data))
	}
}

func TestDefaultCacheDir(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HF_HUB_CACHE": "/a/hub", "HF_HOME": "/b"}, "/a/hub"},
		{map[string]string{"HF_HOME": "/b"}, filepath.Join("/b", "hub")},
		{map[string]string{"XDG_CACHE_HOME": "/x"}, filepath.Join("/x", "huggingface", "hub")},
		{map[string]string{"HOME": "/home/u", "USERPROFILE": `C:\Users\u`}, ""},
	}
	for _, c := range cases {
		for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"} {
			t.Setenv(k, "")
		}
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		want := c.want
		if want == "" {
			home, _ := os.UserHomeDir()
			want = filepath.Join(home, ".cache", "huggingface", "hub")
		}
		if got := DefaultCacheDir(); got != want {
			t.Errorf("env %v: DefaultCacheDir() = %q, want %q", c.env, got, want)
		}
	}
}

func TestDefaultEndpoint(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "")
	if got := DefaultEndpoint(); got != "https://huggingface.co" {
		t.Errorf("DefaultEndpoint() = %q without HF_ENDPOINT", got)
	}
	t.Setenv("HF_ENDPOINT", "https://hf-mirror.example/")
	if got := DefaultEndpoint(); got != "https://hf-mirror.example" {
		t.Errorf("DefaultEndpoint() = %q with HF_ENDPOINT", got)
	}
}

func TestDownloadWriteErrorNamesThePathAndKeepsThePart(t *testing.T) {
	// /dev/full fails every write with ENOSPC: a full disk on demand.
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	h := newFakeHub(t, false)
	data := h.add("owner/repo", "m.gguf", 100000, true)
	o := h.options()
	blob := filepath.Join(o.CacheDir, "models--owner--repo", "blobs", sha256Hex(data))
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/full", blob+".incomplete"); err != nil {
		t.Skip("no symlinks here:", err)
	}
	_, err := Download(context.Background(), Spec{"owner/repo", "main", "m.gguf"}, o)
	if err == nil || !strings.Contains(err.Error(), blob+".incomplete") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err = %v, want the write error with the part's path", err)
	}
	if _, err := os.Lstat(blob + ".incomplete"); err != nil {
		t.Errorf("the part is gone after a write error: %v", err)
	}
	if _, err := os.Stat(blob); err == nil {
		t.Error("a blob exists after a write error")
	}
}
