package shaders

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
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

// TestEntryPoints checks the list the kernel registry test compares the
// suite's dispatches with: entry points of families with and without
// includes, none from an include file.
func TestEntryPoints(t *testing.T) {
	entries, err := EntryPoints()
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, e := range entries {
		if has[e] {
			t.Errorf("%s listed twice", e)
		}
		has[e] = true
		family, _, _ := strings.Cut(e, ".")
		if strings.HasSuffix(family, "_common") {
			t.Errorf("%s: an include is not a family", e)
		}
	}
	for _, want := range []string{"norm.rmsnorm", "norm.layernorm", "norm_backward.rmsnorm_weight_grad", "softmax.softmax", "cross_entropy.backward", "conv1d.conv1d"} {
		if !has[want] {
			t.Errorf("%s missing from %d entry points", want, len(entries))
		}
	}
}

func TestEntryNames(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"@compute @workgroup_size(WG)\nfn a(@builtin(global_invocation_id) g: vec3<u32>) {}", []string{"a"}},
		{"@workgroup_size(64, 1, 1) @compute fn b() {}\n@compute\n@workgroup_size(WG)\nfn c() {}", []string{"b", "c"}},
		{"fn helper() {}\n// @compute @workgroup_size(WG) fn commented() {}\nconst X: u32 = 1u;", nil},
		{"@compute @workgroup_size(WG)\nfn d() { helper(); }\nfn helper() {}", []string{"d"}},
	} {
		if got := entryNames(tc.src); !slices.Equal(got, tc.want) {
			t.Errorf("entryNames(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestEntryPointsOfATree lists a small tree: an include's entry point
// belongs to each family that includes it, and a file that is neither a
// family nor included is an error naming it.
func TestEntryPointsOfATree(t *testing.T) {
	entry := "@compute @workgroup_size(WG)\nfn %s() {}\n"
	fsys := fstest.MapFS{
		"a.wgsl":        {Data: []byte("//!include x_common\n" + strings.Replace(entry, "%s", "run", 1))},
		"b.wgsl":        {Data: []byte("//!include x_common\nconst K: u32 = 1u;\n")},
		"x_common.wgsl": {Data: []byte("fn helper() {}\n" + strings.Replace(entry, "%s", "shared", 1))},
	}
	got, err := entryPoints(fsys)
	if want := []string{"a.run", "a.shared", "b.shared"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("entryPoints = %q, %v; want %q", got, err, want)
	}
	fsys["dead.wgsl"] = &fstest.MapFile{Data: []byte("fn unused() {}\n")}
	if _, err := entryPoints(fsys); err == nil || !strings.Contains(err.Error(), "dead.wgsl") {
		t.Errorf("with a file that is neither family nor include: err = %v, want one naming dead.wgsl", err)
	}
}
