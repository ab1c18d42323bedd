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

// TestCreateModuleChecks compiles through the trusted entry point the
// kernels use (createModule) with and without loop bounding: a valid
// shader gives a module, one naming an undeclared variable an error that
// carries the compiler's message, not a module and not a crash.
func TestCreateModuleChecks(t *testing.T) {
	core := `@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(1) fn main() { for (var i = 0u; i < 4u; i++) { y[i] = y[i + 1u] * 1.5; } }`
	for _, checks := range []uint64{checkBounds, checkBounds | checkLoopBounding} {
		mod, err := createModule(dev.dev, "checks", core, checks)
		if err != nil {
			t.Fatalf("checks %#x: %v", checks, err)
		}
		mod.Release()
		var bad error
		quietly(func() {
			_, bad = createModule(dev.dev, "checks", strings.Replace(core, "y[i + 1u]", "z[i]", 1), checks)
		})
		if bad == nil || !strings.Contains(bad.Error(), "z") {
			t.Fatalf("checks %#x: an undeclared variable gave %v", checks, bad)
		}
	}
}
