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

// TestBindingLanguage records what docs/performance.md says of the binding
// (github.com/oliverbestmann/webgpu v1.36.0, wgpu-native v29): on lavapipe,
// the adapter of `make test`, its compiler takes f16, the subgroup builtins
// and dot4I8Packed. A GPU's answer depends on its driver (hearth info).
func TestBindingLanguage(t *testing.T) {
	all := ShaderLanguage{F16: true, Subgroups: true, PackedDot: true}
	if s := all.String(); s != "f16, subgroups, packed 4x8 integer dot product" {
		t.Errorf("String() = %q", s)
	}
	if s := (ShaderLanguage{}).String(); !strings.Contains(s, "core WGSL only") {
		t.Errorf("String() = %q", s)
	}
	if dev.Info.Type == "cpu" && dev.Language != all {
		t.Errorf("lavapipe's compiler accepts %s, want all of %s: update docs/performance.md", dev.Language, all)
	}
}
