package cli

import (
	"encoding/json"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
)

// mergeFixture writes an F32 tiny-qwen2 and a random rank-2 adapter on
// every target of it, and returns their paths.
func mergeFixture(t *testing.T) (base, lora string) {
	t.Helper()
	dir := t.TempDir()
	p, _ := synth.PresetByName("tiny-qwen2")
	base = filepath.Join(dir, "base.gguf")
	if err := synth.WriteFile(base, p, synth.Options{Quant: "F32", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	a := &adapter.Adapter{Arch: m.Config.Arch, Alpha: 2, Pairs: map[string]*adapter.Pair{}}
	targets := m.LoRATargets()
	for _, n := range slices.Sorted(maps.Keys(targets)) { // the seed's draws in a fixed order
		s := targets[n]
		pr := &adapter.Pair{Rank: 2, Rows: s[0], Cols: s[1], A: make([]float32, 2*s[1]), B: make([]float32, 2*s[0])}
		for i := range pr.A {
			pr.A[i] = float32(rng.NormFloat64() / math.Sqrt(float64(s[1])))
		}
		for i := range pr.B {
			pr.B[i] = float32(rng.NormFloat64() / math.Sqrt(2))
		}
		a.Pairs[n] = pr
	}
	lora = filepath.Join(dir, "lora.gguf")
	if err := adapter.WriteGGUF(lora, a); err != nil {
		t.Fatal(err)
	}
	return base, lora
}

// TestMergeCommand merges an adapter at scale 0.5 and checks that the
// merged model's logits are those of the base with --lora FILE:0.5, on the
// CPU; both routes are f32 on an F32 base, so they differ by f32 rounding
// only (engine/adapter's tolerance, 1e-5 of the logit range).
func TestMergeCommand(t *testing.T) {
	base, lora := mergeFixture(t)
	out := filepath.Join(t.TempDir(), "merged.gguf")
	stdout, _, err := execute(NewRoot(nil), "merge", "-m", base, "--lora", lora+":0.5", "-o", out, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep mergeReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if rep.Output != out || len(rep.Adapters) != 1 || rep.Adapters[0].Scale != 0.5 || rep.Adapters[0].Rank != 2 || rep.MergedTensors == 0 || rep.OutputSize == 0 {
		t.Errorf("report %+v", rep)
	}

	logitsOf := func(args ...string) [][]float32 {
		t.Helper()
		stdout, _, err := execute(NewRoot(nil), append([]string{"logits", "--backend", "cpu", "--tokens", "1,5,9,33,2"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r logitsReport
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r.Logits
	}
	plain := logitsOf("-m", base)
	adapted := logitsOf("-m", base, "--lora", lora+":0.5")
	merged := logitsOf("-m", out)
	var moved, diff, lo, hi float64 = 0, 0, math.Inf(1), math.Inf(-1)
	for i := range merged {
		for j, v := range merged[i] {
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			moved = math.Max(moved, math.Abs(float64(adapted[i][j]-plain[i][j])))
			diff = math.Max(diff, math.Abs(float64(adapted[i][j]-v)))
		}
	}
	if moved/(hi-lo) < 0.05 {
		t.Fatalf("the adapter moved the logits by only %.3g of their range", moved/(hi-lo))
	}
	if diff/(hi-lo) > 1e-5 {
		t.Errorf("--lora and the merged model differ by %.3g of the logit range", diff/(hi-lo))
	}
}

func TestMergeCommandErrors(t *testing.T) {
	base, lora := mergeFixture(t)
	out := filepath.Join(t.TempDir(), "m.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"merge", "-m", base, "-o", out}, "at least one --lora"},
		{[]string{"merge", "-m", base, "--lora", lora + ":nan", "-o", out}, "not a finite number"},
		{[]string{"merge", "-m", base, "--lora", lora + ":x", "-o", out}, `scale "x" is not a number`},
		{[]string{"merge", "-m", base, "--lora", base, "-o", out}, `not "adapter"`},
		{[]string{"merge", "-m", base, "--lora", lora, "-o", out, "--type", "Q9_9"}, "Q9_9"},
		{[]string{"logits", "--backend", "cpu", "--tokens", "1", "-m", base, "--lora", lora + ":inf"}, "not a finite number"},
	} {
		_, _, err := execute(NewRoot(nil), c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}
