// Package sharedtest finds the project's shared test data: the ggml vectors,
// the tokenizer references and the Kokoro voices in shared/testdata, which
// sits beside the checkout (../shared), not inside it.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns shared/testdata/<sub>, found by walking up from the working
// directory (a package directory under go test). A missing directory fails
// the test: the data is part of the test, so it is never skipped.
func Dir(tb testing.TB, sub string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "testdata", sub)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("shared/testdata/%s not found in the working directory or any parent of it", sub)
		}
		dir = parent
	}
}

// File reads shared/testdata/<sub>/<name>.
func File(tb testing.TB, sub, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(tb, sub), name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
