package app

import (
	"context"
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// EmbedRequest asks for the embeddings of texts.
type EmbedRequest struct {
	// Model names the model, loading it first if it is not resident.
	Model  string
	Inputs []string
	// Truncate cuts an input longer than the context to its start;
	// without it such an input is an error.
	Truncate bool
	// Progress is told about loading.
	Progress func(Progress)
	// Adapters are LoRA adapters applied first, as GenerateOptions'.
	Adapters []AdapterSpec
	// Unnormalized returns the pooled vectors as they are, not scaled to
	// unit length (Ollama's legacy /api/embeddings).
	Unnormalized bool
}

// EmbedReply is one vector per input, in order.
type EmbedReply struct {
	Model   string
	Vectors [][]float32
	// Tokens counts the input tokens evaluated.
	Tokens int
}

// Pooling is how a model's per-token hidden states become one vector: the
// GGUF key <arch>.pooling_type as llama.cpp writes it for embedding models.
type Pooling int

// The pooling types, numbered as llama.cpp numbers them.
const (
	PoolMean Pooling = 1
	PoolCLS  Pooling = 2
	PoolLast Pooling = 3
)

// poolingOf is m's pooling: its file's pooling_type, else mean (a chat
// model has none; llama.cpp's server and Ollama pool those by the mean).
func poolingOf(m *model.Model) (Pooling, error) {
	key := m.Config.Arch + ".pooling_type"
	v, err := m.File.Uint32Or(key, uint32(PoolMean))
	if err != nil {
		return 0, err
	}
	switch p := Pooling(v); p {
	case PoolMean, PoolCLS, PoolLast:
		return p, nil
	}
	return 0, fmt.Errorf("app: %s = %d: pooling of that type is not supported (mean 1, cls 2, last 3)", key, v)
}

// Embed evaluates each input (with the tokenizer's BOS where it adds one)
// and pools its tokens' final hidden states, projected by the model's
// dense layers where it has them (EmbeddingGemma's), normalised to unit
// length as OpenAI and Ollama return them.
func (e *Engine) Embed(ctx context.Context, req EmbedRequest) (EmbedReply, error) {
	if len(req.Inputs) == 0 {
		return EmbedReply{}, fmt.Errorf("app: nothing to embed")
	}
	var reply EmbedReply
	err := e.withModel(ctx, req.Model, req.Progress, req.Adapters, func(ctx context.Context, r *resident) error {
		reply.Model = r.info.Name
		if r.dense == nil {
			// Decoded once for the resident model, not at every request.
			d, err := denseOf(r.m)
			if err != nil {
				return err
			}
			r.dense = &d
		}
		var err error
		reply.Vectors, reply.Tokens, err = embed(ctx, r.m, r.session, *r.dense, req.Inputs, EmbedOptions{Truncate: req.Truncate, Unnormalized: req.Unnormalized})
		return err
	})
	return reply, err
}

// EmbedOptions are the choices of an embedding that are not the model's.
type EmbedOptions struct {
	// Truncate cuts an input longer than the context to its start;
	// without it such an input is an error.
	Truncate bool
	// Unnormalized returns the pooled vectors as they are, not scaled to
	// unit length.
	Unnormalized bool
}

// Embed is Engine.Embed on a model loaded by LoadModel (hearth embed): a
// vector for each input, and the tokens evaluated.
func (l *LoadedModel) Embed(ctx context.Context, inputs []string, o EmbedOptions) ([][]float32, int, error) {
	if len(inputs) == 0 {
		return nil, 0, fmt.Errorf("app: nothing to embed")
	}
	dense, err := denseOf(l.Model)
	if err != nil {
		return nil, 0, err
	}
	return embed(ctx, l.Model, model.NewSession(l.Runner), dense, inputs, o)
}

// embed evaluates each input on s, m's session, as Engine.Embed says;
// dense are m's dense layers (denseOf).
func embed(ctx context.Context, m *model.Model, s *model.Session, dense denseStack, inputs []string, o EmbedOptions) (vecs [][]float32, tokens int, err error) {
	pool, err := poolingOf(m)
	if err != nil {
		return nil, 0, err
	}
	d, n := m.Config.Hidden, s.Runner().Context()
	for i, text := range inputs {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		ids := m.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
		if len(ids) == 0 {
			return nil, 0, fmt.Errorf("app: input %d is empty", i)
		}
		if len(ids) > n {
			if !o.Truncate {
				return nil, 0, fmt.Errorf("%w: input %d is %d tokens, the context %d", model.ErrContextFull, i, len(ids), n)
			}
			ids = ids[:n]
		}
		h, err := s.Hidden(ids)
		if err != nil {
			return nil, 0, err
		}
		tokens += len(ids)
		v := dense.apply(pooled(h, len(ids), d, pool))
		if !o.Unnormalized {
			unit(v)
		}
		vecs = append(vecs, v)
	}
	return vecs, tokens, nil
}

// pooled is the vector of n tokens' hidden states h (n × d).
func pooled(h []float32, n, d int, p Pooling) []float32 {
	v := make([]float32, d)
	switch p {
	case PoolCLS:
		copy(v, h[:d])
	case PoolLast:
		copy(v, h[(n-1)*d:])
	default:
		sum := make([]float64, d)
		for t := range n {
			for j, x := range h[t*d : (t+1)*d] {
				sum[j] += float64(x)
			}
		}
		for j := range v {
			v[j] = float32(sum[j] / float64(n))
		}
	}
	return v
}

// unit scales v to unit length (a zero vector stays zero).
func unit(v []float32) {
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm = math.Sqrt(norm); norm > 0 {
		for j := range v {
			v[j] = float32(float64(v[j]) / norm)
		}
	}
}

// denseStack is an embedding model's projections of its pooled vector,
// applied in order: each a rows × cols matrix, row-major.
type denseStack []denseLayer

type denseLayer struct {
	w          []float32
	rows, cols int
}

// denseOf decodes m's dense layers (model.Model.Dense2 and Dense3), none
// for a model without them.
func denseOf(m *model.Model) (denseStack, error) {
	var s denseStack
	for _, w := range []*model.Weight{m.Dense2, m.Dense3} {
		if w == nil {
			continue
		}
		f, err := w.F32()
		if err != nil {
			return nil, err
		}
		s = append(s, denseLayer{f, w.Rows, w.Cols})
	}
	return s, nil
}

// apply is the vector v through every layer, each product summed in
// float64 (sentence-transformers' Dense without a bias or activation).
func (s denseStack) apply(v []float32) []float32 {
	for _, l := range s {
		out := make([]float32, l.rows)
		for r := range out {
			var sum float64
			for c, x := range l.w[r*l.cols : (r+1)*l.cols] {
				sum += float64(x) * float64(v[c])
			}
			out[r] = float32(sum)
		}
		v = out
	}
	return v
}
