// Package download fetches files of Hugging Face model repositories (GGUF
// models, Kokoro's weights and voices) into the Hugging Face hub cache, laid out as huggingface_hub lays it out
// (models--OWNER--NAME/blobs, snapshots/<commit>, refs), so a model pulled
// by Hearth is found by Python tools and the reverse, and nothing is
// downloaded twice.
//
// A download resumes where an interrupted one stopped (the bytes so far
// wait in blobs/<etag>.incomplete), is checked against the SHA-256 the hub
// publishes for LFS files, and holds a lock so two downloads of one file do
// not interleave. This is the only network access Hearth makes, and only
// when a user asks for a model.
package download

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Errors a caller may want to tell apart; the errors Fetch returns wrap
// them with the repository, revision and file.
var (
	// ErrNotFound: no such repository, revision or file.
	ErrNotFound = errors.New("not found")
	// ErrAccess: the repository is gated or private and the token, if
	// any, does not open it.
	ErrAccess = errors.New("no access")
	// ErrChecksum: the downloaded bytes do not hash to the SHA-256 the hub
	// published.
	ErrChecksum = errors.New("SHA-256 mismatch")
)

const (
	// progressEvery spaces Progress calls: a call per 1 MiB read would be
	// thousands a second on a fast link, and 10 a second reads as smooth.
	progressEvery = 100 * time.Millisecond
	// stallTimeout ends an attempt that has received nothing for this long;
	// a CDN connection can hang without closing, and the retry resumes it.
	stallTimeout = 60 * time.Second
	// maxRedirects bounds the redirect chain, as net/http's default does.
	maxRedirects = 10
	// copyBuffer is the read size: large enough that syscalls do not
	// dominate at multi-gigabit speeds.
	copyBuffer = 1 << 20
)

// Options configure a download. The zero value downloads from
// DefaultEndpoint into DefaultCacheDir with $HF_TOKEN, without retries.
type Options struct {
	// Endpoint is the hub's base URL; "" means DefaultEndpoint().
	Endpoint string
	// Token is a Hugging Face access token, sent as a Bearer token to the
	// endpoint only (never to the CDN it redirects to); "" means
	// $HF_TOKEN.
	Token string
	// CacheDir is the hub cache; "" means DefaultCacheDir().
	CacheDir string
	// Client makes the requests; nil means a client with
	// http.DefaultTransport. Its redirect policy is replaced: Fetch
	// follows redirects itself, to keep the token on the endpoint.
	Client *http.Client
	// Progress, when not nil, is called with the bytes of the file present
	// so far and its size (-1 if the hub did not say), at most every
	// 100 ms, and once at the end with done == total. done starts where a
	// resumed download stands and only falls back to 0 when a server
	// cannot resume.
	Progress func(done, total int64)
	// Retries is how many more times a dropped or stalled connection is
	// tried, each attempt resuming where the last one stopped.
	Retries int
	// Waiting, when not nil, is called once if another download of the
	// same file holds its lock, before Fetch waits for it to finish.
	Waiting func(lock string)
}

// Result describes a file Download put in the cache.
type Result struct {
	Path    string // the snapshot path: snapshots/<commit>/<file>, what a loader opens
	Blob    string // the file's content: blobs/<etag>
	Commit  string // the commit the revision resolved to
	SHA256  string // hex SHA-256 of the content
	Size    int64  // the file's size in bytes
	Fetched int64  // bytes received by this call; 0 when the cache had the file
}

// Fetch downloads spec's file into the cache unless it is there already
// and returns its snapshot path. See Download.
func Fetch(ctx context.Context, spec Spec, o Options) (path string, err error) {
	r, err := Download(ctx, spec, o)
	return r.Path, err
}

// Download resolves spec on the hub (one HEAD request, whose answer names
// the commit, the content's ETag and size, and where the bytes are),
// downloads the bytes into blobs/<etag> unless a blob of that size is
// there, and links snapshots/<commit>/<file> to it; refs/<revision>
// records the commit when the revision is a branch or a tag.
//
// When ctx is canceled, the connection drops for good or the disk fills,
// the bytes received stay in blobs/<etag>.incomplete and the next call
// resumes from them.
func Download(ctx context.Context, spec Spec, o Options) (Result, error) {
	if spec.Revision == "" {
		spec.Revision = "main"
	}
	if err := spec.validate(); err != nil {
		return Result{}, fmt.Errorf("download: %w", err)
	}
	h, err := newHub(o)
	if err != nil {
		return Result{}, err
	}
	cache := o.CacheDir
	if cache == "" {
		cache = DefaultCacheDir()
	}
	if cache == "" {
		return Result{}, errors.New("download: no cache folder: the home folder is unknown; set HF_HUB_CACHE")
	}

	m, err := h.head(ctx, spec)
	if err != nil {
		return Result{}, err
	}
	dir := repoDir(cache, spec.Repo)
	blob := filepath.Join(dir, "blobs", m.etag)
	res := Result{
		Path:   filepath.Join(dir, "snapshots", m.commit, filepath.FromSlash(spec.File)),
		Blob:   blob,
		Commit: m.commit,
		Size:   m.size,
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return Result{}, fmt.Errorf("download: %w", err)
	}
	var waiting func()
	if o.Waiting != nil {
		waiting = func() { o.Waiting(blob + ".lock") }
	}
	unlock, err := lockFile(ctx, blob+".lock", waiting)
	if err != nil {
		return Result{}, err
	}
	defer unlock()

	prog := &throttle{fn: o.Progress}
	// Checked under the lock: a download we waited for may have just
	// finished this blob.
	cached, err := blobComplete(blob, m.size)
	if err != nil {
		return Result{}, err
	}
	if cached {
		if res.SHA256, res.Size, err = cachedSum(blob, m.etag); err != nil {
			return Result{}, err
		}
		prog.report(res.Size, res.Size, true)
	} else {
		if res.SHA256, res.Fetched, err = h.fetchBlob(ctx, m, blob, prog, o.Retries); err != nil {
			return Result{}, err
		}
		if res.Size < 0 {
			if fi, err := os.Stat(blob); err == nil {
				res.Size = fi.Size()
			}
		}
	}

	if err := linkSnapshot(blob, res.Path); err != nil {
		return Result{}, err
	}
	if spec.Revision != m.commit {
		if err := writeRef(dir, spec.Revision, m.commit); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// hub makes the requests of one download.
type hub struct {
	endpoint *url.URL
	token    string
	client   *http.Client
}

func newHub(o Options) (*hub, error) {
	raw := strings.TrimRight(o.Endpoint, "/")
	if raw == "" {
		raw = DefaultEndpoint()
	}
	e, err := url.Parse(raw)
	if err != nil || (e.Scheme != "https" && e.Scheme != "http") || e.Host == "" {
		return nil, fmt.Errorf("download: endpoint %q: want an http(s)://host URL", raw)
	}
	token := o.Token
	if token == "" {
		token = os.Getenv("HF_TOKEN")
	}
	if token == "" {
		// The name huggingface_hub read before HF_TOKEN, still honoured.
		token = os.Getenv("HUGGING_FACE_HUB_TOKEN")
	}
	c := http.Client{}
	if o.Client != nil {
		c = *o.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &hub{endpoint: e, token: strings.TrimSpace(token), client: &c}, nil
}

// fileURL is the resolve URL of spec's file. The revision is escaped whole
// (refs/pr/1 → refs%2Fpr%2F1) and the file segment by segment, as
// huggingface_hub's hf_hub_url does.
func (h *hub) fileURL(spec Spec) string {
	segs := strings.Split(spec.File, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return h.endpoint.String() + "/" + spec.Repo + "/resolve/" + url.PathEscape(spec.Revision) + "/" + strings.Join(segs, "/")
}

// do sends a request, following redirects while follow says so. The token
// goes only to the endpoint's own origin: a CDN URL is pre-signed and must
// not learn it.
func (h *hub) do(ctx context.Context, method, rawURL string, hdr http.Header, follow func(*http.Response) bool) (*http.Response, error) {
	u := rawURL
	for hops := 0; ; hops++ {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return nil, err
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		req.Header.Set("User-Agent", "hearth")
		// The real size, not a gzip stream's, and ranges over the real bytes.
		req.Header.Set("Accept-Encoding", "identity")
		if h.token != "" && origin(req.URL) == origin(h.endpoint) {
			req.Header.Set("Authorization", "Bearer "+h.token)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			return nil, err
		}
		if !isRedirect(resp.StatusCode) || !follow(resp) {
			return resp, nil
		}
		loc, err := resp.Location()
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %s without a usable Location: %w", method, redact(u), resp.Status, err)
		}
		if hops == maxRedirects {
			return nil, fmt.Errorf("%s %s: more than %d redirects", method, redact(rawURL), maxRedirects)
		}
		u = loc.String()
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// origin is scheme://host:port with the default port written out, so that
// huggingface.co and huggingface.co:443 compare equal and two local test
// servers on different ports do not.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// redact drops a URL's query, where a CDN puts its signature, from error
// messages.
func redact(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		return raw[:i]
	}
	return raw
}

// meta is what the hub's HEAD answer says about a file.
type meta struct {
	commit   string // X-Repo-Commit
	etag     string // X-Linked-Etag or ETag, unquoted: sha256 hex for LFS files, the git blob id otherwise
	size     int64  // X-Linked-Size or Content-Length; -1 when neither
	location string // where a GET fetches the bytes
}

// Both name files in the cache, so a broken or hostile server must not be
// able to put a path separator or ".." in them.
var (
	commitPattern = regexp.MustCompile(`^[A-Za-z0-9]{1,128}$`)
	etagPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// head asks the hub about spec's file without following the redirect to
// the CDN, whose answer would lack the hub's headers. Other redirects (a
// renamed repository's) are followed until an answer carries X-Repo-Commit.
func (h *hub) head(ctx context.Context, spec Spec) (meta, error) {
	resp, err := h.do(ctx, http.MethodHead, h.fileURL(spec), nil, func(r *http.Response) bool {
		return r.Header.Get("X-Repo-Commit") == ""
	})
	if err != nil {
		return meta{}, fmt.Errorf("download: %s: %w", spec, err)
	}
	resp.Body.Close()
	if err := h.statusError(resp, spec); err != nil {
		return meta{}, err
	}
	hd := resp.Header
	m := meta{commit: hd.Get("X-Repo-Commit"), size: -1, location: resp.Request.URL.String()}
	etag := hd.Get("X-Linked-Etag")
	if etag == "" {
		etag = hd.Get("ETag")
	}
	m.etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	if !commitPattern.MatchString(m.commit) || !etagPattern.MatchString(m.etag) {
		return meta{}, fmt.Errorf("download: %s: %s answered without a usable X-Repo-Commit (%q) or ETag (%q); is it a Hugging Face hub?",
			spec, h.endpoint, m.commit, etag)
	}
	size := hd.Get("X-Linked-Size")
	if size == "" && resp.StatusCode/100 == 2 {
		// A redirect's Content-Length is its own body's, not the file's.
		size = hd.Get("Content-Length")
	}
	if n, err := strconv.ParseInt(size, 10, 64); err == nil && n >= 0 {
		m.size = n
	}
	if isRedirect(resp.StatusCode) {
		loc, err := resp.Location()
		if err != nil {
			return meta{}, fmt.Errorf("download: %s: %s without a usable Location: %w", spec, resp.Status, err)
		}
		m.location = loc.String()
	}
	return m, nil
}

// statusError turns a hub error answer into an error saying what to do;
// X-Error-Code tells a missing repository from a missing file, as
// huggingface_hub's hf_raise_for_status reads it.
func (h *hub) statusError(resp *http.Response, spec Spec) error {
	if resp.StatusCode < 400 {
		return nil
	}
	code := resp.Header.Get("X-Error-Code")
	page := h.endpoint.String() + "/" + spec.Repo
	switch {
	case code == "RepoNotFound":
		if h.token == "" {
			return fmt.Errorf("download: %w: no repository %s on %s (if it is private or gated, set HF_TOKEN)", ErrNotFound, spec.Repo, h.endpoint)
		}
		return fmt.Errorf("download: %w: no repository %s on %s that HF_TOKEN's account can see", ErrNotFound, spec.Repo, h.endpoint)
	case code == "RevisionNotFound":
		return fmt.Errorf("download: %w: no revision %s in repository %s", ErrNotFound, spec.Revision, spec.Repo)
	case code == "EntryNotFound" || resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("download: %w: no file %s in repository %s at revision %s", ErrNotFound, spec.File, spec.Repo, spec.Revision)
	case code == "GatedRepo" || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		if h.token == "" {
			return fmt.Errorf("download: %w: %s is a gated or private repository: set HF_TOKEN to an access token (%s/settings/tokens) of an account that has access",
				ErrAccess, spec.Repo, h.endpoint)
		}
		return fmt.Errorf("download: %w: %s is a gated or private repository and HF_TOKEN does not open it: accept its terms at %s, or check the token",
			ErrAccess, spec.Repo, page)
	}
	msg := resp.Status
	if m := resp.Header.Get("X-Error-Message"); m != "" {
		msg += ": " + m
	}
	return fmt.Errorf("download: %s: the hub answered %s", spec, msg)
}

// cachedSum is the SHA-256 and size of a blob already in the cache. An LFS
// blob's name is its SHA-256, checked when it was downloaded; another blob
// (a small file kept in git) is hashed, which is quick at its size.
func cachedSum(blob, etag string) (string, int64, error) {
	fi, err := os.Stat(blob)
	if err != nil {
		return "", 0, fmt.Errorf("download: %w", err)
	}
	if sha256Pattern.MatchString(etag) {
		return strings.ToLower(etag), fi.Size(), nil
	}
	f, err := os.Open(blob)
	if err != nil {
		return "", 0, fmt.Errorf("download: %w", err)
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", 0, fmt.Errorf("download: read %s: %w", blob, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), fi.Size(), nil
}

// part is blobs/<etag>.incomplete: the bytes received so far and their
// running SHA-256.
type part struct {
	f        *os.File
	path     string
	sum      hash.Hash
	off      int64 // bytes in the file
	received int64 // bytes received by this call
}

func (p *part) Write(b []byte) (int, error) {
	n, err := p.f.Write(b)
	p.sum.Write(b[:n])
	p.off += int64(n)
	p.received += int64(n)
	if err != nil {
		// A full disk lands here; the bytes so far stay for a resume.
		return n, fmt.Errorf("download: write %s: %w", p.path, err)
	}
	return n, nil
}

// reset empties the part, for a server that cannot resume it.
func (p *part) reset() error {
	if err := p.f.Truncate(0); err != nil {
		return fmt.Errorf("download: truncate %s: %w", p.path, err)
	}
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("download: %s: %w", p.path, err)
	}
	p.sum.Reset()
	p.off = 0
	return nil
}

// fetchBlob downloads m's bytes into blob through blob.incomplete, resuming
// what an earlier call left there, checks the SHA-256 and renames the file
// into place. It returns the SHA-256 and the bytes received.
func (h *hub) fetchBlob(ctx context.Context, m meta, blob string, prog *throttle, retries int) (string, int64, error) {
	inc := blob + ".incomplete"
	f, err := os.OpenFile(inc, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", 0, fmt.Errorf("download: %w", err)
	}
	defer f.Close() // after the explicit Close below, a no-op
	p := &part{f: f, path: inc, sum: sha256.New()}
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("download: %w", err)
	}
	p.off = fi.Size()
	if m.size >= 0 && p.off > m.size {
		// Longer than the file: left by another version of it. Start over.
		if err := p.reset(); err != nil {
			return "", 0, err
		}
	}
	if p.off > 0 {
		// Hash what is already there so that the check at the end covers
		// the whole file without reading it a second time.
		if _, err := io.Copy(p.sum, io.NewSectionReader(f, 0, p.off)); err != nil {
			return "", 0, fmt.Errorf("download: read %s: %w", inc, err)
		}
		if _, err := f.Seek(p.off, io.SeekStart); err != nil {
			return "", 0, fmt.Errorf("download: %s: %w", inc, err)
		}
	}

	for attempt := 0; m.size < 0 || p.off < m.size; attempt++ {
		retry, err := h.get(ctx, m, p, prog)
		if err == nil {
			break
		}
		if !retry || attempt >= retries {
			return "", p.received, err
		}
		// The first retry goes at once (a dropped connection is mostly a
		// blip); later ones wait 1, 2, 4, 8, then 16 s.
		if attempt > 0 {
			wait := min(time.Second<<(attempt-1), 16*time.Second)
			select {
			case <-ctx.Done():
				return "", p.received, fmt.Errorf("download: %w", ctx.Err())
			case <-time.After(wait):
			}
		}
	}
	prog.report(p.off, p.off, true)

	if err := f.Sync(); err != nil {
		return "", p.received, fmt.Errorf("download: sync %s: %w", inc, err)
	}
	if err := f.Close(); err != nil {
		return "", p.received, fmt.Errorf("download: close %s: %w", inc, err)
	}
	sum := hex.EncodeToString(p.sum.Sum(nil))
	if sha256Pattern.MatchString(m.etag) && !strings.EqualFold(sum, m.etag) {
		// Resuming would only append to bad bytes: drop them.
		os.Remove(inc)
		return "", p.received, fmt.Errorf("download: %w: %s hashes to %s, the hub published %s; the partial download was deleted, try again",
			ErrChecksum, filepath.Base(blob), sum, strings.ToLower(m.etag))
	}
	if err := os.Rename(inc, blob); err != nil {
		return "", p.received, fmt.Errorf("download: %w", err)
	}
	return sum, p.received, nil
}

// get makes one GET for the bytes from p.off on and appends them to p.
// retry says whether another attempt may succeed where this one failed.
func (h *hub) get(ctx context.Context, m meta, p *part, prog *throttle) (retry bool, err error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	watchdog := time.AfterFunc(stallTimeout, func() { stalled.Store(true); cancel() })
	defer watchdog.Stop()

	hdr := http.Header{}
	if p.off > 0 {
		hdr.Set("Range", fmt.Sprintf("bytes=%d-", p.off))
	}
	resp, err := h.do(actx, http.MethodGet, m.location, hdr, func(*http.Response) bool { return true })
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("download: %w", ctx.Err())
		}
		return true, fmt.Errorf("download: GET %s: %w", redact(m.location), err)
	}
	defer resp.Body.Close()

	total := m.size
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != p.off {
			if err := p.reset(); err != nil {
				return false, err
			}
			return true, fmt.Errorf("download: GET %s: asked for bytes from %d, got Content-Range %q; starting over",
				redact(m.location), p.off, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		if p.off > 0 {
			// The server ignored Range and sends the whole file: start
			// over rather than append a second copy.
			if err := p.reset(); err != nil {
				return false, err
			}
		}
		if total < 0 && resp.ContentLength >= 0 {
			total = resp.ContentLength
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// The part is at least as long as the file the server has now,
		// so it is not a prefix of it.
		if err := p.reset(); err != nil {
			return false, err
		}
		return true, fmt.Errorf("download: GET %s: range from byte %d not satisfiable; starting over", redact(m.location), p.off)
	case resp.StatusCode >= 500:
		return true, fmt.Errorf("download: GET %s: %s", redact(m.location), resp.Status)
	default:
		return false, fmt.Errorf("download: GET %s: %s", redact(m.location), resp.Status)
	}

	prog.report(p.off, total, false)
	buf := make([]byte, copyBuffer)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			watchdog.Reset(stallTimeout)
			if total >= 0 && p.off+int64(n) > total {
				os.Remove(p.path)
				return false, fmt.Errorf("download: GET %s: the server sent more than the %d bytes announced; the partial download was deleted",
					redact(m.location), total)
			}
			if _, err := p.Write(buf[:n]); err != nil {
				return false, err
			}
			prog.report(p.off, total, false)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("download: %w (%s kept in %s for a resume)", ctx.Err(), sofar(p.off, total), p.path)
			}
			why := rerr.Error()
			if stalled.Load() {
				why = fmt.Sprintf("no data for %v", stallTimeout)
			}
			return true, fmt.Errorf("download: GET %s: connection lost after %s: %s", redact(m.location), sofar(p.off, total), why)
		}
	}
	if m.size >= 0 && p.off < m.size {
		return true, fmt.Errorf("download: GET %s: the server closed the connection after %s", redact(m.location), sofar(p.off, m.size))
	}
	return false, nil
}

// sofar says how much of a file is there: "N of M bytes", or "N bytes"
// when the size is unknown.
func sofar(done, total int64) string {
	if total < 0 {
		return fmt.Sprintf("%d bytes", done)
	}
	return fmt.Sprintf("%d of %d bytes", done, total)
}

// rangeStart reads the first byte of a "bytes START-END/SIZE" Content-Range.
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(start), 10, 64)
	return n, err == nil
}

// clock is the throttle's time, a variable so the tests can read the
// stamps it spaces calls by.
var clock = time.Now

// throttle spaces calls to a progress function.
type throttle struct {
	fn         func(done, total int64)
	last       time.Time
	done, tot  int64
	calledOnce bool
}

// report calls fn unless it was called less than progressEvery ago; final
// calls it anyway, unless it would repeat the last call.
func (t *throttle) report(done, total int64, final bool) {
	if t.fn == nil {
		return
	}
	now := clock()
	if final {
		if t.calledOnce && t.done == done && t.tot == total {
			return
		}
	} else if t.calledOnce && now.Sub(t.last) < progressEvery {
		return
	}
	t.last, t.done, t.tot, t.calledOnce = now, done, total, true
	t.fn(done, total)
}
