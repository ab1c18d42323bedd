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
// both backends and compares every position's logits. The rows attend to
// each other in full: run one at a time (each its own batch, so causally),
// the last row's logits come out otherwise. One row given as a token's
// scaled embedding is that token.
func TestForwardEmbedsMatchesCPU(t *testing.T) {
	for _, tc := range []struct{ preset, quant string }{{"tiny-gemma3", "F32"}, {"tiny-llama", "Q4_K_M"}} {
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
			// logits move.
			var last Result
			for r := range 12 {
				var err error
				if last, err = cpu.ForwardEmbeds(0, rows[r*m.Config.Hidden:(r+1)*m.Config.Hidden], 9+r, Output{}); err != nil {
					t.Fatal(err)
				}
			}
			vocab := m.Config.Vocab
			if d, _ := maxRelDiff(last.Logits, want[1][11*vocab:]); d < 1e-3 {
				t.Errorf("the image's rows one at a time give its last logits within %.3g of the range: the batch mask does nothing", d)
			}

			// One row as token 5's embedding is token 5.
			id := 5
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
// batch, positions past the context, and models whose blocks need token
// ids are refused by name.
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
	for _, preset := range []string{"tiny-gemma4", "tiny-gemma3n"} {
		pm := synthModel(t, preset, "F32")
		pc, err := NewCPU(pm, 16)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.ForwardEmbeds(0, make([]float32, pm.Config.Hidden), 0, Output{}); err == nil || !strings.Contains(err.Error(), "token id") {
			t.Errorf("%s: %v, want a refusal naming its per-layer inputs", preset, err)
		}
	}
}
