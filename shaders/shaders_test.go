package shaders

import (
	"strings"
	"testing"
)

func TestIncludeIsExpanded(t *testing.T) {
	src, err := Source("matmul_legacy")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(src, includePrefix) {
		t.Error("include line left in the source")
	}
	for _, want := range []string{"struct MatmulParams", "fn reduce_and_store"} {
		if strings.Count(src, want) != 1 {
			t.Errorf("%q appears %d times, want once", want, strings.Count(src, want))
		}
	}
}

func TestUnknownFamily(t *testing.T) {
	if _, err := Source("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Fatalf("got %v", err)
	}
}
