package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/parallel"
)

// Gemma 4's per-layer embeddings (PLE), as transformers'
// Gemma4TextModel.project_per_layer_inputs and its decoder layer compute
// them: a batch's tokens look up their rows of the per-layer table
// (Layers × PerLayerInput values a token, scaled by sqrt(PerLayerInput)),
// and the tokens' scaled embeddings are projected into the same widths
// once, before layer 0. Layer i then mixes its slice of both into the gate
// of its residual (ref.PLEGate / ops.PLEGate).
//
// The table is the model's largest tensor (E2B: 262144 × 8960 values) and
// a batch reads a handful of its rows, so it stays in the mapped file and
// is looked up on the host, like the token embedding: it costs no device
// memory and one row's dequantization a token.

// pleInputScale is transformers' per_layer_input_scale, 2^-0.5: the mean
// of the two parts keeps their scale.
var pleInputScale = float32(math.Sqrt(0.5))

// pleTokRows writes the per-layer table's rows of tokens, scaled by
// sqrt(PerLayerInput), to dst (len(tokens) rows of Layers × PerLayerInput).
// A row of E2B's width takes 4-7 µs on this 2-core machine
// (BenchmarkPLERows: F16, Q8_0, Q4_K), a thousandth of a decoded token on
// the GPU; a batch's rows are spread over the cores (512 rows: 3.7-5.5 ms
// with GOMAXPROCS=1, 1.9-3.6 ms with 2, side by side in one run; pp512 on
// the H100 is 138 ms).
//
// A table shorter than the vocabulary (Gemma 3n's as Ollama converts it:
// the vision and audio tokens at the end have none) gives those tokens
// row 0, as transformers' Gemma3nModel does.
func (m *Model) pleTokRows(tokens []int32, dst []float32) error {
	w := m.PLE
	rb, width := w.RowBytes(), w.Cols
	scale := float32(math.Sqrt(float64(m.Config.PerLayerInput)))
	for _, id := range tokens {
		if id < 0 || int(id) >= m.Config.Vocab {
			return fmt.Errorf("model: token %d is outside the vocabulary of %d", id, m.Config.Vocab)
		}
	}
	errs := make([]error, len(tokens))
	parallel.For(len(tokens), 8, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			id := int(tokens[t])
			if id >= w.Rows {
				id = 0
			}
			row := dst[t*width : (t+1)*width]
			if err := gguf.Dequantize(w.Type, w.Data[id*rb:(id+1)*rb], row); err != nil {
				errs[t] = fmt.Errorf("model: %s row %d: %w", w.Name, id, err)
				continue
			}
			for j := range row {
				row[j] *= scale
			}
		}
	})
	return errors.Join(errs...)
}

// PLERows are the per-layer table's rows of tokens, scaled by
// sqrt(PerLayerInput): len(tokens) rows of Layers × PerLayerInput.
func (m *Model) PLERows(tokens []int32) ([]float32, error) {
	rows := make([]float32, len(tokens)*m.PLE.Cols)
	return rows, m.pleTokRows(tokens, rows)
}

// PLEInputsCPU computes a batch's per-layer-embedding inputs from its
// tokens and their scaled embeddings x; norm is the projection norm's gain
// (PLEProjNorm in f32).
func (m *Model) PLEInputsCPU(tokens []int32, x, norm []float32) (*PLEInputs, error) {
	tok := make([]float32, len(tokens)*m.PLE.Cols)
	if err := m.pleTokRows(tokens, tok); err != nil {
		return nil, err
	}
	proj, err := matmul(m.PLEModelProj, x, len(tokens))
	if err != nil {
		return nil, err
	}
	return &PLEInputs{Proj: proj, Tok: tok, Norm: norm}, nil
}

// refPLEArgs are layer i's PLE gate for n tokens.
func refPLEArgs(c *Config, n, i int) ref.PLEArgs {
	return ref.PLEArgs(PLEArgs(c, n, i))
}

// PLEArgs are c's block i's per-layer-embedding gate for n tokens
// (ops.PLEGate, ops.PLEInput).
func PLEArgs(c *Config, n, i int) ops.PLEArgs {
	return ops.PLEArgs{Tokens: n, Layers: c.Layers, Dim: c.PerLayerInput, Layer: i, Eps: c.Eps,
		ProjScale: float32(1 / math.Sqrt(float64(c.Hidden))), InputScale: pleInputScale}
}
