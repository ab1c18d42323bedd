package kokoro

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/internal/parallel"
)

// ALBERT is PL-BERT, the phoneme-level ALBERT (transformers' AlbertModel
// as AlbertConfig(vocab_size=n_token, **plbert) builds it) whose last
// hidden state feeds the duration predictor. ALBERT shares one layer's
// weights across all NumHiddenLayers passes and embeds into a narrower
// EmbeddingSize (AlbertConfig's default 128, which Kokoro keeps) that
// EmbedToHidden widens.
type ALBERT struct {
	WordEmbeddings, PositionEmbeddings, TokenTypeEmbeddings []float32
	EmbedNormW, EmbedNormB                                  []float32
	EmbedToHidden                                           *Linear
	Layer                                                   *ALBERTLayer

	EmbeddingSize, Hidden, Heads, Layers, MaxPositions int
}

// ALBERTLayer is the shared transformer layer: post-norm self-attention
// and a GELU feed-forward, each with its residual inside the norm.
type ALBERTLayer struct {
	Query, Key, Value, Dense *Linear
	AttnNormW, AttnNormB     []float32
	FFN, FFNOut              *Linear
	FFNNormW, FFNNormB       []float32
}

// albertNormEps is AlbertConfig's layer_norm_eps.
const albertNormEps = 1e-12

func loadALBERT(l *loader, c *Config) *ALBERT {
	b := c.PLBert
	// The embedding width is not in Kokoro's config (AlbertConfig's
	// default): the checkpoint's word-embedding table says it.
	e := 128
	if s := l.shape("bert.embeddings.word_embeddings.weight"); len(s) == 2 {
		e = s[1]
	}
	h, p := b.HiddenSize, "bert.encoder.albert_layer_groups.0.albert_layers.0."
	m := &ALBERT{
		WordEmbeddings:      l.tensor("bert.embeddings.word_embeddings.weight", c.NToken, e),
		PositionEmbeddings:  l.tensor("bert.embeddings.position_embeddings.weight", b.MaxPositionEmbeddings, e),
		TokenTypeEmbeddings: l.tensor("bert.embeddings.token_type_embeddings.weight", -1, e),
		EmbedNormW:          l.tensor("bert.embeddings.LayerNorm.weight", e),
		EmbedNormB:          l.tensor("bert.embeddings.LayerNorm.bias", e),
		EmbedToHidden:       loadLinear(l, "bert.encoder.embedding_hidden_mapping_in", e, h),
		Layer: &ALBERTLayer{
			Query:     loadLinear(l, p+"attention.query", h, h),
			Key:       loadLinear(l, p+"attention.key", h, h),
			Value:     loadLinear(l, p+"attention.value", h, h),
			Dense:     loadLinear(l, p+"attention.dense", h, h),
			AttnNormW: l.tensor(p+"attention.LayerNorm.weight", h),
			AttnNormB: l.tensor(p+"attention.LayerNorm.bias", h),
			FFN:       loadLinear(l, p+"ffn", h, b.IntermediateSize),
			FFNOut:    loadLinear(l, p+"ffn_output", b.IntermediateSize, h),
			FFNNormW:  l.tensor(p+"full_layer_layer_norm.weight", h),
			FFNNormB:  l.tensor(p+"full_layer_layer_norm.bias", h),
		},
		EmbeddingSize: e, Hidden: h, Heads: b.NumAttentionHeads, Layers: b.NumHiddenLayers,
		MaxPositions: b.MaxPositionEmbeddings,
	}
	// The pooler (a [CLS] head) is never used by Kokoro.
	l.used["bert.pooler.weight"], l.used["bert.pooler.bias"] = true, true
	return m
}

// forward returns the last hidden state, [T][Hidden], of the token ids
// (the pads included). One utterance, so the attention mask is all ones.
func (m *ALBERT) forward(tokens []int) ([]float32, error) {
	T, E, H := len(tokens), m.EmbeddingSize, m.Hidden
	if T > m.MaxPositions {
		return nil, fmt.Errorf("kokoro: %d tokens, PL-BERT holds %d", T, m.MaxPositions)
	}
	// Embeddings: word + position + token type 0, LayerNorm.
	x := make([]float32, T*E)
	for t, id := range tokens {
		for j := range E {
			x[t*E+j] = float32(float64(m.WordEmbeddings[id*E+j]) + float64(m.PositionEmbeddings[t*E+j]) +
				float64(m.TokenTypeEmbeddings[j]))
		}
	}
	x = ref.LayerNorm(x, m.EmbedNormW, m.EmbedNormB, ref.NormArgs{Rows: T, Dim: E, Eps: albertNormEps})
	h := m.EmbedToHidden.rows(x, T)

	// The one shared layer, Layers times.
	L, dh := m.Layer, H/m.Heads
	norm := ref.NormArgs{Rows: T, Dim: H, Eps: albertNormEps}
	for range m.Layers {
		q, k, v := L.Query.rows(h, T), L.Key.rows(h, T), L.Value.rows(h, T)
		ctx := attention(q, k, v, T, m.Heads, dh)
		a := ref.LayerNorm(ref.Add(h, L.Dense.rows(ctx, T)), L.AttnNormW, L.AttnNormB, norm)
		f := L.FFNOut.rows(geluTanh(L.FFN.rows(a, T)), T)
		h = ref.LayerNorm(ref.Add(a, f), L.FFNNormW, L.FFNNormB, norm)
	}
	return h, nil
}

// attention is softmax(q kᵀ / sqrt(dh)) v per head, unmasked, on [T][H]
// rows whose heads are contiguous dh-wide slices.
func attention(q, k, v []float32, T, heads, dh int) []float32 {
	H := heads * dh
	out := make([]float32, T*H)
	scale := 1 / math.Sqrt(float64(dh))
	parallel.For(heads*T, 1, func(lo, hi int) {
		p := make([]float64, T)
		for i := lo; i < hi; i++ {
			hd, t := i/T, i%T
			qr := q[t*H+hd*dh:][:dh]
			mx := math.Inf(-1)
			for s := range T {
				kr := k[s*H+hd*dh:][:dh]
				acc := 0.0
				for j, qv := range qr {
					acc += float64(qv) * float64(kr[j])
				}
				p[s] = acc * scale
				mx = math.Max(mx, p[s])
			}
			sum := 0.0
			for s := range T {
				p[s] = math.Exp(p[s] - mx)
				sum += p[s]
			}
			for j := range dh {
				acc := 0.0
				for s := range T {
					acc += p[s] * float64(v[s*H+hd*dh+j])
				}
				out[t*H+hd*dh+j] = float32(acc / sum)
			}
		}
	})
	return out
}

// geluTanh is AlbertConfig's default hidden_act "gelu_new", GELU's tanh
// approximation (ref.GELU).
func geluTanh(x []float32) []float32 { return ref.GELU(x) }
