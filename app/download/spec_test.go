package download

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:8123")
	good := []struct {
		in   string
		want Spec
	}{
		{"bartowski/Llama-3.2-1B-Instruct-GGUF:Llama-3.2-1B-Instruct-Q4_K_M.gguf",
			Spec{"bartowski/Llama-3.2-1B-Instruct-GGUF", "main", "Llama-3.2-1B-Instruct-Q4_K_M.gguf"}},
		{"unsloth/Qwen3-4B-GGUF:sub/dir/Qwen3-4B-Q8_0.gguf", Spec{"unsloth/Qwen3-4B-GGUF", "main", "sub/dir/Qwen3-4B-Q8_0.gguf"}},
		{"owner/repo@v1.0:file.gguf", Spec{"owner/repo", "v1.0", "file.gguf"}},
		{"owner/repo@0123456789abcdef0123456789abcdef01234567:m.GGUF", Spec{"owner/repo", "0123456789abcdef0123456789abcdef01234567", "m.GGUF"}},
		{"owner/repo@refs/pr/1:m.gguf", Spec{"owner/repo", "refs/pr/1", "m.gguf"}},
		{"  owner/repo:m.gguf\n", Spec{"owner/repo", "main", "m.gguf"}},
		{"https://huggingface.co/owner/repo/resolve/main/m.gguf", Spec{"owner/repo", "main", "m.gguf"}},
		{"https://huggingface.co/owner/repo/resolve/main/m.gguf?download=true", Spec{"owner/repo", "main", "m.gguf"}},
		{"https://huggingface.co/owner/repo/blob/dev/a/b/m.gguf", Spec{"owner/repo", "dev", "a/b/m.gguf"}},
		{"https://huggingface.co/owner/repo/resolve/refs%2Fpr%2F3/m%20x.gguf", Spec{"owner/repo", "refs/pr/3", "m x.gguf"}},
		{"https://hf.co/owner/repo/resolve/main/m.gguf", Spec{"owner/repo", "main", "m.gguf"}},
		{"http://127.0.0.1:8123/owner/repo/resolve/main/m.gguf", Spec{"owner/repo", "main", "m.gguf"}},
	}
	for _, c := range good {
		got, err := ParseSpec(c.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}

	bad := []struct {
		in, want string // want: a substring of the error
	}{
		{"", "want owner/name:file.gguf"},
		{"owner/repo", "want owner/name:file.gguf"},
		{"owner/repo:", "empty file"},
		{"owner/repo:model.safetensors", "only .gguf files"},
		{"owner/repo:README.md", "only .gguf files"},
		{"owner/repo:../../etc/passwd.gguf", `".." segment`},
		{"owner/repo:a/../b.gguf", `".." segment`},
		{"owner/repo:/abs.gguf", "empty path segment"},
		{"owner/repo:a//b.gguf", "empty path segment"},
		{`owner/repo:a\b.gguf`, "backslash"},
		{"owner/repo:a:b.gguf", "colon"},
		{"owner/repo@:m.gguf", "empty revision"},
		{"owner/repo@../x:m.gguf", `".." segment`},
		{"repo:m.gguf", "want owner/name"},
		{"a/b/c:m.gguf", "want owner/name"},
		{"owner/re po:m.gguf", "not a valid"},
		{"owner/..:m.gguf", "not a valid"},
		{"own--er/repo:m.gguf", "not a valid"},
		{"-owner/repo:m.gguf", "not a valid"},
		{"http://huggingface.co/owner/repo/resolve/main/m.gguf", "is not the Hugging Face hub"},
		{"https://evil.example/owner/repo/resolve/main/m.gguf", "is not the Hugging Face hub"},
		{"http://127.0.0.1:9999/owner/repo/resolve/main/m.gguf", "is not the Hugging Face hub"},
		{"https://user:pw@huggingface.co/owner/repo/resolve/main/m.gguf", "user name or password"},
		{"https://huggingface.co/owner/repo/tree/main/m.gguf", "want owner/name:file.gguf"},
		{"https://huggingface.co/owner/repo", "want owner/name:file.gguf"},
		{"https://huggingface.co/datasets/owner/repo/resolve/main/m.gguf", "only model repositories"},
		{"https://huggingface.co/owner/repo/resolve/main/a/%2E%2E/m.gguf", `".." segment`},
		{"https://huggingface.co/owner/repo/resolve/main/m.bin", "only .gguf files"},
	}
	for _, c := range bad {
		_, err := ParseSpec(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSpec(%q): error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

func TestSpecStringRoundTrips(t *testing.T) {
	for _, s := range []Spec{
		{"owner/repo", "main", "m.gguf"},
		{"owner/repo", "refs/pr/1", "a/b/m.gguf"},
	} {
		got, err := ParseSpec(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", s.String(), got, err, s)
		}
	}
}
