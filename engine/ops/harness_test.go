package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// dev is the one device every parity test in this package shares: opening a
// device costs far more than a kernel on lavapipe.
var dev *gpu.Device

func TestMain(m *testing.M) {
	d, err := gpu.Open(gpu.OptionsFromEnv())
	if err != nil {
		// No adapter is a broken setup, not a reason to skip: make test
		// installs lavapipe so the real WGSL always runs.
		fmt.Fprintln(os.Stderr, "ops tests need a WebGPU adapter:", err)
		os.Exit(1)
	}
	dev = d
	code := m.Run()
	d.Release()
	os.Exit(code)
}

// upload puts v on the device, failing the test on error.
func upload(t testing.TB, label string, v []float32) *gpu.Buffer {
	t.Helper()
	b, err := dev.NewBufferF32(label, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// scratch is a zeroed device buffer of n floats.
func scratch(t testing.TB, label string, n int) *gpu.Buffer {
	t.Helper()
	b, err := dev.NewBuffer(label, uint64(n)*4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// run records the dispatches of record into one chain and submits it.
func run(t testing.TB, label string, record func(c *gpu.Chain) error) {
	t.Helper()
	c, err := dev.NewChain(label)
	if err != nil {
		t.Fatal(err)
	}
	if err := record(c); err != nil {
		c.Discard()
		t.Fatal(err)
	}
	if err := c.Submit(); err != nil {
		t.Fatal(err)
	}
}

// download reads n floats back.
func download(t testing.TB, b *gpu.Buffer, n int) []float32 {
	t.Helper()
	v, err := b.ReadF32(0, n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// randVec is n values uniform in [-scale, scale), reproducible from seed.
func randVec(seed uint64, n int, scale float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x4ea7))
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

// assertClose fails unless |got-want| <= atol + rtol*|want| everywhere, and
// reports the worst element. NaN or Inf in got where want is finite fails.
func assertClose(t testing.TB, what string, got, want []float32, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) != math.IsNaN(w) || (math.IsInf(g, 0) && !math.IsInf(w, 0)) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, g, w)
		}
		if math.IsNaN(w) || math.IsInf(w, 0) {
			continue
		}
		if excess := math.Abs(g-w) - (atol + rtol*math.Abs(w)); excess > worst {
			worst, at = excess, i
		}
	}
	if at >= 0 {
		t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g over atol %.3g + rtol %.3g)", what, at, got[at], want[at], math.Abs(float64(got[at]-want[at])), atol, rtol)
	}
}

// ggmlTestdata is the folder of ggml's reference vectors
// (shared/testdata/ggml, see its README). It walks up from the package
// directory to the first folder holding shared/testdata, which finds it both
// in the checkout (/work/main with /work/shared beside it) and in CI clones
// with shared/ as a sibling. Missing vectors fail the test: the oracle is
// part of the suite, not optional.
func ggmlTestdata(t testing.TB) string {
	return sharedtest.Dir(t, "ggml")
}

// ggmlFile reads one file of ggml's reference vectors ("Q4_0.quant.bin").
func ggmlFile(t testing.TB, name string) []byte {
	return sharedtest.File(t, "ggml", name)
}
