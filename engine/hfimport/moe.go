package hfimport

import (
	"fmt"
	"strings"

	"github.com/hearthstudio/hearth/engine/arch"
)

// moe is what config.json says of a mixture-of-experts feed-forward (Qwen
// 3 MoE's, Gemma 4 26B-A4B's), in the terms of the keys llama.cpp's
// converter writes: expert_count, expert_used_count and
// expert_feed_forward_length.
type moe struct {
	experts, used, ff int
}

// keptF32 are the layer tensors llama.cpp's converter writes as F32
// whatever the output type (its list of always-F32 tensors, which
// llama-quantize keeps as they are too): the routers, whose scores choose
// the experts.
var keptF32 = []string{"ffn_gate_inp.weight"}

// hasExperts reports whether a's layers are mixtures of experts: a router
// scores DimExperts experts (an optional mixture, Gemma 4's, marks its
// tensors Experts and is not this).
func hasExperts(a *arch.Arch) bool {
	for _, t := range a.Block {
		if !t.Experts && (t.Rows == arch.DimExperts || t.Stack == arch.DimExperts) {
			return true
		}
	}
	return false
}

// parseMoE reads Qwen 3 MoE's experts: num_experts, num_experts_per_tok
// and moe_intermediate_size. What llama.cpp's qwen3moe graph would compute
// otherwise than transformers is refused by key: top-k weights left
// unnormalised (norm_topk_prob false, the class default, which the graph
// ignores: it always renormalises), dense layers among the mixtures
// (decoder_sparse_step other than 1, mlp_only_layers), and a shared expert
// (Qwen 2 MoE's, which qwen3moe has no tensors for). gpt-oss's are
// parseGPTOSS's.
func (hp *hparams) parseMoE(c object) error {
	if !hasExperts(hp.fam.arch) {
		return nil
	}
	if hp.fam.arch.Name == "gpt-oss" {
		return hp.parseGPTOSS(c)
	}
	// transformers 5 saves Qwen3MoeConfig's expert count as
	// num_local_experts (num_experts is its alias there); the published
	// checkpoints' configs say num_experts.
	countKey := "num_experts"
	if !c.has(countKey) && c.has("num_local_experts") {
		countKey = "num_local_experts"
	} else if c.has(countKey) && c.has("num_local_experts") {
		a, err := c.int(countKey, 0)
		if err != nil {
			return err
		}
		b, err := c.int("num_local_experts", 0)
		if err != nil {
			return err
		}
		if a != b {
			return c.errorf("num_local_experts", "is %d but num_experts is %d: which the model has is unclear", b, a)
		}
	}
	e, err := hp.readExperts(c, countKey, "num_experts_per_tok", "moe_intermediate_size")
	if err != nil {
		return err
	}
	norm, err := c.bool("norm_topk_prob", hp.fam.class.Defaults["norm_topk_prob"] != 0)
	if err != nil {
		return err
	}
	if !norm {
		how := "false"
		if !c.has("norm_topk_prob") {
			how = "absent (transformers' default, false)"
		}
		return c.errorf("norm_topk_prob", "is %s: llama.cpp's qwen3moe graph always divides the chosen experts' weights by their sum, so a GGUF of this model would not compute what transformers does", how)
	}
	step, err := c.int("decoder_sparse_step", 1)
	if err != nil {
		return err
	}
	if step != 1 {
		return c.errorf("decoder_sparse_step", "is %d: dense layers between the mixture-of-experts layers are not supported (1, every layer a mixture, is)", step)
	}
	switch v := c.m["mlp_only_layers"].(type) {
	case nil:
	case []any:
		if len(v) > 0 {
			return c.errorf("mlp_only_layers", "is %v: dense layers among the mixture-of-experts layers are not supported", v)
		}
	default:
		return c.errorf("mlp_only_layers", "is %v, want a list of layer indices", v)
	}
	shared, err := c.int("shared_expert_intermediate_size", 0)
	if err != nil {
		return err
	}
	if shared > 0 {
		return c.errorf("shared_expert_intermediate_size", "is %d: a shared expert (Qwen 2 MoE's) is not part of %s", shared, hp.class)
	}
	hp.moe = e
	return nil
}

// readExperts reads a mixture's sizes under the class's keys: the
// experts (countKey: num_experts, gpt-oss's num_local_experts), those
// chosen for each token (usedKey: Qwen's and gpt-oss's
// num_experts_per_tok, Gemma 4's top_k_experts) and an expert's width
// (ffKey: moe_intermediate_size, gpt-oss's intermediate_size), the class
// defaults for those absent, refusing by key a key neither gives and what
// Hearth's router cannot run.
func (hp *hparams) readExperts(c object, countKey, usedKey, ffKey string) (*moe, error) {
	e := &moe{}
	for _, f := range []struct {
		key string
		dst *int
	}{{countKey, &e.experts}, {usedKey, &e.used}, {ffKey, &e.ff}} {
		if _, ok := hp.fam.class.Defaults[f.key]; !ok && !c.has(f.key) {
			return nil, c.errorf(f.key, "is missing: a mixture of experts needs it")
		}
		var err error
		if *f.dst, err = hp.classInt(c, f.key); err != nil {
			return nil, err
		}
	}
	switch {
	case e.experts < 1 || e.experts > arch.MaxExperts:
		return nil, c.errorf(countKey, "is %d, want 1 to %d (the most Hearth's router scores)", e.experts, arch.MaxExperts)
	case e.used < 1 || e.used > e.experts:
		return nil, c.errorf(usedKey, "is %d, want 1 to %s (%d)", e.used, countKey, e.experts)
	case e.used > arch.MaxExpertsUsed:
		return nil, c.errorf(usedKey, "is %d, more than the %d experts Hearth's router chooses", e.used, arch.MaxExpertsUsed)
	case e.ff <= 0:
		return nil, c.errorf(ffKey, "is %d, want a positive number", e.ff)
	}
	return e, nil
}

// parseGemma4Experts reads Gemma 4's optional mixture (enable_moe_block:
// the 26B-A4B's 128 experts, 8 chosen, beside each layer's dense
// feed-forward): num_experts, top_k_experts and moe_intermediate_size,
// which the class leaves unset (None), so a config without one is
// refused by key. transformers' router always renormalises the chosen
// weights and scales them per expert, as llama.cpp's gemma4 graph does,
// so nothing else is read.
func (hp *hparams) parseGemma4Experts(c object) error {
	on, err := c.bool("enable_moe_block", false)
	if err != nil || !on {
		return err
	}
	hp.moe, err = hp.readExperts(c, "num_experts", "top_k_experts", "moe_intermediate_size")
	return err
}

// planFunc is Model.plan's planner of one tensor: GGUF tensor gg from the
// Hugging Face tensor hf, whose shape (outermost first) must be want; nil
// for an absent tensor that is not required.
type planFunc func(gg, hf string, want []int64, required bool, tweak func(*tensorPlan)) (*tensorPlan, error)

// stackPlan plans gg, a stack of shape[0] matrices of shape[1:], from one
// Hugging Face matrix each (hf has a %d for the index), written back to
// back: Gemma 3n's AltUp projections, the experts of a checkpoint as the
// Hub has them (mlp.experts.K.gate_proj.weight) and as transformers 5
// saves them by default.
func stackPlan(plan planFunc, gg, hf string, shape []int64) (*tensorPlan, error) {
	p := &tensorPlan{name: gg, shape: []uint64{uint64(shape[2]), uint64(shape[1]), uint64(shape[0])}}
	for k := range shape[0] {
		part, err := plan(fmt.Sprintf("%s[%d]", gg, k), fmt.Sprintf(hf, k), shape[1:], true, nil)
		if err != nil {
			return nil, err
		}
		p.parts, p.typ = append(p.parts, part), part.typ
	}
	return p, nil
}

// expertsPlan plans gg, layer tensor t of shape shape: a stack of
// experts, [experts, rows, cols]. transformers 5 holds a layer's experts
// fused, gate and up in mlp.experts.gate_up_proj [experts, 2·ff, hidden]
// (each expert's gate rows, then its up rows) and down in
// mlp.experts.down_proj [experts, hidden, ff], and save_pretrained writes
// them so with save_original_format=False (by default it splits them back
// into one matrix an expert); llama.cpp's converter reads both forms, with
// or without a ".weight" suffix, and so does this. has reports whether the
// checkpoint holds a tensor; layer is "model.layers.N.".
func expertsPlan(plan planFunc, has func(string) bool, layer, gg string, t arch.Tensor, shape []int64) (*tensorPlan, error) {
	if !strings.Contains(t.HF, "%d") {
		// A record that names the stack itself (Gemma 4's
		// experts.gate_up_proj [experts, 2·ff, hidden], gate rows first,
		// and experts.down_proj: its checkpoints hold only these): one
		// tensor, whose row-major bytes are ggml's [cols, rows, experts]
		// as they are.
		hf := layer + t.HF
		if !has(hf) && has(hf+".weight") {
			hf += ".weight"
		}
		return plan(gg, hf, shape, true, nil)
	}
	// t.HF is "mlp.experts.%d.gate_proj.weight": the fused tensors are
	// "mlp.experts.gate_up_proj" and "mlp.experts.down_proj".
	prefix, rest, ok := strings.Cut(t.HF, "%d.")
	proj := strings.TrimSuffix(rest, ".weight")
	fused := func(name string) (string, bool) {
		for _, hf := range []string{layer + prefix + name, layer + prefix + name + ".weight"} {
			if has(hf) {
				return hf, true
			}
		}
		return "", false
	}
	experts, rows, cols := shape[0], shape[1], shape[2]
	if hf, found := fused(proj); ok && found {
		return plan(gg, hf, shape, true, nil)
	}
	if hf, found := fused("gate_up_proj"); ok && found && (proj == "gate_proj" || proj == "up_proj") {
		whole, err := plan(gg, hf, []int64{experts, 2 * rows, cols}, true, nil)
		if err != nil {
			return nil, err
		}
		first := int64(0)
		if proj == "up_proj" {
			first = rows
		}
		p := &tensorPlan{name: gg, typ: whole.typ, shape: []uint64{uint64(cols), uint64(rows), uint64(experts)}}
		for k := range experts {
			part := *whole
			part.name = fmt.Sprintf("%s[%d]", gg, k)
			part.rowOff, part.rows = k*2*rows+first, rows
			p.parts = append(p.parts, &part)
		}
		return p, nil
	}
	return stackPlan(plan, gg, layer+t.HF, shape)
}

// partsSource names the Hugging Face tensors a stacked tensor is made of,
// each once, the middle of a long list elided (a layer's 128 experts).
func partsSource(parts []*tensorPlan) string {
	var names []string
	for _, part := range parts {
		if n := part.src.Name; len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	if len(names) > 3 {
		return fmt.Sprintf("%s, %s, …, %s (%d tensors)", names[0], names[1], names[len(names)-1], len(names))
	}
	return strings.Join(names, ", ")
}
