package download

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Spec names one file of a Hugging Face model repository at one revision.
type Spec struct {
	Repo     string // "owner/name"
	Revision string // a branch, a tag or a commit; "main" when not given
	File     string // a slash-separated path inside the repository
}

// String is the spec in the form ParseSpec reads: owner/name[@rev]:file.
func (s Spec) String() string {
	if s.Revision == "" || s.Revision == "main" {
		return s.Repo + ":" + s.File
	}
	return s.Repo + "@" + s.Revision + ":" + s.File
}

// ParseSpec reads what a user names a file by:
//
//	owner/name:file.gguf              (revision main)
//	owner/name:sub/dir/file.gguf
//	owner/name@rev:file.gguf
//	https://huggingface.co/owner/name/resolve/REV/path/file.gguf
//	https://huggingface.co/owner/name/blob/REV/path/file.gguf[?download=true]
//
// A URL must be on huggingface.co, hf.co or the endpoint DefaultEndpoint
// names ($HF_ENDPOINT). Only .gguf files are accepted: of a file named by
// the user Hearth runs nothing else (Kokoro's files are fetched by the app,
// which knows their names). A path that could climb out of the cache
// ("..") is refused.
func ParseSpec(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	var spec Spec
	var err error
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		spec, err = parseURL(s, DefaultEndpoint())
	} else {
		spec, err = parseShort(s)
	}
	if err != nil {
		return Spec{}, fmt.Errorf("download: %q: %w", s, err)
	}
	if err := spec.validate(); err != nil {
		return Spec{}, fmt.Errorf("download: %q: %w", s, err)
	}
	if !strings.HasSuffix(strings.ToLower(spec.File), ".gguf") {
		return Spec{}, fmt.Errorf("download: %q: file %q: only .gguf files are downloaded by name (Kokoro-82M is pulled as hexgrad/Kokoro-82M)", s, spec.File)
	}
	return spec, nil
}

var errSpecForm = errors.New("want owner/name:file.gguf, owner/name@revision:file.gguf or a https://huggingface.co/owner/name/resolve/revision/file.gguf URL")

// parseShort reads owner/name[@rev]:file. A revision cannot hold a colon
// (git forbids it in ref names), so the first colon ends the repository part.
func parseShort(s string) (Spec, error) {
	repo, file, ok := strings.Cut(s, ":")
	if !ok {
		return Spec{}, errSpecForm
	}
	rev := "main"
	if r, v, ok := strings.Cut(repo, "@"); ok {
		repo, rev = r, v
		if rev == "" {
			return Spec{}, errors.New("empty revision after @")
		}
	}
	return Spec{Repo: repo, Revision: rev, File: file}, nil
}

// parseURL reads a resolve or blob URL. Its path is split before it is
// unescaped, so that a revision such as refs%2Fpr%2F1 stays one segment.
func parseURL(s, endpoint string) (Spec, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Spec{}, err
	}
	if u.User != nil {
		return Spec{}, errors.New("a URL with a user name or password is not accepted; set HF_TOKEN instead")
	}
	if !hubHost(u, endpoint) {
		return Spec{}, fmt.Errorf("%s://%s is not the Hugging Face hub (%s; set HF_ENDPOINT for a mirror)", u.Scheme, u.Host, endpoint)
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) > 0 && (parts[0] == "datasets" || parts[0] == "spaces") {
		return Spec{}, fmt.Errorf("a %s repository: only model repositories are downloaded", strings.TrimSuffix(parts[0], "s"))
	}
	if len(parts) < 5 || (parts[2] != "resolve" && parts[2] != "blob") {
		return Spec{}, errSpecForm
	}
	seg := make([]string, len(parts))
	for i, p := range parts {
		if seg[i], err = url.PathUnescape(p); err != nil {
			return Spec{}, err
		}
	}
	return Spec{
		Repo:     seg[0] + "/" + seg[1],
		Revision: seg[3],
		File:     strings.Join(seg[4:], "/"),
	}, nil
}

// hubHost reports whether u points at the hub: huggingface.co or hf.co over
// https, or the configured endpoint with its own scheme and port.
func hubHost(u *url.URL, endpoint string) bool {
	if e, err := url.Parse(endpoint); err == nil && e.Scheme == u.Scheme && strings.EqualFold(e.Host, u.Host) {
		return true
	}
	if u.Scheme != "https" {
		return false
	}
	switch strings.ToLower(u.Host) {
	case "huggingface.co", "hf.co", "www.huggingface.co":
		return true
	}
	return false
}

// repoPart is the hub's rule for an owner or a repository name: letters,
// digits, '-', '_' and '.', with no '--' or '..' and not starting or
// ending with '-' or '.'; 96 characters at most.
var repoPart = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,94}[A-Za-z0-9_]$|^[A-Za-z0-9_]$`)

func (s Spec) validate() error {
	if err := validateRepo(s.Repo, s.Revision); err != nil {
		return err
	}
	return checkPath("file", s.File)
}

// validateRepo checks a repository's name and a revision.
func validateRepo(repo, revision string) error {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("repository %q: want owner/name", repo)
	}
	for _, p := range []string{owner, name} {
		if !repoPart.MatchString(p) || strings.Contains(p, "--") || strings.Contains(p, "..") {
			return fmt.Errorf("repository %q: %q is not a valid owner or repository name", repo, p)
		}
	}
	// The revision names a file under refs/ once resolved, so it must not
	// climb out of it either.
	return checkPath("revision", revision)
}

// checkPath accepts a relative, slash-separated path whose segments are
// neither empty, "." nor "..", with no backslash, colon or control
// character (on Windows a colon opens an alternate data stream, and a
// backslash is a separator).
func checkPath(what, p string) error {
	if p == "" {
		return fmt.Errorf("empty %s", what)
	}
	if strings.ContainsAny(p, `\:`) {
		return fmt.Errorf("%s %q: backslash or colon in the path", what, p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s %q: control character in the path", what, p)
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%s %q: empty path segment (a leading, trailing or double slash)", what, p)
		case ".", "..":
			return fmt.Errorf("%s %q: %q segment in the path", what, p, seg)
		}
	}
	return nil
}
