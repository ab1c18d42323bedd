package gpu

/*
#include <stdint.h>
#include <stdlib.h>

// Two wgpu-native entry points the Go binding does not expose. Declared here
// rather than including webgpu.h so this package does not depend on the
// binding's header path; the symbols come from the libwgpu_native.a that
// github.com/cogentcore/webgpu links.
typedef void *WGPUDeviceRef;
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
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// deviceHandle reads the C WGPUDevice that wgpu.Device wraps in its unexported
// first field; this pins github.com/cogentcore/webgpu v0.23.0's layout.
func deviceHandle(d *wgpu.Device) C.WGPUDeviceRef {
	return C.WGPUDeviceRef(*(*unsafe.Pointer)(unsafe.Pointer(d)))
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
		return fmt.Errorf("gpu: %s: %s", what, C.GoString(&r.message[0]))
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
