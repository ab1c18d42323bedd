package download

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/internal/hubtest"
)

func TestListFiles(t *testing.T) {
	h := hubtest.New(t)
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		return b
	}
	var want []RepoFile
	for i := range 5 {
		name := fmt.Sprintf("voices/v%d.pt", i)
		data := bytesOf(100 + i)
		h.Add("owner/repo", name, data, true)
		want = append(want, RepoFile{Path: name, Size: int64(len(data)), SHA256: hubtest.SHA256(data)})
	}
	h.Add("owner/repo", "voices/deeper/x.pt", bytesOf(10), true)
	cfg := bytesOf(50)
	h.Add("owner/repo", "config.json", cfg, false)
	h.PageSize = 2 // three pages for the voices
	o := Options{Endpoint: h.URL, CacheDir: t.TempDir()}

	got, err := ListFiles(context.Background(), "owner/repo", "main", "voices", o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("voices/ lists %+v, want %+v (LFS sizes and SHA-256, no sub-folder)", got, want)
	}
	root, err := ListFiles(context.Background(), "owner/repo", hubtest.Commit, "", o)
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
