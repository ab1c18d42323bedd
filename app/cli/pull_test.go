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

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/internal/hubtest"
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

// TestPullKokoroCommand: hearth pull hexgrad/Kokoro-82M --voices puts the
// model and those voices where hearth speak looks by default, so that
// speak lists them with no --model and no other step.
func TestPullKokoroCommand(t *testing.T) {
	hub := hubtest.New(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // the default Kokoro directory lies under it
	t.Setenv("HOME", t.TempDir())
	hub.Add(app.KokoroRepo, "config.json", []byte(`{"n_token": 178}`), false)
	hub.Add(app.KokoroRepo, "kokoro-v1_0.pth", bytes.Repeat([]byte("weights "), 10000), true)
	for _, v := range []string{"af_heart", "am_adam", "bf_emma"} {
		hub.Add(app.KokoroRepo, "voices/"+v+".pt", bytes.Repeat([]byte(v), 500), true)
	}
	def, err := app.DefaultKokoroDir()
	if err != nil {
		t.Fatal(err)
	}

	stdout, _, err := runModelCmd(t, "", "pull", "hexgrad/Kokoro-82M@main", "--voices", "af_heart,bf_emma", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep kokoroPullReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json is not JSON: %v\n%s", err, stdout)
	}
	if rep.Dir != def || rep.Commit != hubtest.Commit || strings.Join(rep.Voices, ",") != "af_heart,bf_emma" || rep.Fetched != rep.Bytes {
		t.Errorf("report %+v, want the default Kokoro directory %s and the two voices, all fetched", rep, def)
	}
	stdout, _, err = runModelCmd(t, "", "speak", "--list-voices")
	if err != nil || stdout != "af_heart\nbf_emma\n" {
		t.Errorf("hearth speak --list-voices after the pull: %q, %v", stdout, err)
	}

	// --dir fills another directory, which --model then reads; the path
	// alone is printed.
	other := filepath.Join(t.TempDir(), "kokoro")
	stdout, _, err = runModelCmd(t, "", "pull", "hexgrad/Kokoro-82M", "--voices", "am_adam", "--dir", other)
	if err != nil || stdout != other+"\n" {
		t.Errorf("pull --dir: %q, %v; want the directory printed", stdout, err)
	}
	if stdout, _, err = runModelCmd(t, "", "speak", "--model", other, "--list-voices"); err != nil || stdout != "am_adam\n" {
		t.Errorf("hearth speak --model %s --list-voices: %q, %v", other, stdout, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"hexgrad/Kokoro-82M", "--voices", "zz_nobody"}, `no voice "zz_nobody": it has af_heart, am_adam, bf_emma`},
		{[]string{"hexgrad/Kokoro-82M@v9"}, "no revision v9"},
		{[]string{"hexgrad/Kokoro-82M@"}, "empty revision"},
		{[]string{"owner/repo:m.gguf", "--voices", "af_heart"}, "--voices and --dir are for hexgrad/Kokoro-82M"},
	} {
		_, _, err := runModelCmd(t, "", append([]string{"pull"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("hearth pull %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
