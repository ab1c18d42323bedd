package gpu

/*
#include <stdint.h>
#include <stdlib.h>

// The few wgpu-native entry points the Go binding leaves without an error
// scope. Declared here rather than including webgpu.h so this package does not
// depend on the binding's header path; the symbols come from the
// libwgpu_native.a that github.com/cogentcore/webgpu links.
typedef void *WGPUDeviceRef;
typedef void *WGPUQueueRef;
typedef void *WGPUCommandBufferRef;
typedef void (*hearthErrorCallback)(uint32_t type, char const *message, void *userdata);

void wgpuDevicePushErrorScope(WGPUDeviceRef device, uint32_t filter);
void wgpuDevicePopErrorScope(WGPUDeviceRef device, hearthErrorCallback callback, void *userdata);
void wgpuQueueSubmit(WGPUQueueRef queue, size_t count, WGPUCommandBufferRef const *commands);

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

// hearthSubmit submits one command buffer inside validation and
// out-of-memory error scopes (WGPUErrorFilter_Validation = 0 and
// WGPUErrorFilter_OutOfMemory = 1 in webgpu.h),
// so a failed submit is reported instead of reaching wgpu-native's default
// uncaptured-error handler, which aborts the process.
static void hearthSubmit(WGPUDeviceRef device, WGPUQueueRef queue, WGPUCommandBufferRef cb, hearthScopeResult *validation, hearthScopeResult *oom) {
	wgpuDevicePushErrorScope(device, 1);
	wgpuDevicePushErrorScope(device, 0);
	wgpuQueueSubmit(queue, 1, &cb);
	wgpuDevicePopErrorScope(device, hearthScopeCallback, validation);
	wgpuDevicePopErrorScope(device, hearthScopeCallback, oom);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

// handle reads the C handle a binding object wraps. The binding keeps it in an
// unexported first field (wgpu.Device{ref}, wgpu.Queue{deviceRef, ref},
// wgpu.CommandBuffer{ref}); this pins github.com/cogentcore/webgpu v0.23.0's
// layout, and TestSubmitReportsValidationError breaks if that layout moves.
func handle(p unsafe.Pointer, field int) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Add(p, field*int(unsafe.Sizeof(uintptr(0)))))
}

// errorTypeDeviceLost is WGPUErrorType_DeviceLost in webgpu.h.
const errorTypeDeviceLost = 5

// submit sends one command buffer and turns any error wgpu raises during the
// submit into a Go error naming what was submitted.
func (d *Device) submit(cb *wgpu.CommandBuffer, what string) error {
	defer cb.Release()
	if err := d.check(); err != nil {
		return err
	}
	var validation, oom C.hearthScopeResult
	C.hearthSubmit(
		C.WGPUDeviceRef(handle(unsafe.Pointer(d.dev), 0)),
		C.WGPUQueueRef(handle(unsafe.Pointer(d.queue), 1)),
		C.WGPUCommandBufferRef(handle(unsafe.Pointer(cb), 0)),
		&validation, &oom)
	for _, r := range []*C.hearthScopeResult{&validation, &oom} {
		if r._type == errorTypeDeviceLost {
			d.markLost(C.GoString(&r.message[0]))
		}
		if r._type != 0 {
			return fmt.Errorf("gpu: submit %s: %s", what, C.GoString(&r.message[0]))
		}
	}
	return d.check()
}
