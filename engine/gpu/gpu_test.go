package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// testKernels is a kernel family of the test's own, so these runtime tests do
// not depend on the shipped kernels' parameter layouts.
const testKernels = `
struct Params { n: u32, add: f32, _p0: u32, _p1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

// y[i] = x[i] + p.add for i < p.n, over a grid that may wrap into y.
@compute @workgroup_size(WG)
fn shift(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i < p.n) {
        y[i] = x[i] + p.add;
    }
}
`

type shiftParams struct {
	N   uint32
	Add float32
	_   [2]uint32
}

var dev *Device

func TestMain(m *testing.M) {
	d, err := Open(OptionsFromEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpu tests need a WebGPU adapter (make test installs lavapipe):", err)
		os.Exit(1)
	}
	d.source = func(family string) (string, error) {
		if family == "test" {
			return testKernels, nil
		}
		return "", fmt.Errorf("no family %q", family)
	}
	dev = d
	code := m.Run()
	d.Release()
	os.Exit(code)
}

func shiftKernel(t *testing.T, wg int) *Kernel {
	t.Helper()
	k, err := dev.Kernel(Spec("test", "shift", "WG", wg))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newF32(t *testing.T, label string, v []float32) *Buffer {
	t.Helper()
	b, err := dev.NewBufferF32(label, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func TestOpenUsesAdapterLimits(t *testing.T) {
	adapters, err := Adapters(OptionsFromEnv())
	if err != nil {
		t.Fatal(err)
	}
	chosen, err := Choose(adapters, OptionsFromEnv())
	if err != nil {
		t.Fatal(err)
	}
	// Without explicit limits wgpu gives WebGPU's defaults (256 MiB buffers);
	// every adapter Hearth targets reports more, lavapipe 2 GiB.
	if dev.Limits.MaxBufferSize != chosen.Limits.MaxBufferSize {
		t.Errorf("device max buffer size %d, adapter reports %d", dev.Limits.MaxBufferSize, chosen.Limits.MaxBufferSize)
	}
	if dev.Limits.MaxStorageBufferBindingSize != chosen.Limits.MaxStorageBufferBindingSize {
		t.Errorf("device max storage binding %d, adapter reports %d", dev.Limits.MaxStorageBufferBindingSize, chosen.Limits.MaxStorageBufferBindingSize)
	}
}

func TestChooseByName(t *testing.T) {
	infos := []AdapterInfo{
		{Index: 0, Name: "NVIDIA H200", Type: "discrete", Backend: "vulkan"},
		{Index: 1, Name: "llvmpipe (LLVM 15)", Type: "cpu", Backend: "vulkan"},
	}
	if a, err := Choose(infos, Options{}); err != nil || a.Index != 0 {
		t.Errorf("default choice = %+v, %v; want the first (preferred) adapter", a, err)
	}
	if a, err := Choose(infos, Options{Adapter: "LLVMPIPE"}); err != nil || a.Index != 1 {
		t.Errorf("HEARTH_ADAPTER=LLVMPIPE chose %+v, %v", a, err)
	}
	if _, err := Choose(infos, Options{Adapter: "radeon"}); err == nil || !strings.Contains(err.Error(), "NVIDIA H200") {
		t.Errorf("no match should list the adapters, got %v", err)
	}
	if _, err := Choose(nil, Options{}); err == nil {
		t.Error("no adapters should be an error")
	}
}

func TestPreferenceOrder(t *testing.T) {
	infos := []AdapterInfo{
		{Index: 0, Type: "cpu", Backend: "vulkan"},
		{Index: 1, Type: "integrated", Backend: "gl"},
		{Index: 2, Type: "integrated", Backend: "vulkan"},
		{Index: 3, Type: "discrete", Backend: "vulkan"},
	}
	sortByPreference(infos)
	var got []int
	for _, a := range infos {
		got = append(got, a.Index)
	}
	if fmt.Sprint(got) != "[3 2 1 0]" {
		t.Errorf("preference order %v, want discrete, integrated vulkan, integrated gl, cpu", got)
	}
}

func TestUnknownBackendIsAnError(t *testing.T) {
	if _, err := Adapters(Options{Backend: "directx9"}); err == nil {
		t.Error("HEARTH_BACKEND=directx9 was accepted")
	}
}

// TestGridWrapsIntoY runs 70001 invocations at workgroup size 1: 70001
// workgroups exceed the 65535-per-dimension cap, so the grid wraps into y.
func TestGridWrapsIntoY(t *testing.T) {
	const n = 70001
	g := Grid(n, 1)
	if g[1] < 2 || int(g[0])*int(g[1]) < n || g[0] > 65535 {
		t.Fatalf("Grid(%d, 1) = %v", n, g)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	bx, by := newF32(t, "x", x), newF32(t, "y", make([]float32, n+1))
	c, err := dev.NewChain("wrap")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Dispatch(shiftKernel(t, 1), shiftParams{N: n, Add: 1}, g, bx, by); err != nil {
		t.Fatal(err)
	}
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
	y, err := by.ReadF32(0, n+1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if y[i] != float32(i)+1 {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], float32(i)+1)
		}
	}
	if y[n] != 0 {
		t.Errorf("y[%d] = %v: the overshooting workgroups wrote past n", n, y[n])
	}
}

// TestChainKeepsParamsPerDispatch dispatches one kernel on the same buffers
// twice in one chain with different params. A uniform cached per (pipeline,
// buffers) would give both dispatches the second params.
func TestChainKeepsParamsPerDispatch(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6}
	bx, by := newF32(t, "x", x), newF32(t, "y", make([]float32, 6))
	snap := newF32(t, "snapshot", make([]float32, 6))
	k := shiftKernel(t, 64)
	for round := 0; round < 2; round++ { // the second round runs on cached bind groups
		c, err := dev.NewChain("params")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Clear(by, 0, 24); err != nil {
			t.Fatal(err)
		}
		if err := c.Dispatch(k, shiftParams{N: 3, Add: 10}, Grid(3, 64), bx, by); err != nil {
			t.Fatal(err)
		}
		if err := c.Copy(by, 0, snap, 0, 24); err != nil {
			t.Fatal(err)
		}
		if err := c.Dispatch(k, shiftParams{N: 6, Add: 100}, Grid(6, 64), bx, by); err != nil {
			t.Fatal(err)
		}
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
		first, _ := snap.ReadF32(0, 6)
		second, _ := by.ReadF32(0, 6)
		if fmt.Sprint(first) != "[11 12 13 0 0 0]" || fmt.Sprint(second) != "[101 102 103 104 105 106]" {
			t.Fatalf("round %d: first dispatch %v, second %v", round, first, second)
		}
	}
}

// TestChainKeepFirst records two dispatches into y, keeping only the first
// (as the profiler does to time a prefix): y holds the first's result, and
// Kernels lists what was recorded.
func TestChainKeepFirst(t *testing.T) {
	bx, by := newF32(t, "x", []float32{1, 2, 3}), newF32(t, "y", make([]float32, 3))
	k := shiftKernel(t, 64)
	for keep, want := range []string{"[0 0 0]", "[11 12 13]", "[101 102 103]"} {
		c, err := dev.NewChain("keep")
		if err != nil {
			t.Fatal(err)
		}
		c.KeepFirst(keep)
		if err := c.Clear(by, 0, 12); err != nil {
			t.Fatal(err)
		}
		for _, add := range []float32{10, 100} {
			if err := c.Dispatch(k, shiftParams{N: 3, Add: add}, Grid(3, 64), bx, by); err != nil {
				t.Fatal(err)
			}
		}
		if got := len(c.Kernels()); got != keep {
			t.Errorf("keep %d: %d kernels recorded", keep, got)
		}
		if err := c.Submit(); err != nil {
			t.Fatal(err)
		}
		if got, _ := by.ReadF32(0, 3); fmt.Sprint(got) != want {
			t.Errorf("keep %d: y = %v, want %s", keep, got, want)
		}
	}
}

func TestDispatchRejectsBadCalls(t *testing.T) {
	k := shiftKernel(t, 64)
	bx, by := newF32(t, "x", make([]float32, 4)), newF32(t, "y", make([]float32, 4))
	cases := []struct {
		name   string
		params any
		grid   [3]uint32
		bufs   []*Buffer
		want   string
	}{
		{"too few buffers", shiftParams{N: 4}, Grid(4, 64), []*Buffer{bx}, "storage buffers"},
		{"missing params", nil, Grid(4, 64), []*Buffer{bx, by}, "params"},
		{"grid over the cap", shiftParams{N: 4}, [3]uint32{70000, 1, 1}, []*Buffer{bx, by}, "exceeds"},
		{"params not padded", struct{ N uint32 }{4}, Grid(4, 64), []*Buffer{bx, by}, "multiple of 16"},
		{"nil buffer", shiftParams{N: 4}, Grid(4, 64), []*Buffer{bx, nil}, "nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dev.NewChain(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Discard()
			err = c.Dispatch(k, tc.params, tc.grid, tc.bufs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "test.shift") {
				t.Fatalf("got %v, want an error naming the kernel and %q", err, tc.want)
			}
			if c.Submit() == nil {
				t.Fatal("a chain that met an error submitted anyway")
			}
		})
	}
}

func TestOneChainAtATime(t *testing.T) {
	a, err := dev.NewChain("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.NewChain("b"); err == nil {
		t.Fatal("a second chain opened while the first was recording")
	}
	a.Discard()
	b, err := dev.NewChain("b")
	if err != nil {
		t.Fatal(err)
	}
	b.Discard()
}

// TestReleasedBufferStaysValidForRecordedWork releases a buffer after a
// chain recorded a copy from it: wgpu-native aborts on any error at submit, so
// releasing must only drop Hearth's reference, never destroy the buffer.
func TestReleasedBufferStaysValidForRecordedWork(t *testing.T) {
	src, err := dev.NewBufferF32("released", []float32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	dst := newF32(t, "dst", []float32{0, 0})
	c, err := dev.NewChain("release")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Copy(src, 0, dst, 0, 8); err != nil {
		t.Fatal(err)
	}
	src.Release()
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
	got, err := dst.ReadF32(0, 2)
	if err != nil || got[0] != 1 || got[1] != 2 {
		t.Fatalf("copy from a released buffer gave %v, %v", got, err)
	}
	c2, _ := dev.NewChain("after release")
	defer c2.Discard()
	if err := c2.Copy(src, 0, dst, 0, 8); err == nil {
		t.Fatal("recording a copy from a released buffer was accepted")
	}
}

func TestBufferBoundsAreChecked(t *testing.T) {
	b := newF32(t, "small", make([]float32, 4))
	if err := b.Write(4, make([]byte, 16)); err == nil {
		t.Error("write past the end accepted")
	}
	if err := b.Write(2, make([]byte, 4)); err == nil {
		t.Error("unaligned write accepted")
	}
	if _, err := b.Read(8, 16); err == nil {
		t.Error("read past the end accepted")
	}
	if _, err := dev.NewBuffer("huge", dev.Limits.MaxBufferSize+4); err == nil {
		t.Error("buffer over the device limit accepted")
	}
	got, err := b.Read(0, 16)
	if err != nil || len(got) != 16 {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}

func TestTensorSplitsIntoRowChunks(t *testing.T) {
	// 7 rows of 32 Q8_0 elements (34 bytes each) with a 100-byte chunk limit:
	// 2 rows per chunk, chunks of 2, 2, 2, 1 rows.
	const rows, rowBytes = 7, 34
	data := make([]byte, rows*rowBytes)
	for i := range data {
		data[i] = byte(i)
	}
	tn, err := dev.NewTensor("w", gguf.TypeQ8_0, rows, 32, data, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Release()
	if len(tn.Chunks) != 4 || tn.Chunks[3].Rows != 1 || tn.Chunks[2].FirstRow != 4 {
		t.Fatalf("chunks %+v", tn.Chunks)
	}
	for _, ch := range tn.Chunks {
		n := uint64(ch.Rows * rowBytes)
		got, err := ch.Buf.Read(0, align4(n))
		if err != nil {
			t.Fatal(err)
		}
		want := data[ch.FirstRow*rowBytes : ch.FirstRow*rowBytes+int(n)]
		if string(got[:n]) != string(want) {
			t.Fatalf("chunk at row %d holds other bytes", ch.FirstRow)
		}
	}
	if _, err := dev.NewTensor("bad", gguf.TypeQ8_0, 2, 33, make([]byte, 68), 0); err == nil {
		t.Error("33 columns of Q8_0 accepted")
	}
	if _, err := dev.NewTensor("short", gguf.TypeQ8_0, 2, 32, make([]byte, 67), 0); err == nil {
		t.Error("short tensor data accepted")
	}
}

func TestLostDeviceFailsFast(t *testing.T) {
	d := &Device{}
	d.markLost("test")
	if _, err := d.NewBuffer("x", 4); !errors.Is(err, ErrDeviceLost) {
		t.Fatalf("NewBuffer on a lost device: %v", err)
	}
	if _, err := d.NewChain("x"); !errors.Is(err, ErrDeviceLost) {
		t.Fatalf("NewChain on a lost device: %v", err)
	}
}

// TestBackendRestriction creates instances limited to one backend many
// times: the old binding's CreateInstance passed garbage flags and aborted
// now and then.
func TestBackendRestriction(t *testing.T) {
	for i := 0; i < 20; i++ {
		adapters, err := Adapters(Options{Backend: "vulkan"})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range adapters {
			if a.Backend != "vulkan" {
				t.Fatalf("HEARTH_BACKEND=vulkan listed a %s adapter", a.Backend)
			}
		}
	}
}

func TestChainReadBack(t *testing.T) {
	b, err := dev.NewBufferF32("rb", []float32{1, 2, 3, 4, 5, 6})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	c, err := dev.NewChain("readback")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := c.ReadBack(b, 8, 12)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rb.Bytes(); err == nil {
		t.Error("Bytes before Submit: no error")
	}
	if _, err := c.ReadBack(b, 0, 12); err == nil {
		t.Error("second read back of the same size in one chain: no error")
	}
	c.Discard()

	c, err = dev.NewChain("readback")
	if err != nil {
		t.Fatal(err)
	}
	if rb, err = c.ReadBack(b, 8, 12); err != nil {
		t.Fatal(err)
	}
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
	raw, err := rb.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if got := F32From(raw); !slices.Equal(got, []float32{3, 4, 5}) {
		t.Errorf("read back %v, want [3 4 5]", got)
	}
}

// TestAppendParamsMatchesBinary: the fast copy of a params struct gives the
// bytes encoding/binary writes, and a struct it cannot copy (padding, a
// 2-byte field) still encodes through binary.
func TestAppendParamsMatchesBinary(t *testing.T) {
	type pair struct{ X, Y uint32 }
	type plain struct {
		A    uint32
		B    float32
		C    int32
		_    uint32
		Tab  [3]float32
		Pair [2]pair
		_    uint32
	}
	type padded struct {
		A uint16
		B uint32
	}
	for _, v := range []any{
		plain{A: 1, B: -2.5, C: -3, Tab: [3]float32{1e-30, 7, 0}, Pair: [2]pair{{1, 2}, {3, 4}}},
		padded{A: 0xBEEF, B: 9},
		shiftParams{N: 5, Add: 1.5},
	} {
		var want bytes.Buffer
		if err := binary.Write(&want, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
		got, err := dev.appendParams([]byte{0xAA}, v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[1:], want.Bytes()) || got[0] != 0xAA {
			t.Errorf("%T: got % x, want % x", v, got[1:], want.Bytes())
		}
	}
	if !plainLayout(reflect.TypeOf(plain{})) || plainLayout(reflect.TypeOf(padded{})) {
		t.Error("plainLayout misjudges a struct")
	}
}

// TestSpeculativeChainGivesWay: a chain marked speculative does not block
// the next NewChain; it is discarded and reports Done.
func TestSpeculativeChainGivesWay(t *testing.T) {
	spec, err := dev.NewChain("ahead")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.NewChain("blocked"); err == nil {
		t.Fatal("a second open chain was allowed")
	}
	spec.Speculate()
	c, err := dev.NewChain("now")
	if err != nil {
		t.Fatalf("speculative chain blocked NewChain: %v", err)
	}
	defer c.Discard()
	if !spec.Done() {
		t.Error("the speculative chain was not discarded")
	}
	if err := spec.Submit(); err == nil {
		t.Error("submitting a discarded chain succeeded")
	}
}

// TestReadBackSurvivesGarbageCollection: reads while the collector runs
// without pause. The binding's MapAsync left the callback's cgo.Handle in a
// Go variable nothing kept alive, and a collection between the map and the
// poll that runs the callback crashed the process ("misuse of an invalid
// Handle"); the map callback now reports into C memory.
func TestReadBackSurvivesGarbageCollection(t *testing.T) {
	want := []float32{1, 2, 3, 4, 5}
	b := newF32(t, "gc", want)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Small words of all ones, the size of a handle, so freed handles
		// are soon overwritten.
		keep := make([]*uint64, 0, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for range 4096 {
				w := new(uint64)
				*w = ^uint64(0)
				keep = append(keep, w)
			}
			keep = keep[:0]
			runtime.GC()
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for i := range 300 {
		got, err := b.ReadF32(0, len(want))
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read %d: %v, want %v", i, got, want)
		}
	}
}
