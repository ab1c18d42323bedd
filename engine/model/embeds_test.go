package model

import (
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// imageRows are n rows of m's width standing in for an image's projected
// tokens: smooth patterns of the embeddings' scale that differ row by row.
func imageRows(m *Model, n int) []float32 {
	d := m.Config.Hidden
	rows := make([]float32, n*d)
	for r := range n {
		for j := range d {
			rows[r*d+j] = float32(math.Sin(float64(r*7+j*3)/5)) * 0.8
		}
	}
	return rows
}

// TestForwardEmbedsMatchesCPU runs text, an image's rows and text again on
// both backends and compares every position's logits. Where the rows
// attend to each other (Config.ImageBatch), run one at a time (each its
// own batch, so causally) the last row's logits come out otherwise; where
// they are causal (Gemma 4 with per-layer inputs), the same. One row given
// as a token's scaled embedding is that token: token 5, or token 0 for
// per-layer inputs, which look up token 0 for every row.
func TestForwardEmbedsMatchesCPU(t *testing.T) {
	for _, tc := range []struct{ preset, quant string }{{"tiny-gemma3", "F32"}, {"tiny-llama", "Q4_K_M"}, {"tiny-gemma4", "F32"}, {"tiny-gemma4moe", "F32"}} {
		t.Run(tc.preset+"-"+tc.quant, func(t *testing.T) {
			m := synthModel(t, tc.preset, tc.quant)
			cpu, g, prompt := backends(t, m, 64, 16, 14, 17)
			// 9 tokens, 12 image rows (crossing the sliding windows), 5 tokens.
			rows := imageRows(m, 12)
			var want [3][]float32
			for i, r := range []Runner{cpu, g} {
				res := [3]Result{}
				var err error
				if res[0], err = r.Forward(prompt[:9], 0, Output{All: true}); err != nil {
					t.Fatal(err)
				}
				if res[1], err = r.ForwardEmbeds(0, rows, 9, Output{All: true}); err != nil {
					t.Fatal(err)
				}
				if res[2], err = r.Forward(prompt[9:], 21, Output{All: true}); err != nil {
					t.Fatal(err)
				}
				for part := range res {
					if i == 0 {
						want[part] = res[part].Logits
						continue
					}
					if d, at := maxRelDiff(res[part].Logits, want[part]); d > tolFor(m) {
						t.Errorf("part %d: GPU logits differ from the CPU's by %.3g of the range at %d", part, d, at)
					}
				}
			}

			// The same rows one at a time: causal, so the last row's
			// logits move unless the batch was causal too.
			var last Result
			for r := range 12 {
				var err error
				if last, err = cpu.ForwardEmbeds(0, rows[r*m.Config.Hidden:(r+1)*m.Config.Hidden], 9+r, Output{}); err != nil {
					t.Fatal(err)
				}
			}
			vocab := m.Config.Vocab
			d, _ := maxRelDiff(last.Logits, want[1][11*vocab:])
			if m.PLE == nil && d < 1e-3 {
				t.Errorf("the image's rows one at a time give its last logits within %.3g of the range: the batch mask does nothing", d)
			}
			if m.PLE != nil && d > tolFor(m) {
				t.Errorf("the image's rows one at a time give its last logits %.3g of the range away: the batch was not causal", d)
			}

			// One row as a token's embedding is that token.
			id := 5
			if m.PLE != nil {
				id = 0
			}
			row := make([]float32, m.Config.Hidden)
			rb := m.Embed.RowBytes()
			if err := gguf.Dequantize(m.Embed.Type, m.Embed.Data[id*rb:(id+1)*rb], row); err != nil {
				t.Fatal(err)
			}
			if s := m.Config.EmbedScale; s != 0 {
				for j := range row {
					row[j] *= s
				}
			}
			for _, r := range []Runner{cpu, g} {
				byRow, err := r.ForwardEmbeds(0, row, 3, Output{})
				if err != nil {
					t.Fatal(err)
				}
				byToken, err := r.Forward([]int32{int32(id)}, 3, Output{})
				if err != nil {
					t.Fatal(err)
				}
				if d, at := maxRelDiff(byRow.Logits, byToken.Logits); d > tolFor(m) {
					t.Errorf("%T: a token's embedding as a row differs from the token by %.3g of the range at %d", r, d, at)
				}
			}
		})
	}
}

// TestForwardEmbedsRefuses: rows of the wrong width, more rows than one GPU
// batch, positions past the context, and a model whose AltUp streams need
// token embeddings are refused by name.
func TestForwardEmbedsRefuses(t *testing.T) {
	m := synthModel(t, "tiny-gemma3", "F32")
	cpu, g, _ := backends(t, m, 64, 16, 1, 1)
	d := m.Config.Hidden
	for _, tc := range []struct {
		name string
		r    Runner
		rows []float32
		pos  int
		want string
	}{
		{"ragged rows", cpu, make([]float32, d+1), 0, "no whole number"},
		{"no rows", g, nil, 0, "no whole number"},
		{"past the context", cpu, make([]float32, 4*d), 62, "do not fit"},
		{"over one batch", g, make([]float32, 17*d), 0, "over the 16"},
	} {
		if _, err := tc.r.ForwardEmbeds(0, tc.rows, tc.pos, Output{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	pm := synthModel(t, "tiny-gemma3n", "F32")
	pc, err := NewCPU(pm, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.ForwardEmbeds(0, make([]float32, pm.Config.Hidden), 0, Output{}); err == nil || !strings.Contains(err.Error(), "AltUp") {
		t.Errorf("tiny-gemma3n: %v, want a refusal naming its AltUp streams", err)
	}
}
