package gpu

import (
	"strings"
	"testing"
)

// TestLanguageProbeTellsApart checks the probe's mechanism on shaders whose
// answer is known: core WGSL compiles, a typo does not, so a probe that
// always says yes or always says no fails here.
func TestLanguageProbeTellsApart(t *testing.T) {
	core := `@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(1) fn main() { y[0] = y[1] * 1.5; }`
	var good, bad bool
	quietly(func() {
		good = compiles(dev.dev, core)
		bad = compiles(dev.dev, strings.Replace(core, "y[1]", "z[1]", 1))
	})
	if !good {
		t.Error("core WGSL did not compile")
	}
	if bad {
		t.Error("a shader naming an undeclared variable compiled")
	}
	if got := probeShaderLanguage(dev.dev); got != dev.Language {
		t.Errorf("probing again gave %+v, Open recorded %+v", got, dev.Language)
	}
}

// TestPinnedBindingLanguage records what docs/performance.md says of the
// pinned binding (github.com/cogentcore/webgpu v0.23.0): its wgpu-native
// compiles none of the extensions, on lavapipe as on the H200. When a newer
// binding makes this fail, the kernels can start using what it offers and
// the doc's section "What the binding offers" must be rewritten.
func TestPinnedBindingLanguage(t *testing.T) {
	if dev.Language != (ShaderLanguage{}) {
		t.Errorf("the device's compiler accepts %s: update docs/performance.md and the kernels", dev.Language)
	}
	if s := dev.Language.String(); !strings.Contains(s, "core WGSL only") {
		t.Errorf("String() = %q", s)
	}
	all := ShaderLanguage{F16: true, Subgroups: true, PackedDot: true}
	if s := all.String(); s != "f16, subgroups, packed 4x8 integer dot product" {
		t.Errorf("String() = %q", s)
	}
}
