package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// Buffer is a storage buffer on the device. Every Hearth buffer can be bound
// as storage, written from the host and copied out for readback, so one kind
// serves weights, activations and the KV cache.
type Buffer struct {
	d     *Device
	b     *wgpu.Buffer
	id    uint64
	size  uint64
	label string
}

// Size is the buffer's size in bytes (a multiple of 4).
func (b *Buffer) Size() uint64 { return b.size }

// Label is the name given at creation; errors use it.
func (b *Buffer) Label() string { return b.label }

// usable says why b cannot be used, or nil.
func (b *Buffer) usable(op string) error {
	if b == nil {
		return fmt.Errorf("gpu: %s: buffer is nil", op)
	}
	if b.b == nil {
		return fmt.Errorf("gpu: %s %q: buffer was released", op, b.label)
	}
	return b.d.check()
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// NewBuffer creates a zeroed storage buffer of at least size bytes (rounded
// up to 4, since WGSL reads storage as 32-bit words).
func (d *Device) NewBuffer(label string, size uint64) (*Buffer, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	size = align4(size)
	if size == 0 {
		size = 4
	}
	if size > d.Limits.MaxBufferSize {
		return nil, fmt.Errorf("gpu: buffer %q: %d bytes exceeds the device's max buffer size %d", label, size, d.Limits.MaxBufferSize)
	}
	var b *wgpu.Buffer
	var err error
	oom := d.catchOOM(fmt.Sprintf("buffer %q (%d bytes)", label, size), func() {
		b, err = d.dev.TryCreateBuffer(&wgpu.BufferDescriptor{
			Label: label,
			Size:  size,
			Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst,
		})
	})
	if oom != nil {
		if b != nil {
			b.Release()
		}
		return nil, oom
	}
	if err != nil {
		return nil, fmt.Errorf("gpu: buffer %q (%d bytes): %w", label, size, err)
	}
	return &Buffer{d: d, b: b, id: d.newID(), size: size, label: label}, nil
}

// NewBufferFrom creates a buffer holding data (padded with zeros to 4 bytes).
func (d *Device) NewBufferFrom(label string, data []byte) (*Buffer, error) {
	b, err := d.NewBuffer(label, uint64(len(data)))
	if err != nil {
		return nil, err
	}
	if err := b.Write(0, data); err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}

// NewBufferF32 creates a buffer holding the float32 values.
func (d *Device) NewBufferF32(label string, v []float32) (*Buffer, error) {
	return d.NewBufferFrom(label, F32Bytes(v))
}

// Write copies data into the buffer at offset (both multiples of 4 after the
// tail of data is zero-padded). It is ordered before the next submit.
func (b *Buffer) Write(offset uint64, data []byte) error {
	if err := b.usable("write"); err != nil {
		return err
	}
	if offset%4 != 0 {
		return fmt.Errorf("gpu: write %q: offset %d is not a multiple of 4", b.label, offset)
	}
	if offset+align4(uint64(len(data))) > b.size {
		return fmt.Errorf("gpu: write %q: %d bytes at offset %d overflow its %d bytes", b.label, len(data), offset, b.size)
	}
	if len(data) == 0 {
		return nil
	}
	if len(data)%4 != 0 {
		padded := make([]byte, align4(uint64(len(data))))
		copy(padded, data)
		data = padded
	}
	if err := b.d.queue.TryWriteBuffer(b.b, offset, data); err != nil {
		return fmt.Errorf("gpu: write %q: %w", b.label, err)
	}
	return nil
}

// WriteF32 writes float32 values at element offset i.
func (b *Buffer) WriteF32(i int, v []float32) error { return b.Write(uint64(i)*4, F32Bytes(v)) }

// Read copies size bytes at offset back to the host. It submits the copy and
// waits for all work queued before it, so it is a fence too; keep it off hot
// paths except for the final logits or token.
func (b *Buffer) Read(offset, size uint64) ([]byte, error) {
	if err := b.usable("read"); err != nil {
		return nil, err
	}
	d := b.d
	if offset%4 != 0 || size%4 != 0 || offset+size > b.size {
		return nil, fmt.Errorf("gpu: read %q: range [%d, %d) is unaligned or outside its %d bytes", b.label, offset, offset+size, b.size)
	}
	if size == 0 {
		return nil, nil
	}
	st, err := d.stagingBuffer(size)
	if err != nil {
		return nil, err
	}
	enc, err := d.dev.TryCreateCommandEncoder(nil)
	if err != nil {
		return nil, fmt.Errorf("gpu: read %q: %w", b.label, err)
	}
	if err := enc.TryCopyBufferToBuffer(b.b, offset, st, 0, size); err != nil {
		enc.Release()
		return nil, fmt.Errorf("gpu: read %q: %w", b.label, err)
	}
	cb, err := enc.TryFinish(nil)
	enc.Release()
	if err != nil {
		return nil, fmt.Errorf("gpu: read %q: %w", b.label, err)
	}
	if err := d.submit(cb, "read "+b.label); err != nil {
		return nil, err
	}
	return d.mapRead(st, size, b.label)
}

// ReadF32 reads n float32 values starting at element i.
func (b *Buffer) ReadF32(i, n int) ([]float32, error) {
	raw, err := b.Read(uint64(i)*4, uint64(n)*4)
	if err != nil {
		return nil, err
	}
	return F32From(raw), nil
}

// Release frees the buffer and every cached bind group that uses it.
func (b *Buffer) Release() {
	if b == nil || b.b == nil {
		return
	}
	b.d.forgetBinds(b.id)
	b.b.Release()
	b.b = nil
}

func (d *Device) stagingBuffer(size uint64) (*wgpu.Buffer, error) {
	if st, ok := d.staging[size]; ok {
		return st, nil
	}
	st, err := d.dev.TryCreateBuffer(&wgpu.BufferDescriptor{
		Label: fmt.Sprintf("staging.%d", size),
		Size:  size,
		Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst,
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: staging buffer of %d bytes: %w", size, err)
	}
	// A handful of sizes recur (logits, one token, test outputs); bound the
	// cache so one-off reads of odd sizes do not pin memory forever.
	if len(d.staging) >= 16 {
		for k, old := range d.staging {
			if d.open != nil && slices.Contains(d.open.staged, old) {
				continue // an open chain's readback still copies into it
			}
			old.Release()
			delete(d.staging, k)
		}
	}
	d.staging[size] = st
	return st, nil
}

func (d *Device) mapRead(st *wgpu.Buffer, size uint64, label string) ([]byte, error) {
	if err := d.startMap(st, size); err != nil {
		return nil, fmt.Errorf("gpu: read %q: %w", label, err)
	}
	done, status := d.mapDone()
	for start := time.Now(); !done; {
		if err := d.check(); err != nil {
			return nil, err
		}
		// wgpu-native v29's poll reports an empty queue before the map's
		// callback has run, so only the callback says the map is done.
		d.dev.Poll(false, nil)
		if done, status = d.mapDone(); !done {
			d.pollPause(start)
		}
	}
	if status != wgpu.MapAsyncStatusSuccess {
		// A lost device fails the map; its callback has marked it by now.
		if err := d.check(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("gpu: read %q: map failed: %v", label, status)
	}
	out := make([]byte, size)
	copy(out, st.GetMappedRange(0, uint(size)))
	if err := st.TryUnmap(); err != nil {
		return nil, fmt.Errorf("gpu: read %q: %w", label, err)
	}
	return out, nil
}

// pollPause waits a little between non-blocking polls. On a GPU it only
// yields the processor for the first 5 ms (a decode step there finishes in a
// few milliseconds, and a sleep would wake 50 µs or more late); on a CPU
// adapter, and past 5 ms, it sleeps 1 ms at a time, since spinning there
// takes the cores the adapter computes on (lavapipe decoded a tiny model a
// third slower). A blocking poll would wake at the fence, but wgpu-native
// gives it a 5 s timeout, and past that a chain still running on lavapipe
// crashed in its worker thread (a 400-token prefill of a tiny model on 2
// busy cores), so Hearth never blocks in a poll.
func (d *Device) pollPause(start time.Time) {
	if d.Info.Type != "cpu" && time.Since(start) < 5*time.Millisecond {
		runtime.Gosched()
		return
	}
	time.Sleep(time.Millisecond)
}

// Wait blocks until all submitted work has finished: until the queue's
// work-done callback, asked for now, has run. wgpu-native v29's poll
// reports an empty queue while work is still running (as it does before a
// map's callback, mapRead): a decoded token's chain of an 8B model came
// back from submit and polls in 1.1 ms on an H100, less than streaming its
// weights takes, where the token took 5.5 ms.
func (d *Device) Wait() error {
	if err := d.check(); err != nil {
		return err
	}
	var done atomic.Bool
	d.queue.OnSubmittedWorkDone(func(wgpu.QueueWorkDoneStatus) { done.Store(true) })
	for start := time.Now(); !done.Load(); {
		if err := d.check(); err != nil {
			return err
		}
		d.dev.Poll(false, nil)
		if !done.Load() {
			d.pollPause(start)
		}
	}
	return d.check()
}

// F32Bytes is the little-endian byte image of v.
func F32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// F32From decodes little-endian float32 values.
func F32From(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// U32Bytes is the little-endian byte image of v.
func U32Bytes(v []uint32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], x)
	}
	return out
}

// U32From decodes little-endian uint32 values.
func U32From(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}
