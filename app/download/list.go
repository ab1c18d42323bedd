package download

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// RepoFile is one file of a repository's listing.
type RepoFile struct {
	Path   string // slash-separated, from the repository's root
	Size   int64  // bytes
	SHA256 string // hex, for a file kept in LFS; "" for one kept in git
}

// maxListing bounds the bytes of one page of a listing: the hub's pages
// hold 1000 entries of a few hundred bytes each, so 16 MiB is far past an
// honest answer and stops a broken server from filling memory.
const maxListing = 16 << 20

// maxListPages bounds the pages a listing follows, against a server whose
// next link never ends.
const maxListPages = 1000

// ListFiles lists the files in the folder dir ("" for the root) of repo
// at revision, without descending into sub-folders, through the hub's tree
// API (GET /api/models/{repo}/tree/{revision}/{dir}, the listing
// huggingface_hub's list_repo_tree reads), following its pages. It uses
// o's endpoint, token and client; a path that could climb out of a folder
// is refused, so every RepoFile.Path is safe to join to one.
func ListFiles(ctx context.Context, repo, revision, dir string, o Options) ([]RepoFile, error) {
	if revision == "" {
		revision = "main"
	}
	spec := Spec{Repo: repo, Revision: revision, File: dir}
	if dir == "" {
		spec.File = "."
	}
	if err := validateRepo(repo, revision); err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	if dir != "" {
		if err := checkPath("folder", dir); err != nil {
			return nil, fmt.Errorf("download: %w", err)
		}
	}
	h, err := newHub(o)
	if err != nil {
		return nil, err
	}
	u := h.endpoint.String() + "/api/models/" + repo + "/tree/" + url.PathEscape(revision)
	for seg := range strings.SplitSeq(dir, "/") {
		if seg != "" {
			u += "/" + url.PathEscape(seg)
		}
	}
	var files []RepoFile
	for page := 0; u != ""; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("download: listing %s: more than %d pages", spec, maxListPages)
		}
		batch, next, err := h.listPage(ctx, u, spec)
		if err != nil {
			return nil, err
		}
		for _, e := range batch {
			if e.Type != "file" {
				continue
			}
			if err := checkPath("file", e.Path); err != nil || (dir != "" && path.Dir(e.Path) != dir) || (dir == "" && strings.Contains(e.Path, "/")) {
				return nil, fmt.Errorf("download: listing %s: the hub listed %q, which is not a file of that folder", spec, e.Path)
			}
			f := RepoFile{Path: e.Path, Size: e.Size}
			if e.LFS != nil {
				f.Size = e.LFS.Size
				if !sha256Pattern.MatchString(e.LFS.OID) {
					return nil, fmt.Errorf("download: listing %s: %s has LFS id %q, not a SHA-256", spec, e.Path, e.LFS.OID)
				}
				f.SHA256 = strings.ToLower(e.LFS.OID)
			}
			files = append(files, f)
		}
		u = next
	}
	return files, nil
}

// treeEntry is one entry of the hub's tree API.
type treeEntry struct {
	Type string `json:"type"` // "file" or "directory"
	Path string `json:"path"`
	Size int64  `json:"size"`
	LFS  *struct {
		OID  string `json:"oid"` // the content's SHA-256
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// linkNext finds the next page in a Link header, as the hub paginates:
// <https://…?cursor=…>; rel="next".
var linkNext = regexp.MustCompile(`<([^>]+)>\s*;\s*rel="?next"?`)

// listPage fetches one page of a listing and the URL of the next, if any.
// The next page must be on the endpoint: the token goes with it.
func (h *hub) listPage(ctx context.Context, u string, spec Spec) ([]treeEntry, string, error) {
	resp, err := h.do(ctx, http.MethodGet, u, http.Header{"Accept": {"application/json"}}, func(*http.Response) bool { return true })
	if err != nil {
		return nil, "", fmt.Errorf("download: listing %s: %w", spec, err)
	}
	defer resp.Body.Close()
	if err := h.statusError(resp, spec); err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListing+1))
	if err != nil {
		return nil, "", fmt.Errorf("download: listing %s: %w", spec, err)
	}
	if len(body) > maxListing {
		return nil, "", fmt.Errorf("download: listing %s: the answer is over %d bytes", spec, maxListing)
	}
	var entries []treeEntry
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, "", fmt.Errorf("download: listing %s: %s answered what is not the hub's file listing (%w)", spec, h.endpoint, err)
	}
	var next string
	if m := linkNext.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
		nu, err := resp.Request.URL.Parse(m[1])
		if err != nil || origin(nu) != origin(h.endpoint) {
			return nil, "", fmt.Errorf("download: listing %s: next page %q is not on %s", spec, m[1], h.endpoint)
		}
		next = nu.String()
	}
	return entries, next, nil
}
