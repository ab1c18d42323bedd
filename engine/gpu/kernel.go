package gpu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// KernelSpec names one compute pipeline: an entry point of a kernel family in
// shaders/, specialised by compile-time constants (workgroup size, tile
// shape). The binding leaves WGSL override constants out, so constants are
// prepended to the source as `const NAME: u32 = V;` and a family's WGSL uses
// them without declaring them. The spec is comparable and is the cache key
// itself, so looking a kernel up on a hot path allocates nothing.
type KernelSpec struct {
	Family string
	Entry  string
	Consts [6]Const
}

// Const is one compile-time constant; entries with an empty Name are unused.
type Const struct {
	Name  string
	Value uint32
}

// Spec is a shorthand for a KernelSpec with up to six constants given as
// name, value pairs: Spec("norm", "rmsnorm", "WG", 256).
func Spec(family, entry string, consts ...any) KernelSpec {
	s := KernelSpec{Family: family, Entry: entry}
	for i := 0; i+1 < len(consts) && i/2 < len(s.Consts); i += 2 {
		name, _ := consts[i].(string)
		var v uint32
		switch x := consts[i+1].(type) {
		case int:
			v = uint32(x)
		case uint32:
			v = x
		}
		s.Consts[i/2] = Const{name, v}
	}
	return s
}

// Name is how errors refer to the kernel: family.entry.
func (s KernelSpec) Name() string { return s.Family + "." + s.Entry }

// Kernel is a compiled compute pipeline with the shape of its bindings.
type Kernel struct {
	Spec     KernelSpec
	id       uint64
	pipeline *wgpu.ComputePipeline
	layout   *wgpu.BindGroupLayout
	// hasParams is true when binding 0 is a uniform; storage buffers then
	// take bindings 1..nStorage, else 0..nStorage-1.
	hasParams bool
	nStorage  int
}

func (k *Kernel) release() {
	k.layout.Release()
	k.pipeline.Release()
}

// bindingRE matches a group-0 buffer declaration such as
// `@group(0) @binding(2) var<storage, read_write> y: array<f32>;`.
var bindingRE = regexp.MustCompile(`@binding\((\d+)\)\s*var<\s*(uniform|storage)\s*(?:,\s*(read_write|read))?\s*>`)

// Kernel compiles (once) and returns the pipeline for spec.
func (d *Device) Kernel(spec KernelSpec) (*Kernel, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if k, ok := d.kernels[spec]; ok {
		return k, nil
	}
	src, err := d.source(spec.Family)
	if err != nil {
		return nil, err
	}
	var pre strings.Builder
	for _, c := range spec.Consts {
		if c.Name != "" {
			fmt.Fprintf(&pre, "const %s: u32 = %du;\n", c.Name, c.Value)
		}
	}
	code := pre.String() + src

	entries, hasParams, nStorage, err := bindingShape(src, spec)
	if err != nil {
		return nil, err
	}
	layout, err := d.dev.TryCreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: spec.Name(), Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %s: bind group layout: %w", spec.Name(), err)
	}
	pl, err := d.dev.TryCreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: spec.Name(), BindGroupLayouts: []*wgpu.BindGroupLayout{layout}})
	if err != nil {
		layout.Release()
		return nil, fmt.Errorf("gpu: kernel %s: pipeline layout: %w", spec.Name(), err)
	}
	defer pl.Release()
	mod, err := createModule(d.dev, spec.Name(), code, d.shaderChecks)
	if err != nil {
		layout.Release()
		return nil, fmt.Errorf("gpu: kernel %s: compile: %w", spec.Name(), err)
	}
	defer mod.Release()
	p, err := d.dev.TryCreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   spec.Name(),
		Layout:  pl,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: spec.Entry},
	})
	if err != nil {
		layout.Release()
		return nil, fmt.Errorf("gpu: kernel %s: pipeline: %w", spec.Name(), err)
	}
	k := &Kernel{
		Spec:      spec,
		id:        d.newID(),
		pipeline:  p,
		layout:    layout,
		hasParams: hasParams,
		nStorage:  nStorage,
	}
	d.kernels[spec] = k
	return k, nil
}

// bindingShape reads the family's group-0 bindings and builds an explicit
// layout from them, so an entry point may leave some bindings unused (an
// automatic layout would drop those and then refuse them). Hearth's
// convention: an optional uniform at binding 0, then storage buffers numbered
// contiguously.
func bindingShape(src string, spec KernelSpec) (entries []wgpu.BindGroupLayoutEntry, hasParams bool, nStorage int, err error) {
	kinds := map[int]wgpu.BufferBindingType{}
	maxB := -1
	for _, m := range bindingRE.FindAllStringSubmatch(src, -1) {
		b, _ := strconv.Atoi(m[1])
		switch {
		case m[2] == "uniform":
			kinds[b] = wgpu.BufferBindingTypeUniform
		case m[3] == "read_write":
			kinds[b] = wgpu.BufferBindingTypeStorage
		default:
			kinds[b] = wgpu.BufferBindingTypeReadOnlyStorage
		}
		maxB = max(maxB, b)
	}
	for b := 0; b <= maxB; b++ {
		kind, ok := kinds[b]
		if !ok {
			return nil, false, 0, fmt.Errorf("gpu: kernel %s: bindings must be contiguous, binding %d missing", spec.Name(), b)
		}
		if kind == wgpu.BufferBindingTypeUniform {
			if b != 0 {
				return nil, false, 0, fmt.Errorf("gpu: kernel %s: the uniform must be binding 0, found at %d", spec.Name(), b)
			}
			hasParams = true
		} else {
			nStorage++
		}
		entries = append(entries, wgpu.BindGroupLayoutEntry{
			Binding:    uint32(b),
			Visibility: wgpu.ShaderStageCompute,
			Buffer:     wgpu.BufferBindingLayout{Type: kind},
		})
	}
	return entries, hasParams, nStorage, nil
}
