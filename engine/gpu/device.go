// Package gpu is Hearth's WebGPU runtime: adapter choice, the device with the
// adapter's real limits, buffers and tensors, the pipeline cache, chained
// dispatch (one command encoder and one submit for a whole token or step) and
// readback. Every kernel dispatcher in engine/ops goes through it; nothing
// else in Hearth talks to wgpu.
//
// A Device is not safe for concurrent use: one goroutine (the engine's) owns
// it, as DESIGN.md says. Errors from wgpu validation come back as Go errors
// naming the kernel or buffer involved, never as a panic.
package gpu

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/hearthstudio/hearth/shaders"
)

// ErrDeviceLost is returned by every call after the GPU device was lost
// (driver reset, GPU removed). Work in progress must be saved by the caller.
var ErrDeviceLost = errors.New("gpu: device lost")

// ErrOutOfMemory is wrapped by the error of an allocation the device could
// not satisfy.
var ErrOutOfMemory = errors.New("gpu: out of memory")

// Options choose the adapter. Empty fields fall back to the environment
// (HEARTH_ADAPTER, HEARTH_BACKEND) and then to the default preference.
type Options struct {
	// Adapter picks the first adapter whose name or driver contains this
	// substring, case-insensitively.
	Adapter string
	// Backend restricts adapters to one backend: vulkan, metal, dx12 or gl.
	Backend string
}

// OptionsFromEnv reads HEARTH_ADAPTER and HEARTH_BACKEND.
func OptionsFromEnv() Options {
	return Options{Adapter: os.Getenv("HEARTH_ADAPTER"), Backend: os.Getenv("HEARTH_BACKEND")}
}

// Limits are the device limits Hearth's kernels depend on.
type Limits struct {
	MaxBufferSize                     uint64 `json:"max_buffer_size"`
	MaxStorageBufferBindingSize       uint64 `json:"max_storage_buffer_binding_size"`
	MaxUniformBufferBindingSize       uint64 `json:"max_uniform_buffer_binding_size"`
	MaxStorageBuffersPerShaderStage   uint32 `json:"max_storage_buffers_per_shader_stage"`
	MaxComputeWorkgroupStorageSize    uint32 `json:"max_compute_workgroup_storage_size"`
	MaxComputeInvocationsPerWorkgroup uint32 `json:"max_compute_invocations_per_workgroup"`
	MaxComputeWorkgroupSizeX          uint32 `json:"max_compute_workgroup_size_x"`
	MaxComputeWorkgroupsPerDimension  uint32 `json:"max_compute_workgroups_per_dimension"`
	MinUniformBufferOffsetAlignment   uint32 `json:"min_uniform_buffer_offset_alignment"`
	MinStorageBufferOffsetAlignment   uint32 `json:"min_storage_buffer_offset_alignment"`
}

// AdapterInfo describes one adapter as wgpu reports it.
type AdapterInfo struct {
	Index    int      `json:"index"`
	Name     string   `json:"name"`
	Driver   string   `json:"driver"`
	VendorID uint32   `json:"vendor_id"`
	DeviceID uint32   `json:"device_id"`
	Type     string   `json:"type"`    // discrete, integrated, cpu, unknown
	Backend  string   `json:"backend"` // vulkan, metal, dx12, gl, ...
	Limits   Limits   `json:"limits"`
	Features []string `json:"features"`
}

// Label is the adapter's name for people.
func (a AdapterInfo) Label() string { return a.Name }

// Device is an open WebGPU device with Hearth's caches.
type Device struct {
	Info   AdapterInfo
	Limits Limits
	// Language is what the device's WGSL compiler accepts beyond core WGSL.
	Language ShaderLanguage
	// shaderChecks are the runtime checks kernels compile with
	// (createModule): bounds checks, and loop bounding only with
	// HEARTH_LOOP_BOUNDING=1, which measures what it costs.
	shaderChecks uint64

	instance *wgpu.Instance
	adapter  *wgpu.Adapter
	dev      *wgpu.Device
	queue    *wgpu.Queue
	lost     atomic.Bool
	lostMsg  atomic.Value

	kernels map[KernelSpec]*Kernel
	binds   map[bindKey]*wgpu.BindGroup
	bindsOf map[uint64][]bindKey // buffer id → cached bind groups that use it
	arena   uniformArena
	staging map[uint64]*wgpu.Buffer // readback buffers by size
	// mapState receives the last map's callback (startMap).
	mapState mapState
	open     *Chain // the chain being recorded, if any
	// plainParams caches, per params type, whether its memory is its
	// uniform encoding (params.go).
	plainParams map[reflect.Type]bool
	// source finds a kernel family's WGSL: shaders.Source, or a test's own.
	source func(family string) (string, error)
	// kernelLog records dispatched kernels under HEARTH_KERNEL_LOG
	// (kernel_log.go): processKernelLog, or a test's own.
	kernelLog *kernelLog
	nextID    uint64
	released  bool
}

func backendName(b wgpu.BackendType) string {
	switch b {
	case wgpu.BackendTypeVulkan:
		return "vulkan"
	case wgpu.BackendTypeMetal:
		return "metal"
	case wgpu.BackendTypeD3D12:
		return "dx12"
	case wgpu.BackendTypeD3D11:
		return "dx11"
	case wgpu.BackendTypeOpenGL, wgpu.BackendTypeOpenGLES:
		return "gl"
	case wgpu.BackendTypeWebGPU:
		return "webgpu"
	}
	return "unknown"
}

func adapterTypeName(t wgpu.AdapterType) string {
	switch t {
	case wgpu.AdapterTypeDiscreteGPU:
		return "discrete"
	case wgpu.AdapterTypeIntegratedGPU:
		return "integrated"
	case wgpu.AdapterTypeCPU:
		return "cpu"
	}
	return "unknown"
}

// The instance backends, as wgpu-native's header numbers them (the binding
// names only "all").
const (
	backendVulkan  wgpu.InstanceBackend = 1 << 0
	backendGL      wgpu.InstanceBackend = 1 << 1
	backendMetal   wgpu.InstanceBackend = 1 << 2
	backendDX12    wgpu.InstanceBackend = 1 << 3
	backendBrowser wgpu.InstanceBackend = 1 << 5
	backendPrimary                      = backendVulkan | backendMetal | backendDX12 | backendBrowser
)

func instanceBackends(backend string) (wgpu.InstanceBackend, error) {
	switch strings.ToLower(backend) {
	case "":
		return backendPrimary, nil
	case "vulkan":
		return backendVulkan, nil
	case "metal":
		return backendMetal, nil
	case "dx12":
		return backendDX12, nil
	case "gl":
		return backendGL, nil
	}
	return 0, fmt.Errorf("gpu: HEARTH_BACKEND %q: want vulkan, metal, dx12 or gl", backend)
}

// clampU64 keeps a reported limit requestable: wgpu reads u64-max as
// "undefined" and silently falls back to the WebGPU default (256 MiB buffers),
// which is what some drivers report as their maximum.
func clampU64(v uint64) uint64 {
	if v == wgpu.LimitU64Undefined || v > LimitCeiling {
		return LimitCeiling
	}
	return v
}

// LimitCeiling (4 PiB) stands for a limit the driver reports as unbounded
// (u64 max, as NVIDIA does for maxBufferSize).
const LimitCeiling = 1 << 52

func limitsOf(l wgpu.Limits) Limits {
	return Limits{
		MaxBufferSize:                     clampU64(l.MaxBufferSize),
		MaxStorageBufferBindingSize:       clampU64(l.MaxStorageBufferBindingSize),
		MaxUniformBufferBindingSize:       clampU64(l.MaxUniformBufferBindingSize),
		MaxStorageBuffersPerShaderStage:   l.MaxStorageBuffersPerShaderStage,
		MaxComputeWorkgroupStorageSize:    l.MaxComputeWorkgroupStorageSize,
		MaxComputeInvocationsPerWorkgroup: l.MaxComputeInvocationsPerWorkgroup,
		MaxComputeWorkgroupSizeX:          l.MaxComputeWorkgroupSizeX,
		MaxComputeWorkgroupsPerDimension:  l.MaxComputeWorkgroupsPerDimension,
		MinUniformBufferOffsetAlignment:   l.MinUniformBufferOffsetAlignment,
		MinStorageBufferOffsetAlignment:   l.MinStorageBufferOffsetAlignment,
	}
}

func describe(i int, a *wgpu.Adapter) AdapterInfo {
	info := a.GetInfo()
	var feats []string
	for _, f := range a.GetFeatures() {
		feats = append(feats, f.String())
	}
	sort.Strings(feats)
	// wgpu-native fills the device field with a hex id on some drivers
	// (lavapipe: "0x0") and puts the readable name in the description.
	name := info.Device
	if name == "" || strings.HasPrefix(name, "0x") {
		name = info.Description
	}
	return AdapterInfo{
		Index:    i,
		Name:     name,
		Driver:   info.Description,
		VendorID: info.VendorId,
		DeviceID: info.DeviceId,
		Type:     adapterTypeName(info.AdapterType),
		Backend:  backendName(info.BackendType),
		Limits:   limitsOf(a.GetLimits()),
		Features: feats,
	}
}

// rank orders adapters by preference: discrete, integrated, then CPU; among
// equals, a native backend (Vulkan, Metal, DX12) before GL.
func rank(a AdapterInfo) int {
	r := map[string]int{"discrete": 0, "integrated": 10, "unknown": 20, "cpu": 30}[a.Type]
	if a.Backend == "gl" {
		r += 5
	}
	return r
}

// Adapters lists every adapter the options allow, in preference order.
func Adapters(opts Options) ([]AdapterInfo, error) {
	inst, adapters, err := enumerate(opts)
	if err != nil {
		return nil, err
	}
	defer inst.Release()
	infos := make([]AdapterInfo, len(adapters))
	for i, a := range adapters {
		infos[i] = describe(i, a)
		a.Release()
	}
	sortByPreference(infos)
	return infos, nil
}

func sortByPreference(infos []AdapterInfo) {
	sort.SliceStable(infos, func(i, j int) bool { return rank(infos[i]) < rank(infos[j]) })
}

func enumerate(opts Options) (*wgpu.Instance, []*wgpu.Adapter, error) {
	env := OptionsFromEnv()
	if opts.Backend == "" {
		opts.Backend = env.Backend
	}
	backends, err := instanceBackends(opts.Backend)
	if err != nil {
		return nil, nil, err
	}
	if err := setLogLevel(); err != nil {
		return nil, nil, fmt.Errorf("gpu: %w", err)
	}
	inst := wgpu.CreateInstance(&wgpu.InstanceDescriptor{Backends: backends})
	if inst == nil {
		return nil, nil, errors.New("gpu: could not create a WebGPU instance")
	}
	adapters := inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: backends})
	if len(adapters) == 0 && opts.Backend == "" {
		// GL only when no native backend has an adapter: it duplicates the
		// Vulkan adapters where both exist, and its EGL probe is slow and
		// noisy on machines without a session.
		inst.Release()
		return enumerate(Options{Adapter: opts.Adapter, Backend: "gl"})
	}
	return inst, adapters, nil
}

// Choose picks the adapter the options ask for from infos (already in
// preference order), or says why none fits.
func Choose(infos []AdapterInfo, opts Options) (AdapterInfo, error) {
	if opts.Adapter == "" {
		opts.Adapter = OptionsFromEnv().Adapter
	}
	if len(infos) == 0 {
		return AdapterInfo{}, errors.New("gpu: no WebGPU adapter found (install a Vulkan driver; on Debian, mesa-vulkan-drivers gives the lavapipe CPU adapter)")
	}
	if opts.Adapter == "" {
		return infos[0], nil
	}
	want := strings.ToLower(opts.Adapter)
	var names []string
	for _, a := range infos {
		if strings.Contains(strings.ToLower(a.Name), want) || strings.Contains(strings.ToLower(a.Driver), want) {
			return a, nil
		}
		names = append(names, a.Label())
	}
	return AdapterInfo{}, fmt.Errorf("gpu: HEARTH_ADAPTER %q matches no adapter (have: %s)", opts.Adapter, strings.Join(names, "; "))
}

// Open creates a device on the preferred adapter with the adapter's real
// limits, so big models can bind as much as the hardware allows.
func Open(opts Options) (*Device, error) {
	inst, adapters, err := enumerate(opts)
	if err != nil {
		return nil, err
	}
	infos := make([]AdapterInfo, len(adapters))
	for i, a := range adapters {
		infos[i] = describe(i, a)
	}
	sorted := append([]AdapterInfo(nil), infos...)
	sortByPreference(sorted)
	chosen, err := Choose(sorted, opts)
	if err != nil {
		for _, a := range adapters {
			a.Release()
		}
		inst.Release()
		return nil, err
	}
	for i, a := range adapters {
		if i != chosen.Index {
			a.Release()
		}
	}
	adapter := adapters[chosen.Index]

	// Start from WebGPU's defaults and raise only what compute needs: asking
	// for every reported limit fails on lavapipe, which reports 0 for some
	// render limits (maxColorAttachments) below the spec's minimum.
	al := adapter.GetLimits()
	req := wgpu.DefaultLimits()
	req.MaxBufferSize = clampU64(al.MaxBufferSize)
	req.MaxStorageBufferBindingSize = clampU64(al.MaxStorageBufferBindingSize)
	req.MaxStorageBuffersPerShaderStage = al.MaxStorageBuffersPerShaderStage
	req.MaxComputeWorkgroupStorageSize = al.MaxComputeWorkgroupStorageSize
	req.MaxComputeInvocationsPerWorkgroup = al.MaxComputeInvocationsPerWorkgroup
	req.MaxComputeWorkgroupSizeX = al.MaxComputeWorkgroupSizeX
	req.MaxComputeWorkgroupSizeY = al.MaxComputeWorkgroupSizeY
	req.MaxComputeWorkgroupSizeZ = al.MaxComputeWorkgroupSizeZ
	req.MaxComputeWorkgroupsPerDimension = al.MaxComputeWorkgroupsPerDimension

	d := &Device{
		Info:        chosen,
		instance:    inst,
		adapter:     adapter,
		kernels:     map[KernelSpec]*Kernel{},
		binds:       map[bindKey]*wgpu.BindGroup{},
		bindsOf:     map[uint64][]bindKey{},
		staging:     map[uint64]*wgpu.Buffer{},
		plainParams: map[reflect.Type]bool{},
		source:      shaders.Source,
		kernelLog:   processKernelLog,
	}
	// shader-f16 and the subgroup feature are asked for where offered, so
	// the language probe below answers for the compiler alone; no kernel
	// depends on them yet.
	var feats []wgpu.FeatureName
	for _, f := range []wgpu.FeatureName{wgpu.FeatureNameShaderF16, wgpu.NativeFeatureSubgroup} {
		if adapter.HasFeature(f) {
			feats = append(feats, f)
		}
	}
	dev, err := adapter.RequestDevice(&wgpu.DeviceDescriptor{
		Label:            "hearth",
		RequiredFeatures: feats,
		RequiredLimits:   &req,
		// A driver reset or a removed GPU: every later call fails fast
		// with the driver's reason. Release destroys the device on purpose.
		DeviceLostCallback: func(reason wgpu.DeviceLostReason, message string) {
			if reason != wgpu.DeviceLostReasonDestroyed && reason != wgpu.DeviceLostReasonCallbackCancelled {
				d.markLost(fmt.Sprintf("%v: %s", reason, message))
			}
		},
	})
	if err != nil {
		adapter.Release()
		inst.Release()
		return nil, fmt.Errorf("gpu: %s: request device: %w", chosen.Label(), err)
	}
	d.dev = dev
	d.queue = dev.GetQueue()
	d.Limits = limitsOf(dev.GetLimits())
	d.Language = probeShaderLanguage(dev)
	d.shaderChecks = checkBounds
	if os.Getenv("HEARTH_LOOP_BOUNDING") == "1" {
		d.shaderChecks |= checkLoopBounding
	}
	d.arena.init(d)
	return d, nil
}

// markLost records that the device is gone; every later call fails fast.
func (d *Device) markLost(why string) {
	d.lostMsg.Store(why)
	d.lost.Store(true)
}

// check returns ErrDeviceLost (with the driver's reason) once the device is gone.
func (d *Device) check() error {
	if d.released {
		return errors.New("gpu: device already released")
	}
	if d.lost.Load() {
		msg, _ := d.lostMsg.Load().(string)
		return fmt.Errorf("%w (%s)", ErrDeviceLost, msg)
	}
	return nil
}

// Release frees every cached object and the device. Buffers and tensors made
// on it must not be used afterwards.
func (d *Device) Release() {
	if d.released {
		return
	}
	if d.open != nil {
		d.open.Discard()
	}
	// Let submitted work finish first: a software adapter (lavapipe) runs
	// it on worker threads that crash if the device goes away under them.
	_ = d.Wait()
	for _, bg := range d.binds {
		bg.Release()
	}
	for _, k := range d.kernels {
		k.release()
	}
	for _, s := range d.staging {
		s.Release()
	}
	d.arena.release()
	d.queue.Release()
	d.dev.Release()
	d.adapter.Release()
	d.instance.Release()
	d.released = true
}

func (d *Device) newID() uint64 {
	d.nextID++
	return d.nextID
}
