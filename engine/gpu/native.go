package gpu

/*
#include <stdint.h>
#include <stdlib.h>

// wgpu-native entry points the Go binding does not expose or calls wrongly.
// Declared here, with the struct layouts of the wgpu.h/webgpu.h that
// github.com/cogentcore/webgpu v0.23.0 ships, rather than including those
// headers, whose path is inside the module cache; the symbols come from the
// libwgpu_native.a the binding links.
typedef void *WGPUDeviceRef;
typedef void *WGPUInstanceRef;

typedef struct { void const *next; uint32_t sType; } hearthChainedStruct;
typedef struct {
	hearthChainedStruct chain;
	uint32_t backends;           // WGPUInstanceBackendFlags
	uint32_t flags;              // WGPUInstanceFlags
	uint32_t dx12ShaderCompiler; // WGPUDx12Compiler
	uint32_t gles3MinorVersion;  // WGPUGles3MinorVersion
	char const *dxilPath;
	char const *dxcPath;
} hearthInstanceExtras;
typedef struct { hearthChainedStruct const *nextInChain; } hearthInstanceDescriptor;

WGPUInstanceRef wgpuCreateInstance(hearthInstanceDescriptor const *descriptor);

// hearthCreateInstance creates an instance limited to backends with every
// other field of the extras zeroed (WGPUSType_InstanceExtras = 0x00030006).
static WGPUInstanceRef hearthCreateInstance(uint32_t backends) {
	hearthInstanceExtras extras = {0};
	extras.chain.sType = 0x00030006;
	extras.backends = backends;
	hearthInstanceDescriptor desc = { &extras.chain };
	return wgpuCreateInstance(&desc);
}

typedef void (*hearthErrorCallback)(uint32_t type, char const *message, void *userdata);

void wgpuDevicePushErrorScope(WGPUDeviceRef device, uint32_t filter);
void wgpuDevicePopErrorScope(WGPUDeviceRef device, hearthErrorCallback callback, void *userdata);

typedef struct { uint32_t type; char message[1024]; } hearthScopeResult;

static void hearthScopeCallback(uint32_t type, char const *message, void *userdata) {
	hearthScopeResult *r = (hearthScopeResult *)userdata;
	r->type = type;
	r->message[0] = 0;
	if (message) {
		size_t i = 0;
		for (; message[i] && i < sizeof(r->message) - 1; i++) r->message[i] = message[i];
		r->message[i] = 0;
	}
}

// WGPUErrorFilter_OutOfMemory in webgpu.h.
static void hearthPushOOM(WGPUDeviceRef device) { wgpuDevicePushErrorScope(device, 1); }
static void hearthPop(WGPUDeviceRef device, hearthScopeResult *r) { wgpuDevicePopErrorScope(device, hearthScopeCallback, r); }

typedef void *WGPUBufferRef;
typedef void (*hearthMapCallback)(uint32_t status, void *userdata);
void wgpuBufferMapAsync(WGPUBufferRef buffer, uint32_t mode, size_t offset, size_t size, hearthMapCallback callback, void *userdata);

// hearthMapState is where a map callback reports: C memory, so it stays put
// until the callback, which runs inside a later poll.
typedef struct { uint32_t status; uint32_t done; } hearthMapState;

static void hearthMapDone(uint32_t status, void *userdata) {
	hearthMapState *s = (hearthMapState *)userdata;
	s->status = status;
	s->done = 1;
}

// hearthMapRead starts mapping size bytes of buffer for reading
// (WGPUMapMode_Read = 1) inside a validation error scope
// (WGPUErrorFilter_Validation = 0); the callback fills *state.
static void hearthMapRead(WGPUDeviceRef device, WGPUBufferRef buffer, size_t size, hearthMapState *state, hearthScopeResult *r) {
	state->status = 0;
	state->done = 0;
	wgpuDevicePushErrorScope(device, 0);
	wgpuBufferMapAsync(buffer, 1, 0, size, hearthMapDone, state);
	wgpuDevicePopErrorScope(device, hearthScopeCallback, r);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// newInstance creates a wgpu instance for the given backends. The binding's
// wgpu.CreateInstance mallocs its WGPUInstanceExtras without zeroing it, so
// the flags and the GLES minor version are garbage, and wgpu-native aborts
// at random ("Unknown gles3 minor version"). The instance is made here with
// zeroed extras and wrapped in a wgpu.Instance, whose only field is the C
// handle.
func newInstance(backends wgpu.InstanceBackend) *wgpu.Instance {
	ref := C.hearthCreateInstance(C.uint32_t(backends))
	if ref == nil {
		return nil
	}
	inst := new(wgpu.Instance)
	*(*unsafe.Pointer)(unsafe.Pointer(inst)) = unsafe.Pointer(ref)
	return inst
}

// deviceHandle reads the C WGPUDevice that wgpu.Device wraps in its unexported
// first field; this pins github.com/cogentcore/webgpu v0.23.0's layout.
func deviceHandle(d *wgpu.Device) C.WGPUDeviceRef {
	return C.WGPUDeviceRef(*(*unsafe.Pointer)(unsafe.Pointer(d)))
}

// bufferHandle reads the C WGPUBuffer that wgpu.Buffer wraps in its second
// unexported field (after the device); this pins github.com/cogentcore/webgpu
// v0.23.0's layout, as deviceHandle does.
func bufferHandle(b *wgpu.Buffer) C.WGPUBufferRef {
	return C.WGPUBufferRef(*(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(b), unsafe.Sizeof(uintptr(0)))))
}

// mapState is a device's map callback report, in C memory (see startMap).
type mapState = C.hearthMapState

func newMapState() *mapState { return (*mapState)(C.calloc(1, C.size_t(unsafe.Sizeof(mapState{})))) }

func freeMapState(s *mapState) { C.free(unsafe.Pointer(s)) }

// startMap starts mapping a staging buffer for reading; the map is done when
// the device's map state says so, after a poll. The binding's
// Buffer.MapAsync hands wgpu-native a pointer to a Go variable that nothing
// keeps alive, so a garbage collection before the callback frees it and the
// callback then finds an invalid cgo.Handle ("misuse of an invalid Handle",
// seen about once in three studio chats); here the callback writes to C
// memory the device owns and no Go value crosses.
func (d *Device) startMap(st *wgpu.Buffer, size uint64) error {
	var r C.hearthScopeResult
	C.hearthMapRead(deviceHandle(d.dev), bufferHandle(st), C.size_t(size), d.mapState, &r)
	if r._type == errorTypeDeviceLost {
		d.markLost(C.GoString(&r.message[0]))
	}
	if r._type != 0 {
		return fmt.Errorf("map for reading: %s", C.GoString(&r.message[0]))
	}
	return nil
}

// mapDone reports whether the last startMap finished, and its status.
func (d *Device) mapDone() (bool, wgpu.BufferMapAsyncStatus) {
	return d.mapState.done != 0, wgpu.BufferMapAsyncStatus(d.mapState.status)
}

// errorTypeDeviceLost is WGPUErrorType_DeviceLost in webgpu.h.
const errorTypeDeviceLost = 5

// catchOOM runs f inside an out-of-memory error scope. The binding scopes its
// calls for validation errors only; an out-of-memory error outside any scope
// reaches wgpu-native's default uncaptured-error handler, which aborts the
// process — so allocating a model bigger than the GPU must go through here.
func (d *Device) catchOOM(what string, f func()) error {
	h := deviceHandle(d.dev)
	var r C.hearthScopeResult
	C.hearthPushOOM(h)
	f()
	C.hearthPop(h, &r)
	if r._type == errorTypeDeviceLost {
		d.markLost(C.GoString(&r.message[0]))
	}
	if r._type != 0 {
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
