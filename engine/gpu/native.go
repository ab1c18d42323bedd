package gpu

/*
#include <stdint.h>
#include <stdlib.h>

// The two wgpu-native calls the Go binding does not wrap: an out-of-memory
// error scope (its Try calls scope validation errors only), and a shader
// module made with chosen runtime checks. Declared here
// with the layouts of the wgpu-native v29 webgpu.h that
// github.com/oliverbestmann/webgpu v1.36.0 ships, rather than including that
// header, whose path is inside the module cache; the symbols come from the
// libwgpu_native.a the binding links.
typedef void *WGPUDeviceRef;
typedef struct { char const *data; size_t length; } hearthStringView;
typedef void (*hearthPopCallback)(uint32_t status, uint32_t type, hearthStringView message, void *userdata1, void *userdata2);
typedef struct {
	void *nextInChain;
	uint32_t mode; // WGPUCallbackMode
	hearthPopCallback callback;
	void *userdata1;
	void *userdata2;
} hearthPopCallbackInfo;
typedef struct { uint64_t id; } hearthFuture;

void wgpuDevicePushErrorScope(WGPUDeviceRef device, uint32_t filter);
hearthFuture wgpuDevicePopErrorScope(WGPUDeviceRef device, hearthPopCallbackInfo callbackInfo);

typedef struct { uint32_t type; char message[1024]; } hearthScopeResult;

static void hearthScopeCallback(uint32_t status, uint32_t type, hearthStringView message, void *userdata1, void *userdata2) {
	hearthScopeResult *r = (hearthScopeResult *)userdata1;
	r->type = type;
	r->message[0] = 0;
	size_t n = message.data ? (message.length == SIZE_MAX ? 1023 : message.length) : 0;
	size_t i = 0;
	for (; i < n && i < sizeof(r->message) - 1 && message.data[i]; i++) r->message[i] = message.data[i];
	r->message[i] = 0;
}

// WGPUErrorFilter_OutOfMemory = 2; WGPUCallbackMode_AllowSpontaneous = 3,
// so the callback runs before the pop returns.
static void hearthPushOOM(WGPUDeviceRef device) { wgpuDevicePushErrorScope(device, 2); }

// wgpuDeviceCreateShaderModuleTrusted (wgpu.h) takes WGSL through the
// descriptor's chain (WGPUShaderSourceWGSL, sType 2) and the checks as
// WGPUShaderRuntimeChecks bits; its errors go to a validation scope
// (WGPUErrorFilter_Validation = 1), popped into r.
typedef struct hearthChained { struct hearthChained *next; uint32_t sType; } hearthChained;
typedef struct { hearthChained chain; hearthStringView code; } hearthSourceWGSL;
typedef struct { hearthChained *nextInChain; hearthStringView label; } hearthModuleDescriptor;
void *wgpuDeviceCreateShaderModuleTrusted(WGPUDeviceRef device, hearthModuleDescriptor const *descriptor, uint64_t runtimeChecks);

static void *hearthTrustedModule(WGPUDeviceRef device, char const *label, char const *code, size_t codeLen, uint64_t checks, hearthScopeResult *r) {
	hearthSourceWGSL src = { { 0, 2 }, { code, codeLen } };
	hearthModuleDescriptor desc = { &src.chain, { label, SIZE_MAX } };
	r->type = 0;
	wgpuDevicePushErrorScope(device, 1);
	void *mod = wgpuDeviceCreateShaderModuleTrusted(device, &desc, checks);
	hearthPopCallbackInfo info = { 0, 3, hearthScopeCallback, r, 0 };
	wgpuDevicePopErrorScope(device, info);
	return mod;
}
static void hearthPop(WGPUDeviceRef device, hearthScopeResult *r) {
	r->type = 0;
	hearthPopCallbackInfo info = { 0, 3, hearthScopeCallback, r, 0 };
	wgpuDevicePopErrorScope(device, info);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// deviceHandle reads the C WGPUDevice that wgpu.Device wraps in its first
// field; this pins github.com/oliverbestmann/webgpu v1.36.0's layout.
func deviceHandle(d *wgpu.Device) C.WGPUDeviceRef {
	return C.WGPUDeviceRef(*(*unsafe.Pointer)(unsafe.Pointer(d)))
}

// mapState is a device's report of its last map: set by the binding's map
// callback, which runs inside a later poll on the polling goroutine.
type mapState struct {
	done   bool
	status wgpu.MapAsyncStatus
}

// startMap starts mapping a staging buffer for reading; the map is done when
// the device's map state says so, after a poll.
func (d *Device) startMap(st *wgpu.Buffer, size uint64) error {
	s := &d.mapState
	s.done, s.status = false, 0
	if err := st.TryMapAsync(wgpu.MapModeRead, 0, size, func(status wgpu.MapAsyncStatus) {
		s.done, s.status = true, status
	}); err != nil {
		return fmt.Errorf("map for reading: %w", err)
	}
	return nil
}

// mapDone reports whether the last startMap finished, and its status.
func (d *Device) mapDone() (bool, wgpu.MapAsyncStatus) {
	return d.mapState.done, d.mapState.status
}

// errorTypeNoError is WGPUErrorType_NoError in webgpu.h: a scope that
// caught nothing.
const errorTypeNoError = 1

// catchOOM runs f inside an out-of-memory error scope. The binding scopes its
// calls for validation errors only; an out-of-memory error outside any scope
// reaches wgpu-native's default uncaptured-error handler, which aborts the
// process — so allocating a model bigger than the GPU must go through here.
func (d *Device) catchOOM(what string, f func()) error {
	h := deviceHandle(d.dev)
	r := (*C.hearthScopeResult)(C.calloc(1, C.size_t(unsafe.Sizeof(C.hearthScopeResult{}))))
	defer C.free(unsafe.Pointer(r))
	C.hearthPushOOM(h)
	f()
	C.hearthPop(h, r)
	if r._type != 0 && r._type != errorTypeNoError {
		return fmt.Errorf("%w: %s: %s", ErrOutOfMemory, what, C.GoString(&r.message[0]))
	}
	return nil
}

// submit sends one command buffer. wgpu-native treats any error inside
// wgpuQueueSubmit as fatal (it panics rather than reporting to an error
// scope), so everything that could fail there is checked while recording:
// buffers are validated per dispatch and never destroyed while referenced
// (Release only drops Hearth's reference; wgpu keeps a buffer alive while a
// command buffer uses it).
func (d *Device) submit(cb *wgpu.CommandBuffer, what string) error {
	defer cb.Release()
	if err := d.check(); err != nil {
		return fmt.Errorf("gpu: submit %s: %w", what, err)
	}
	d.queue.Submit(cb)
	return nil
}

// Shader runtime checks (wgpu.h's WGPUShaderRuntimeChecks): bounds checks
// clamp every array index, as WebGPU asks; loop bounding adds a counter to
// every loop so that none can run forever.
const (
	checkBounds       = uint64(wgpu.ShaderRuntimeChecksBoundsChecks)
	checkLoopBounding = uint64(wgpu.ShaderRuntimeChecksForceLoopBounding)
)

// createModule compiles WGSL code with the given runtime checks. The
// binding's TryCreateShaderModule asks for all of them; Hearth's kernels
// keep the bounds checks (load16 and the staged tiles read past a buffer's
// end on purpose and rely on them) and leave out loop bounding, the suspect
// in a tenfold prefill loss on an H100 (its counter can keep a driver from
// unrolling the register-tiled loops; docs/performance.md, "The new binding
// on a GPU: loop bounding"): every loop in shaders/ ends on its own.
// The module is the binding's type around the handle; the caller releases it.
func createModule(d *wgpu.Device, label, code string, checks uint64) (*wgpu.ShaderModule, error) {
	cl, cc := C.CString(label), C.CString(code)
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cc))
	r := (*C.hearthScopeResult)(C.calloc(1, C.size_t(unsafe.Sizeof(C.hearthScopeResult{}))))
	defer C.free(unsafe.Pointer(r))
	ref := C.hearthTrustedModule(deviceHandle(d), cl, cc, C.size_t(len(code)), C.uint64_t(checks), r)
	mod := &wgpu.ShaderModule{}
	// The binding's ShaderModule holds its C handle in its first field, as
	// wgpu.Device does (deviceHandle); its Release frees the handle.
	*(*unsafe.Pointer)(unsafe.Pointer(mod)) = ref
	if r._type != 0 && r._type != errorTypeNoError {
		mod.Release()
		return nil, fmt.Errorf("%s", C.GoString(&r.message[0]))
	}
	if ref == nil {
		// No module and no error (a lost device, say): a pipeline made
		// from a null module would crash inside wgpu-native.
		return nil, fmt.Errorf("wgpu-native made no shader module and reported no error")
	}
	return mod, nil
}
