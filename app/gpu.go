package app

import "github.com/hearthstudio/hearth/engine/gpu"

// The GPU as the engine's clients see it: what the adapters are and how
// one is picked. Only app opens a device; the studio and the command line
// describe adapters with these names and pass GPUOptions on.
type (
	// GPUOptions pick the adapter (gpu.Options).
	GPUOptions = gpu.Options
	// AdapterInfo describes an adapter: name, type, backend, limits and
	// features (gpu.AdapterInfo).
	AdapterInfo = gpu.AdapterInfo
	// ShaderLanguage is what an adapter's WGSL compiler accepts beyond
	// core WGSL (gpu.ShaderLanguage).
	ShaderLanguage = gpu.ShaderLanguage
)

// NoBufferLimit is the MaxBufferSize of an adapter that reports no limit
// (gpu.LimitCeiling).
const NoBufferLimit = gpu.LimitCeiling

// GPUOptionsFromEnv reads HEARTH_ADAPTER and HEARTH_BACKEND.
func GPUOptionsFromEnv() GPUOptions { return gpu.OptionsFromEnv() }

// Adapters lists the adapters opts allows, in Hearth's order of
// preference; no device is created.
func Adapters(opts GPUOptions) ([]AdapterInfo, error) { return gpu.Adapters(opts) }

// ChooseAdapter is the adapter the GPU backend uses among adapters.
func ChooseAdapter(adapters []AdapterInfo, opts GPUOptions) (AdapterInfo, error) {
	return gpu.Choose(adapters, opts)
}

// ProbeShaderLanguage opens a device on the adapter opts chooses only to
// learn what its WGSL compiler accepts (tried when a device opens), and
// releases it.
func ProbeShaderLanguage(opts GPUOptions) (ShaderLanguage, error) {
	d, err := gpu.Open(opts)
	if err != nil {
		return ShaderLanguage{}, err
	}
	defer d.Release()
	return d.Language, nil
}

// ErrDeviceLost ends a job whose GPU device was lost (driver reset, GPU
// removed); the engine opens a new one for the next job.
var ErrDeviceLost = gpu.ErrDeviceLost
