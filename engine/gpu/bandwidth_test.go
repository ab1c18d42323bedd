package gpu

import (
	"os"
	"strconv"
	"testing"
)

// readKernel is the roofline probe: each invocation sums a grid-strided run
// of vec4<u32> words and writes one word, so the kernel's time is the time to
// read the buffer. Matmul benchmarks compare their GB/s against it.
const readKernel = `
struct Params { n4: u32, per_thread: u32, _p0: u32, _p1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> sink: array<u32>;

@compute @workgroup_size(256)
fn read(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let threads = nwg.x * 256u;
    var acc = vec4<u32>(0u);
    for (var i = 0u; i < p.per_thread; i++) {
        let j = gid.x + i * threads;
        if (j < p.n4) {
            acc ^= src[j];
        }
    }
    // One write per invocation keeps the reads alive without a reduction.
    sink[gid.x] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
`

type readParams struct {
	N4, PerThread uint32
	_             [2]uint32
}

// BenchmarkReadBandwidth reports the GB/s of a plain storage-buffer read, the
// memory roofline every decode kernel is measured against. HEARTH_BENCH_BYTES
// sets the buffer size (default 64 MiB, sized for lavapipe; use 1 GiB on a GPU
// so the buffer is far larger than its caches).
func BenchmarkReadBandwidth(b *testing.B) {
	size := uint64(64 << 20)
	if s := os.Getenv("HEARTH_BENCH_BYTES"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			b.Fatalf("HEARTH_BENCH_BYTES=%q: %v", s, err)
		}
		size = v
	}
	size = min(size, dev.Limits.MaxStorageBufferBindingSize) &^ 15
	prev := dev.source
	dev.source = func(family string) (string, error) {
		if family == "read" {
			return readKernel, nil
		}
		return prev(family)
	}
	defer func() { dev.source = prev }()
	k, err := dev.Kernel(Spec("read", "read"))
	if err != nil {
		b.Fatal(err)
	}
	src, err := dev.NewBuffer("bench.src", size)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Release()
	const groups = 2048 // enough resident threads to saturate any GPU's memory system
	sink, err := dev.NewBuffer("bench.sink", groups*256*4)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Release()
	n4 := uint32(size / 16)
	per := (n4 + groups*256 - 1) / (groups * 256)
	const reps = 20 // dispatches per submit, so submit overhead is amortised
	b.SetBytes(int64(size) * reps)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := dev.NewChain("bench.read")
		if err != nil {
			b.Fatal(err)
		}
		for r := 0; r < reps; r++ {
			if err := c.Dispatch(k, readParams{N4: n4, PerThread: per}, [3]uint32{groups, 1, 1}, src, sink); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Submit(); err != nil {
			b.Fatal(err)
		}
		if err := dev.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(size)*reps*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// BenchmarkReadBack reports the MB/s of a chain that only reads a buffer
// back to the host (copy to staging, submit, map, copy out): what an
// utterance's audio (3.7 MB for a 510-phoneme chunk) or a step's logits
// cost on top of the kernels.
func BenchmarkReadBack(b *testing.B) {
	for _, size := range []uint64{64 << 10, 1 << 20, 4 << 20} {
		b.Run(strconv.FormatUint(size>>10, 10)+"KiB", func(b *testing.B) {
			src, err := dev.NewBuffer("bench.readback", size)
			if err != nil {
				b.Fatal(err)
			}
			defer src.Release()
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				c, err := dev.NewChain("bench.readback")
				if err != nil {
					b.Fatal(err)
				}
				rb, err := c.ReadBack(src, 0, size)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Submit(); err != nil {
					b.Fatal(err)
				}
				if _, err := rb.Bytes(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
