package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// ollamaEdits turns a file in llama.cpp's converter's key forms (what
// Hearth's importer writes) into the key forms Ollama's converter writes
// for the same Hugging Face folder, read from its convert/convert_*.go and
// convert/tokenizer.go:
//   - every architecture: tokenizer.ggml.pre is "default" for a byte-level
//     BPE whose pre-tokenizer it does not recognise (GPT-2's ByteLevel), no
//     add_space_prefix.
//   - llama: also attention.head_dim and vocab_size.
//   - qwen2: no attention.key_length / value_length, no
//     rope.dimension_count; YaRN as type and factor only, without
//     original_context_length (Qwen 2.5 ships max_position_embeddings equal
//     to the original context, which the reader's default then gives; the
//     yarn fixture's 64 is set back to its original 16 to say the same).
//   - phi3: no key_length / value_length and no rope.scaling.type; LongRoPE
//     as the factor tensors, attn_factor and original_context_length.
//   - gemma3: sliding_window_pattern as one bool per layer (from
//     layer_types), the local base as rope.local.freq_base. Its converter
//     writes no linear rope.scaling (only yarn); the fixture's factor 4 on
//     the global layers is kept, since without it no reader could match
//     transformers.
func ollamaEdits(t *testing.T, f *gguf.File) map[string]gguf.Value {
	t.Helper()
	a := f.Architecture() + "."
	set := map[string]gguf.Value{
		tokenizer.KeyPre:            gguf.ValueOf("default"),
		tokenizer.KeyAddSpacePrefix: {},
		tokenizer.KeyRemoveExtraWS:  {},
	}
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	switch c.Arch {
	case "llama":
		set[a+"attention.head_dim"] = gguf.ValueOf(uint32(c.HeadDim))
		set[a+"vocab_size"] = gguf.ValueOf(uint32(c.Vocab))
	case "qwen2":
		for _, k := range []string{"attention.key_length", "attention.value_length", "rope.dimension_count"} {
			set[a+k] = gguf.Value{}
		}
		if c.YaRN != nil {
			set[a+"rope.scaling.original_context_length"] = gguf.Value{}
			set[a+"context_length"] = gguf.ValueOf(uint32(c.RopeOrigContext))
		}
	case "phi3":
		for _, k := range []string{"attention.key_length", "attention.value_length", "rope.scaling.type"} {
			set[a+k] = gguf.Value{}
		}
	case "gemma3":
		layers := make([]bool, c.Layers)
		for i := range layers {
			layers[i] = c.Sliding(i)
		}
		set[a+"attention.sliding_window_pattern"] = gguf.ArrayOf(layers)
		set[a+"rope.freq_base_swa"] = gguf.Value{}
		set[a+"rope.local.freq_base"] = gguf.ValueOf(c.RopeBaseLocal)
	}
	return set
}

// TestConverterForms loads every transformers fixture in the key forms of
// both converters whose files users have, llama.cpp's (Hearth's importer
// writes those) and Ollama's (ollamaEdits), and checks that each reads to
// the same configuration and RoPE factors, tokenizes the prompt to
// transformers' ids (llama.cpp's form; see below), and gives transformers'
// logits at every prompt
// position (on the CPU reference; TestMatchesTransformers runs the GPU on
// the same configurations).
func TestConverterForms(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "hf", "*", "expected.json"))
	if err != nil || len(dirs) < 10 {
		t.Fatalf("want the 10 fixtures of testdata/hf, found %d (%v)", len(dirs), err)
	}
	for _, exp := range dirs {
		family := filepath.Base(filepath.Dir(exp))
		t.Run(family, func(t *testing.T) {
			var e struct {
				hfExpected
				PromptText string `json:"prompt_text"`
			}
			raw, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			want := readF32File(t, filepath.Join(filepath.Dir(exp), "logits.bin"), e.LogitsShape[0]*e.LogitsShape[1])
			llamaCpp := importFixture(t, family)
			base, err := Load(llamaCpp)
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			ollama := rewrite(t, llamaCpp, ollamaEdits(t, base.File))
			for form, path := range map[string]string{"llama.cpp": llamaCpp, "ollama": ollama} {
				t.Run(form, func(t *testing.T) {
					m, err := Load(path)
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					got := m.Config
					if form == "ollama" && got.YaRN != nil {
						got.Context = base.Config.Context // the one edit that reads back differently
					}
					sameConfig(t, got, base.Config)
					for _, ctx := range []int{16, 64} {
						if !slices.Equal(m.RopeFactorsFor(ctx), base.RopeFactorsFor(ctx)) {
							t.Errorf("context %d: RoPE factors %v, the llama.cpp form's %v", ctx, m.RopeFactorsFor(ctx), base.RopeFactorsFor(ctx))
						}
					}
					// Ollama's converter names a tokenizer.json without Split
					// pre-tokenizers, such as these fixtures' GPT-2 ByteLevel,
					// "default"; llama.cpp and Hearth split such a vocabulary
					// with llama.cpp's default expressions, which cut "'s"
					// from its word where GPT-2's regex keeps them together.
					// The GGUF holds nothing that tells the two apart, so the
					// prompt ids are checked in llama.cpp's form only.
					if form == "llama.cpp" {
						if ids := m.Tokenizer.Encode(e.PromptText, tokenizer.EncodeOptions{AddSpecial: true}); !slices.Equal(ids, e.PromptIDs) {
							t.Errorf("prompt tokenized to %v, transformers %v", ids, e.PromptIDs)
						}
					}
					cpu, err := NewCPU(m, 64)
					if err != nil {
						t.Fatal(err)
					}
					res, err := cpu.Forward(e.PromptIDs, 0, Output{All: true})
					if err != nil {
						t.Fatal(err)
					}
					// The tolerance of TestMatchesTransformers, for the same
					// f32 computation.
					if d, at := maxRelDiff(res.Logits, want); d > hfTolFor(m) {
						t.Errorf("logits differ from transformers by %.3g of the range at position %d", d, at/m.Config.Vocab)
					}
				})
			}
		})
	}
}
