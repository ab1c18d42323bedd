package training

import (
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
)

// TestTargetsMatchTheTensorMap: NewLoRA names a layer's pairs by
// targetTensor (or the fused tensor a projection was cut from), and
// FromAdapter reads the targets back from the architecture's tensor map;
// for every architecture training covers, the two must agree and every
// target must reach a tensor, but the feed-forward's in a mixture of
// experts, which NewLoRA refuses by name (TestMoETargets).
func TestTargetsMatchTheTensorMap(t *testing.T) {
	for _, a := range arch.All() {
		if !a.Trainable {
			continue
		}
		covered := map[string]bool{}
		for _, x := range a.Block {
			for _, name := range x.LoRA {
				i := slices.Index(Targets, name)
				if i < 0 {
					t.Errorf("%s: %s carries %q, not one of %v", a.Name, x.GGUF, name, Targets)
					continue
				}
				covered[name] = true
				if len(x.LoRA) == 1 && targetTensor[i]+".weight" != x.GGUF {
					t.Errorf("%s: target %q is %s in the tensor map, %s.weight in training", a.Name, name, x.GGUF, targetTensor[i])
				}
			}
		}
		moe := slices.ContainsFunc(a.Block, func(x arch.Tensor) bool { return x.Stack == arch.DimExperts })
		for _, name := range Targets {
			if !covered[name] && !(moe && slices.Contains([]string{"gate", "up", "down"}, name)) {
				t.Errorf("%s: no layer tensor carries target %q", a.Name, name)
			}
		}
	}
}
