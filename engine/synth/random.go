package synth

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/hearthstudio/hearth/gguf"
)

const (
	// poolValues is the number of random values quantized into each pool:
	// 2M values of Q4_K take 0.3 s on one core (the 8B preset at Q4_K_M
	// needs 4 pools) and make 8192 blocks to draw from.
	poolValues = 1 << 21
	// directValues is the largest tensor quantized value by value. The
	// test presets' tensors are all below it, so their every block is
	// distinct; above it quantizing directly costs more than its pool
	// (a 1M-value Q4_K tensor is 0.15 s on one core, and Llama 3.2 1B has
	// 32 of them).
	directValues = 1 << 18
	// directChunkValues is how many values a worker quantizes at a time
	// for a tensor small enough to quantize directly: 64K values of Q4_K
	// are about 10 ms, small enough to spread a 1M-value tensor over the
	// cores.
	directChunkValues = 1 << 16
	// pooledChunkBytes is how much of a pooled tensor a worker assembles
	// at a time: big enough that the hand-off costs nothing next to the
	// copying, small enough that 3×GOMAXPROCS chunks in flight stay under
	// 100 MiB on a 16-core machine.
	pooledChunkBytes = 2 << 20
)

// Standard deviations of the values that are not matrices: RMSNorm gains
// spread around 1 so that a forward pass that drops one is visibly wrong,
// biases a fraction of a unit-variance activation, and attention sinks of
// the order of the attention logits they compete with (gpt-oss's trained
// sinks are of order one), so that each takes a visible share of its
// head's softmax.
const (
	normSigma = 0.1
	biasSigma = 0.02
	sinkSigma = 1
)

// poolKey names a pool: quantized blocks of one type for rows of one length
// (the length sets the values' standard deviation, 1/sqrt(cols)).
type poolKey struct {
	typ  gguf.Type
	cols uint64
}

// pool is a run of quantized units drawn at random into large tensors. A
// unit is one block of a quantized type, or up to 32 values of a float type
// (a row length 32 does not divide takes smaller units).
type pool struct {
	unitBytes int
	units     uint64
	data      []byte
}

// unitValues is the number of values in one pool unit of type t for rows of
// cols values.
func unitValues(t gguf.Type, cols uint64) int {
	if bs := t.BlockSize(); bs > 1 {
		return bs
	}
	u := 32
	for cols%uint64(u) != 0 {
		u /= 2
	}
	return u
}

// generator makes the values of a layout's tensors, deterministically in
// its seed. Its methods may be called from several goroutines.
type generator struct {
	seed  uint64
	pools map[poolKey]*pool // built before any tensor; read-only after
}

// minPooledUnits is the fewest pool units a row must have to be drawn from
// a pool whatever the matrix's height: with 4 of 8192 there are 2^52
// possible rows, so among even 256K rows (a vocabulary) two equal ones
// have a chance of 2^-16; a row of one block would repeat within a few
// hundred rows.
const minPooledUnits = 4

// pooled reports whether tensor t is assembled from a pool rather than
// quantized value by value. A row of 2 or 3 units is pooled where the
// matrix is short enough for the same 2^-16 chance of two equal rows:
// Qwen3-30B-A3B's experts' down products have rows of 3 Q4_K blocks (768
// values) in matrices of 2048 rows, 128 experts a layer; quantizing their
// 9.7G values one by one outlasted a 120 s limit on 16 busy cores and
// 300 s on 2 (pooled, the whole file takes 18 s and 46 s). Two experts
// sharing a row would make one output of theirs equal, which nothing
// relies on being otherwise.
func pooled(t Tensor, kind tensorKind) bool {
	if kind != kindMatrix || elements(t.Shape) <= directValues {
		return false
	}
	uv := unitValues(t.Type, t.Shape[0])
	perRow := t.Shape[0] / uint64(uv)
	if perRow >= minPooledUnits {
		return true
	}
	// The pool has poolValues/uv units: perRow·log2 of that bits of choice
	// a row, against 2·log2(rows)+16 for the chance above.
	unitBits := math.Log2(float64(poolValues / uv))
	return perRow >= 2 && float64(perRow)*unitBits >= 2*math.Log2(float64(t.Shape[1]))+16
}

// newGenerator builds the pools l's large tensors need.
func newGenerator(l *Layout, seed uint64) (*generator, error) {
	g := &generator{seed: seed, pools: map[poolKey]*pool{}}
	for i, t := range l.Tensors {
		if !pooled(t, l.specs[i].kind) {
			continue
		}
		key := poolKey{t.Type, t.Shape[0]}
		if g.pools[key] != nil {
			continue
		}
		uv := unitValues(t.Type, key.cols)
		units := poolValues / uv
		vals := make([]float32, units*uv)
		r := g.rng(fmt.Sprintf("pool %v %d", key.typ, key.cols), 0)
		normals(r, vals, 0, 1/math.Sqrt(float64(key.cols)))
		ub, _ := t.Type.RowSize(int64(uv))
		data := make([]byte, units*int(ub))
		if err := gguf.QuantizeParallel(t.Type, vals, data); err != nil {
			return nil, fmt.Errorf("synth: tensor %q: %w", t.Name, err)
		}
		g.pools[key] = &pool{unitBytes: int(ub), units: uint64(units), data: data}
	}
	return g, nil
}

// rng is the random stream of one chunk of one tensor (or pool), named so
// that a tensor's values depend on the seed and its name only, not on the
// order or the goroutine that makes them.
func (g *generator) rng(name string, chunk int) *rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(name))
	s1 := splitmix64(g.seed ^ splitmix64(h.Sum64()))
	return rand.NewPCG(s1, splitmix64(s1^uint64(chunk)))
}

// splitmix64 scrambles x (Steele, Lea and Flood's SplitMix64 finalizer), so
// that seeds that differ in one bit give unrelated streams.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// normals fills dst with N(mean, sigma²) values.
func normals(src *rand.PCG, dst []float32, mean, sigma float64) {
	r := rand.New(src)
	for i := range dst {
		dst[i] = float32(mean + sigma*r.NormFloat64())
	}
}

// fillMatrix writes rows [lo, hi) of matrix t, chunk number chunk, to dst
// (exactly their bytes). scratch is the caller's reusable buffer of values.
func (g *generator) fillMatrix(t Tensor, chunk, lo, hi int, dst []byte, scratch *[]float32) error {
	cols := t.Shape[0]
	r := g.rng(t.Name, chunk)
	if p := g.pools[poolKey{t.Type, cols}]; p != nil && pooled(t, kindMatrix) {
		// Each unit is a uniformly drawn unit of the pool: Lemire's
		// multiply-shift maps 64 random bits onto [0, units) without a
		// division.
		for off := 0; off < len(dst); off += p.unitBytes {
			u, _ := bits.Mul64(r.Uint64(), p.units)
			k := int(u) * p.unitBytes
			copy(dst[off:off+p.unitBytes], p.data[k:k+p.unitBytes])
		}
		return nil
	}
	n := (hi - lo) * int(cols)
	if cap(*scratch) < n {
		*scratch = make([]float32, n)
	}
	vals := (*scratch)[:n]
	normals(r, vals, 0, 1/math.Sqrt(float64(cols)))
	if err := gguf.Quantize(t.Type, vals, dst); err != nil {
		return fmt.Errorf("synth: tensor %q rows %d–%d: %w", t.Name, lo, hi-1, err)
	}
	return nil
}

// fillVector writes the F32 data of a tensor of the given kind that is not
// a matrix: a vector, or a stack of them (gpt-oss's experts' biases).
func (g *generator) fillVector(p Preset, t Tensor, kind tensorKind, dst []byte) {
	vals := make([]float32, elements(t.Shape))
	switch kind {
	case kindNorm:
		normals(g.rng(t.Name, 0), vals, 1, normSigma)
	case kindBias:
		normals(g.rng(t.Name, 0), vals, 0, biasSigma)
	case kindSink:
		normals(g.rng(t.Name, 0), vals, 0, sinkSigma)
	case kindRopeFreqs:
		if p.ProportionalRope > 0 {
			vals = proportionalRopeFreqs(p)
		} else {
			vals = ropeFreqs(p)
		}
	}
	for i, v := range vals {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}
