package gpu

import (
	"strings"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/hearthstudio/hearth/internal/loglevel"
)

// ShaderLanguage is what the device's WGSL compiler accepts beyond core
// WGSL: the extensions that would let kernels use half-precision tiles,
// subgroup reductions and 8-bit integer dot products. Each is tried on the
// device when it is opened (probeShaderLanguage), because an adapter can
// report a feature (lavapipe and the H200 both report shader-f16) that the
// compiler inside the bundled wgpu-native cannot parse.
//
// github.com/cogentcore/webgpu v0.23.0, the binding before, compiled none
// of them on any adapter; github.com/oliverbestmann/webgpu v1.36.0
// (wgpu-native v29) compiles all three on lavapipe, with the device asked
// for shader-f16 and the subgroup feature where the adapter offers them
// (docs/performance.md, "What the binding offers"). The kernels are still
// written in f32 and u32 arithmetic with workgroup-memory reductions; this
// record is what they may start to use, and what `hearth info` shows.
type ShaderLanguage struct {
	// F16 is the f16 type in storage and arithmetic (`enable f16;`).
	F16 bool `json:"f16"`
	// Subgroups is subgroupAdd and the subgroup builtins.
	Subgroups bool `json:"subgroups"`
	// PackedDot is dot4I8Packed / dot4U8Packed, WGSL's
	// packed_4x8_integer_dot_product language feature.
	PackedDot bool `json:"packed_4x8_integer_dot_product"`
}

// String lists the extensions the compiler accepted, or says none did.
func (s ShaderLanguage) String() string {
	var have []string
	if s.F16 {
		have = append(have, "f16")
	}
	if s.Subgroups {
		have = append(have, "subgroups")
	}
	if s.PackedDot {
		have = append(have, "packed 4x8 integer dot product")
	}
	if len(have) == 0 {
		return "core WGSL only (no f16, subgroups or packed 4x8 integer dot product)"
	}
	return strings.Join(have, ", ")
}

// languageProbes are the smallest compute shaders that need each extension.
var languageProbes = []struct {
	set  func(*ShaderLanguage)
	code string
}{
	{func(s *ShaderLanguage) { s.F16 = true }, `enable f16;
@group(0) @binding(0) var<storage, read_write> y: array<f16>;
@compute @workgroup_size(1) fn main() { y[0] = y[1] * 1.5h; }`},
	// No `enable subgroups;`: naga 29 does not parse that directive yet;
	// the builtins come with the device's subgroup feature.
	{func(s *ShaderLanguage) { s.Subgroups = true }, `@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(32) fn main(@builtin(subgroup_invocation_id) i: u32) { y[i] = subgroupAdd(y[i]); }`},
	{func(s *ShaderLanguage) { s.PackedDot = true }, `@group(0) @binding(0) var<storage, read_write> y: array<i32>;
@compute @workgroup_size(1) fn main() { y[0] = dot4I8Packed(u32(y[1]), u32(y[2])); }`},
}

// probeShaderLanguage compiles each probe on d.
func probeShaderLanguage(d *wgpu.Device) ShaderLanguage {
	var s ShaderLanguage
	quietly(func() {
		for _, p := range languageProbes {
			if compiles(d, p.code) {
				p.set(&s)
			}
		}
	})
	return s
}

// quietly runs f with wgpu-native's logging off: it logs every rejected
// shader module at error level, and to a probe a rejection is an answer,
// not a fault.
func quietly(f func()) {
	wgpu.SetLogLevel(wgpu.LogLevelOff)
	defer func() {
		level, err := loglevel.FromEnv()
		if err != nil {
			level = loglevel.Warn
		}
		wgpu.SetLogLevel(wgpuLevels[level])
	}()
	f()
}

// compiles reports whether code makes a compute pipeline for entry main.
func compiles(d *wgpu.Device, code string) bool {
	mod, err := createModule(d, "language probe", code, checkBounds) // as the kernels compile
	if err != nil {
		return false
	}
	defer mod.Release()
	pipe, err := d.TryCreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   "language probe",
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: "main"},
	})
	if err != nil {
		return false
	}
	pipe.Release()
	return true
}
