package gpu

import (
	"fmt"
	"strings"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// Uniform parameters live in an arena of fixed slots. Each dispatch of a chain
// takes the next slot, so two dispatches of the same kernel on the same
// buffers in one chain keep their own parameters (a per-(pipeline, buffers)
// uniform, as the seed cached it, would give both the last write: queue writes
// land before the whole command buffer runs). The slots are written with one
// queue write per page at submit.
const (
	// paramSlot is the size of one slot: 256 bytes is the largest
	// minUniformBufferOffsetAlignment WebGPU allows, and no Hearth params
	// struct is bigger.
	paramSlot = 256
	// slotsPerPage slots share one uniform buffer of 64 KiB, the WebGPU
	// default maxUniformBufferBindingSize.
	slotsPerPage = 256
)

type uniformArena struct {
	d     *Device
	pages []*wgpu.Buffer
}

func (a *uniformArena) init(d *Device) { a.d = d }

func (a *uniformArena) page(i int) (*wgpu.Buffer, error) {
	for len(a.pages) <= i {
		b, err := a.d.dev.TryCreateBuffer(&wgpu.BufferDescriptor{
			Label: fmt.Sprintf("params.page%d", len(a.pages)),
			Size:  paramSlot * slotsPerPage,
			Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst,
		})
		if err != nil {
			return nil, fmt.Errorf("gpu: uniform page: %w", err)
		}
		a.pages = append(a.pages, b)
	}
	return a.pages[i], nil
}

func (a *uniformArena) release() {
	for _, p := range a.pages {
		p.Release()
	}
	a.pages = nil
}

// maxBindings bounds the storage buffers of one kernel; WebGPU guarantees 8
// storage buffers per stage, and no Hearth kernel needs more.
const maxBindings = 8

type bindKey struct {
	kernel uint64
	slot   int
	n      int
	bufs   [maxBindings]uint64
}

func (d *Device) forgetBinds(bufID uint64) {
	for _, k := range d.bindsOf[bufID] {
		if bg, ok := d.binds[k]; ok {
			bg.Release()
			delete(d.binds, k)
		}
	}
	delete(d.bindsOf, bufID)
}

// Chain records many dispatches into one command encoder and submits them
// once: a whole decode token or training step is one Chain. Dispatchers in
// engine/ops append to a Chain and never submit or read back themselves.
//
// Only one Chain may be open on a Device at a time, since the chain owns the
// uniform arena's slots until it is submitted.
type Chain struct {
	d       *Device
	label   string
	enc     *wgpu.CommandEncoder
	pass    *wgpu.ComputePassEncoder
	params  []byte
	kernels []string
	err     error
	done    bool
	// staged are the staging buffers this chain's readbacks copy into; two
	// readbacks of one chain must not share one.
	staged []*wgpu.Buffer
	// speculative chains were recorded ahead of need; see Speculate.
	speculative bool
	// submitted is set once the queue accepted the chain.
	submitted bool
	// keep, when keeping, is how many dispatches the chain records; see
	// KeepFirst.
	keep    int
	keeping bool
}

// NewChain opens a command encoder for a sequence of dispatches.
func (d *Device) NewChain(label string) (*Chain, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if d.open != nil && d.open.speculative {
		d.open.Discard()
	}
	if d.open != nil {
		return nil, fmt.Errorf("gpu: chain %q: chain %q is still open (submit or discard it first)", label, d.open.label)
	}
	enc, err := d.dev.TryCreateCommandEncoder(&wgpu.CommandEncoderDescriptor{Label: label})
	if err != nil {
		return nil, fmt.Errorf("gpu: chain %q: %w", label, err)
	}
	c := &Chain{d: d, label: label, enc: enc}
	d.open = c
	return c, nil
}

// Speculate marks a chain recorded ahead of need (the next decode step,
// recorded while the GPU runs this one): a NewChain on the device discards
// it instead of failing, and its owner sees Done and records it again.
func (c *Chain) Speculate() { c.speculative = true }

// KeepFirst makes the chain record only its first n dispatches: later
// ones are checked as usual but not recorded (copies and readbacks still
// are). A profiler times a chain's prefixes with it; the difference of two
// prefixes' times is what the dispatches between them cost.
func (c *Chain) KeepFirst(n int) { c.keep, c.keeping = n, true }

// Kernels names the dispatches recorded so far, in order.
func (c *Chain) Kernels() []string { return append([]string(nil), c.kernels...) }

// Done reports whether the chain was submitted or discarded.
func (c *Chain) Done() bool { return c.done }

// Device is the device the chain records for.
func (c *Chain) Device() *Device { return c.d }

// Err is the first error the chain met; once set, later calls do nothing.
func (c *Chain) Err() error { return c.err }

func (c *Chain) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	return err
}

func (c *Chain) ensurePass() {
	if c.pass == nil {
		c.pass = c.enc.BeginComputePass(&wgpu.ComputePassDescriptor{Label: c.label})
	}
}

func (c *Chain) endPass() error {
	if c.pass == nil {
		return nil
	}
	err := c.pass.TryEnd()
	c.pass.Release()
	c.pass = nil
	if err != nil {
		return fmt.Errorf("gpu: chain %q (kernels %s): %w", c.label, c.kernelList(), err)
	}
	return nil
}

func (c *Chain) kernelList() string {
	seen := map[string]bool{}
	var out []string
	for _, k := range c.kernels {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return strings.Join(out, ", ")
}

// Dispatch appends one dispatch of k over grid workgroups with params (a
// struct of 4-byte fields padded to 16 bytes, or nil when k has no uniform)
// and the storage buffers in binding order.
func (c *Chain) Dispatch(k *Kernel, params any, grid [3]uint32, bufs ...*Buffer) error {
	if c.err != nil {
		return c.err
	}
	if c.done {
		return fmt.Errorf("gpu: chain %q: already submitted", c.label)
	}
	d := c.d
	name := k.Spec.Name()
	if len(bufs) != k.nStorage {
		return c.fail(fmt.Errorf("gpu: kernel %s: got %d storage buffers, want %d", name, len(bufs), k.nStorage))
	}
	if (params != nil) != k.hasParams {
		return c.fail(fmt.Errorf("gpu: kernel %s: params given = %v, kernel declares a uniform = %v", name, params != nil, k.hasParams))
	}
	maxWG := d.Limits.MaxComputeWorkgroupsPerDimension
	for i, g := range grid {
		if g > maxWG {
			return c.fail(fmt.Errorf("gpu: kernel %s: grid %v: dimension %d exceeds the device's %d workgroups (use Grid)", name, grid, i, maxWG))
		}
	}
	if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
		return nil // nothing to do; WebGPU allows it but skip the bookkeeping
	}
	key := bindKey{kernel: k.id, n: len(bufs), slot: -1}
	for i, b := range bufs {
		if b == nil || b.b == nil {
			return c.fail(fmt.Errorf("gpu: kernel %s: storage buffer %d is nil or released", name, i))
		}
		if b.d != d {
			return c.fail(fmt.Errorf("gpu: kernel %s: buffer %q belongs to another device", name, b.label))
		}
		if b.size > d.Limits.MaxStorageBufferBindingSize {
			return c.fail(fmt.Errorf("gpu: kernel %s: buffer %q is %d bytes, over the device's %d-byte storage binding limit (split it into row chunks)", name, b.label, b.size, d.Limits.MaxStorageBufferBindingSize))
		}
		key.bufs[i] = b.id
	}

	var pageBuf *wgpu.Buffer
	var slotOff uint64
	var paramLen int
	if params != nil {
		slot := len(c.params) / paramSlot
		start := slot * paramSlot
		var err error
		if c.params, err = d.appendParams(c.params, params); err != nil {
			return c.fail(fmt.Errorf("gpu: kernel %s: params %T: %w", name, params, err))
		}
		paramLen = len(c.params) - start
		if paramLen%16 != 0 || paramLen > paramSlot {
			return c.fail(fmt.Errorf("gpu: kernel %s: params %T are %d bytes; want a multiple of 16 up to %d", name, params, paramLen, paramSlot))
		}
		c.params = append(c.params, make([]byte, paramSlot-paramLen)...) // pad the slot
		key.slot = slot
		if pageBuf, err = d.arena.page(slot / slotsPerPage); err != nil {
			return c.fail(err)
		}
		slotOff = uint64(slot%slotsPerPage) * paramSlot
	}

	bg, ok := d.binds[key]
	if !ok {
		entries := make([]wgpu.BindGroupEntry, 0, len(bufs)+1)
		first := uint32(0)
		if params != nil {
			entries = append(entries, wgpu.BindGroupEntry{Binding: 0, Buffer: pageBuf, Offset: slotOff, Size: uint64(paramLen)})
			first = 1
		}
		for i, b := range bufs {
			entries = append(entries, wgpu.BindGroupEntry{Binding: first + uint32(i), Buffer: b.b, Size: b.size})
		}
		var err error
		bg, err = d.dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{Label: name, Layout: k.layout, Entries: entries})
		if err != nil {
			return c.fail(fmt.Errorf("gpu: kernel %s: bind group: %w", name, err))
		}
		d.binds[key] = bg
		for _, b := range bufs {
			d.bindsOf[b.id] = append(d.bindsOf[b.id], key)
		}
	}
	if c.keeping && len(c.kernels) >= c.keep {
		return nil
	}
	c.ensurePass()
	c.pass.SetPipeline(k.pipeline)
	c.pass.SetBindGroup(0, bg, nil)
	c.pass.DispatchWorkgroups(grid[0], grid[1], grid[2])
	c.kernels = append(c.kernels, name)
	if err := d.kernelLog.record(name); err != nil {
		return c.fail(err)
	}
	return nil
}

// Copy appends a buffer-to-buffer copy (ends the current compute pass).
func (c *Chain) Copy(src *Buffer, srcOff uint64, dst *Buffer, dstOff, size uint64) error {
	if c.err != nil {
		return c.err
	}
	if c.done {
		return fmt.Errorf("gpu: chain %q: already submitted or discarded", c.label)
	}
	for _, b := range []*Buffer{src, dst} {
		if err := b.usable("copy in chain " + c.label); err != nil {
			return c.fail(err)
		}
	}
	if srcOff%4 != 0 || dstOff%4 != 0 || size%4 != 0 || srcOff+size > src.size || dstOff+size > dst.size {
		return c.fail(fmt.Errorf("gpu: chain %q: copy %d bytes %q+%d → %q+%d is unaligned or out of range", c.label, size, src.label, srcOff, dst.label, dstOff))
	}
	if err := c.endPass(); err != nil {
		return c.fail(err)
	}
	if err := c.enc.TryCopyBufferToBuffer(src.b, srcOff, dst.b, dstOff, size); err != nil {
		return c.fail(fmt.Errorf("gpu: chain %q: copy %q → %q: %w", c.label, src.label, dst.label, err))
	}
	return nil
}

// Readback is a range of a buffer that a chain copies to host-visible memory;
// Bytes maps it once the chain is submitted. It lets a decode step fetch its
// token in the same submit as the step itself.
type Readback struct {
	d     *Device
	st    *wgpu.Buffer
	size  uint64
	label string
	chain *Chain
}

// ReadBack appends a copy of size bytes at offset in b to a staging buffer
// (ends the current compute pass). After Submit, the Readback's Bytes waits
// for the chain and returns them.
func (c *Chain) ReadBack(b *Buffer, offset, size uint64) (*Readback, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.done {
		return nil, fmt.Errorf("gpu: chain %q: already submitted or discarded", c.label)
	}
	if err := b.usable("read back in chain " + c.label); err != nil {
		return nil, c.fail(err)
	}
	if offset%4 != 0 || size%4 != 0 || size == 0 || offset+size > b.size {
		return nil, c.fail(fmt.Errorf("gpu: chain %q: read back %q [%d, %d) is empty, unaligned or out of range", c.label, b.label, offset, offset+size))
	}
	st, err := c.d.stagingBuffer(size)
	if err != nil {
		return nil, c.fail(err)
	}
	for _, used := range c.staged {
		if used == st {
			return nil, c.fail(fmt.Errorf("gpu: chain %q: two read backs of %d bytes in one chain", c.label, size))
		}
	}
	if err := c.endPass(); err != nil {
		return nil, c.fail(err)
	}
	if err := c.enc.TryCopyBufferToBuffer(b.b, offset, st, 0, size); err != nil {
		return nil, c.fail(fmt.Errorf("gpu: chain %q: read back %q: %w", c.label, b.label, err))
	}
	c.staged = append(c.staged, st)
	return &Readback{d: c.d, st: st, size: size, label: b.label, chain: c}, nil
}

// Bytes waits for the chain that recorded the readback and returns the data.
func (r *Readback) Bytes() ([]byte, error) {
	if !r.chain.submitted {
		return nil, fmt.Errorf("gpu: read back %q: chain %q was not submitted", r.label, r.chain.label)
	}
	return r.d.mapRead(r.st, r.size, r.label)
}

// Clear appends a zero fill of size bytes at offset in b.
func (c *Chain) Clear(b *Buffer, offset, size uint64) error {
	if c.err != nil {
		return c.err
	}
	if c.done {
		return fmt.Errorf("gpu: chain %q: already submitted or discarded", c.label)
	}
	if err := b.usable("clear in chain " + c.label); err != nil {
		return c.fail(err)
	}
	if offset%4 != 0 || size%4 != 0 || offset+size > b.size {
		return c.fail(fmt.Errorf("gpu: chain %q: clear %q [%d, %d) is unaligned or out of range", c.label, b.label, offset, offset+size))
	}
	if err := c.endPass(); err != nil {
		return c.fail(err)
	}
	if err := c.enc.TryClearBuffer(b.b, offset, size); err != nil {
		return c.fail(fmt.Errorf("gpu: chain %q: clear %q: %w", c.label, b.label, err))
	}
	return nil
}

// Submit writes the chain's parameters, finishes the encoder and submits it:
// one submit for everything recorded. It does not wait; Read or Device.Wait do.
func (c *Chain) Submit() error {
	if c.done {
		return fmt.Errorf("gpu: chain %q: already submitted", c.label)
	}
	defer c.close()
	if c.err != nil {
		return c.err
	}
	if err := c.endPass(); err != nil {
		return err
	}
	d := c.d
	for p := 0; p*slotsPerPage*paramSlot < len(c.params); p++ {
		lo := p * slotsPerPage * paramSlot
		hi := min(len(c.params), lo+slotsPerPage*paramSlot)
		page, err := d.arena.page(p)
		if err != nil {
			return err
		}
		if err := d.queue.TryWriteBuffer(page, 0, c.params[lo:hi]); err != nil {
			return fmt.Errorf("gpu: chain %q: params: %w", c.label, err)
		}
	}
	cb, err := c.enc.TryFinish(nil)
	if err != nil {
		return fmt.Errorf("gpu: chain %q (kernels %s): %w", c.label, c.kernelList(), err)
	}
	if err := d.submit(cb, fmt.Sprintf("chain %q (kernels %s)", c.label, c.kernelList())); err != nil {
		return err
	}
	c.submitted = true
	return nil
}

// Discard drops a chain without submitting it.
func (c *Chain) Discard() {
	if !c.done {
		if c.pass != nil {
			_ = c.pass.TryEnd()
			c.pass.Release()
			c.pass = nil
		}
		c.close()
	}
}

func (c *Chain) close() {
	c.done = true
	c.enc.Release()
	if c.d.open == c {
		c.d.open = nil
	}
}

// Grid returns the workgroup grid for threads invocations at workgroup size
// wg. Past the 65535-per-dimension cap it wraps into y; kernels then compute
// their linear index as gid.x + gid.y * num_workgroups.x * wg and bound-check
// it, since x*y may overshoot.
func Grid(threads, wg int) [3]uint32 {
	groups := (threads + wg - 1) / wg
	if groups <= 65535 {
		return [3]uint32{uint32(max(groups, 0)), 1, 1}
	}
	y := (groups + 65534) / 65535
	return [3]uint32{uint32((groups + y - 1) / y), uint32(y), 1}
}
