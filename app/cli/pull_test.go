package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pullHub is a local stand-in for huggingface.co holding one LFS file,
// owner/repo:sub/m.gguf at commit pullCommit: HEAD and GET on the resolve
// URL redirect to /cdn/<sha256>, which serves the bytes with Range support.
func pullHub(t *testing.T, data []byte) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256(data)
	etag := hex.EncodeToString(sum[:])
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/owner/repo/resolve/main/sub/m.gguf":
			w.Header().Set("X-Repo-Commit", pullCommit)
			w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
			http.Redirect(w, r, srv.URL+"/cdn/"+etag, http.StatusFound)
		case "/cdn/" + etag:
			http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
		default:
			w.Header().Set("X-Error-Code", "EntryNotFound")
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	return srv
}

const pullCommit = "89abcdef0123456789abcdef0123456789abcdef"

func TestPullCommand(t *testing.T) {
	data := bytes.Repeat([]byte("GGUF pull test "), 40000)
	srv := pullHub(t, data)
	sum := sha256.Sum256(data)
	want := filepath.Join(os.Getenv("HF_HUB_CACHE"), "models--owner--repo", "snapshots", pullCommit, "sub", "m.gguf")

	stdout, _, err := execute(newPullCmd(), "owner/repo:sub/m.gguf", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep pullReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("hearth pull --json is not JSON: %v\n%s", err, stdout)
	}
	if rep.Path != want || rep.SHA256 != hex.EncodeToString(sum[:]) || rep.Bytes != int64(len(data)) ||
		rep.Commit != pullCommit || rep.Fetched != int64(len(data)) {
		t.Errorf("report %+v, want path %s, the file's sha256 and size, all of it fetched", rep, want)
	}
	if got, err := os.ReadFile(rep.Path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%s: %v", rep.Path, err)
	}

	// Again, by URL and without --json: the path alone, nothing fetched.
	stdout, _, err = execute(newPullCmd(), srv.URL+"/owner/repo/blob/main/sub/m.gguf?download=true")
	if err != nil {
		t.Fatal(err)
	}
	if stdout != want+"\n" {
		t.Errorf("hearth pull printed %q, want the path %q", stdout, want)
	}
}

func TestPullErrors(t *testing.T) {
	pullHub(t, []byte("GGUF"))
	cases := []struct {
		spec, want string
	}{
		{"owner/repo:sub/model.safetensors", "only .gguf files"},
		{"owner/repo:../m.gguf", `".." segment`},
		{"owner/repo:missing.gguf", "no file missing.gguf in repository owner/repo at revision main"},
		{"https://example.com/owner/repo/resolve/main/m.gguf", "is not the Hugging Face hub"},
	}
	for _, c := range cases {
		_, _, err := execute(newPullCmd(), c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("hearth pull %s: %v, want an error containing %q", c.spec, err, c.want)
		}
	}
}
