package kokoro

import (
	"errors"
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// gpuText is Model.forward's text side on the GPU, up to the decoder's
// inputs: PL-BERT, the duration encoder and head (durations, one submit
// that reads back only the frame counts), then the alignment, F0/energy and
// the text encoder's content spread over the frames (frames, recorded into
// the caller's chain). The weights mirror the CPU model's fields.
//
// Activations use the CPU forward's layouts: PL-BERT's are token rows
// ([T][C], what the matmuls take), the rest channels first ([C][T]).
type gpuText struct {
	g *GPUModel
	c *Config

	bert        textALBERT
	bertEncoder *textLinear
	durEnc      []textDurLayer
	lstm        *textLSTM
	durProj     *textLinear
	shared      *textLSTM
	f0, n       []*textResBlk
	f0Proj      *textConv
	nProj       *textConv
	encoder     textEncoder

	// Left on the device by durations for frames: d, the duration
	// encoder's output [HiddenDim+StyleDim][T], and t_en, the text
	// encoder's [HiddenDim][T], for the tokens of the last call.
	d, tEn *gpu.Buffer
	tokens int
}

// textALBERT is ALBERT's weights on the device.
type textALBERT struct {
	word                    *gpu.Tensor // [n_token][E], for ops.Embed
	pos, tokenType          *gpu.Buffer // [max_positions][E]; row 0 of token types
	embNormW, embNormB      *gpu.Buffer
	embedToHidden           *textLinear
	query, key, value       *textLinear
	dense, ffn, ffnOut      *textLinear
	attnNormW, attnNormB    *gpu.Buffer
	ffnNormW, ffnNormB      *gpu.Buffer
	e, h, heads, layers, ff int
}

// textDurLayer is one BiLSTM and AdaLayerNorm of the duration encoder.
type textDurLayer struct {
	lstm *textLSTM
	fc   *textLinear // style to the norm's [gamma | beta]
}

// textEncoder is TextEncoder's weights on the device.
type textEncoder struct {
	embedding *gpu.Tensor // [n_token][C]
	cnn       []textConvBlock
	lstm      *textLSTM
}

type textConvBlock struct {
	conv        *textConv
	gamma, beta *gpu.Buffer
}

// textLinear is nn.Linear on the device: the weight as an F32 tensor for
// ops.MatMul (w, for the style projections' single row), or transposed
// (wt [in][out], for the projections of every token) for
// ops.MatMulBackwardInput, whose register-blocked tiles compute X·Wᵀ as
// X·(Wᵀ) many times faster than MatMul's row-at-a-time kernel on PL-BERT's
// 512 tokens; and the bias.
type textLinear struct {
	w, wt   *gpu.Tensor
	b       *gpu.Buffer
	in, out int
}

type textConv struct {
	w, b *gpu.Buffer
	a    ops.Conv1DArgs
}

type textLSTM struct {
	fwd, bwd      ops.LSTMWeights
	input, hidden int
	grid          int // ops.LSTMArgs.Grid, from ops.ChooseLSTMGrid
}

type textAdaIN struct {
	w, b *gpu.Buffer
	fc   *textLinear
	ch   int
}

// textResBlk is an AdainResBlk1d of the F0 and N branches.
type textResBlk struct {
	norm1, norm2 *textAdaIN
	conv1, conv2 *textConv
	conv1x1      *textConv // nil when in == out
	poolW, poolB *gpu.Buffer
	pool         *ops.ConvTranspose1DArgs // nil unless upsampling
	in, out      int
}

// textUploader uploads weights, keeping the first error.
type textUploader struct {
	g   *GPUModel
	err error
}

func (u *textUploader) buf(label string, v []float32) *gpu.Buffer {
	if u.err != nil {
		return nil
	}
	b, err := u.g.upload("text."+label, v)
	u.err = err
	return b
}

// tensor uploads w [rows][cols] as an F32 tensor. Its chunks join the
// model's uploaded buffers, which GPUModel.Release frees.
func (u *textUploader) tensor(label string, w []float32, rows, cols int) *gpu.Tensor {
	if u.err != nil {
		return nil
	}
	t, err := u.g.dev.NewTensor("text."+label, gguf.TypeF32, rows, cols, gpu.F32Bytes(w), 0)
	if err != nil {
		u.err = err
		return nil
	}
	for _, c := range t.Chunks {
		u.g.bufs = append(u.g.bufs, c.Buf)
	}
	return t
}

func (u *textUploader) linear(label string, l *Linear) *textLinear {
	return &textLinear{w: u.tensor(label+".w", l.W, l.Out, l.In), b: u.buf(label+".b", l.B), in: l.In, out: l.Out}
}

// tokenLinear is linear for a projection of every token: its weight is
// uploaded transposed (see textLinear).
func (u *textUploader) tokenLinear(label string, l *Linear) *textLinear {
	wt := make([]float32, len(l.W))
	for o := range l.Out {
		for i := range l.In {
			wt[i*l.Out+o] = l.W[o*l.In+i]
		}
	}
	return &textLinear{wt: u.tensor(label+".wt", wt, l.In, l.Out), b: u.buf(label+".b", l.B), in: l.In, out: l.Out}
}

func (u *textUploader) conv(label string, c *Conv1d) *textConv {
	t := &textConv{w: u.buf(label+".w", c.W), a: ops.Conv1DArgs{InChannels: c.In, OutChannels: c.Out, Kernel: c.Kernel,
		Stride: c.Stride, Padding: c.Padding, Dilation: c.Dilation}}
	if c.B != nil {
		t.b = u.buf(label+".b", c.B)
	}
	return t
}

func (u *textUploader) lstm(label string, m *BiLSTM) *textLSTM {
	dir := func(suffix string, w ref.LSTMWeights) ops.LSTMWeights {
		return ops.LSTMWeights{WIH: u.buf(label+".wih"+suffix, w.WIH), WHH: u.buf(label+".whh"+suffix, w.WHH),
			BIH: u.buf(label+".bih"+suffix, w.BIH), BHH: u.buf(label+".bhh"+suffix, w.BHH)}
	}
	l := &textLSTM{fwd: dir("", m.Fwd), bwd: dir(".rev", m.Bwd), input: m.Input, hidden: m.Hidden}
	if u.err == nil {
		// The grid recurrence where the device runs it (3 µs a step on the
		// H200 against 8 for the streaming one); tried once per size.
		l.grid, u.err = ops.ChooseLSTMGrid(u.g.dev, m.Hidden, true)
	}
	return l
}

func (u *textUploader) adain(label string, n *AdaIN1d) *textAdaIN {
	return &textAdaIN{w: u.buf(label+".w", n.NormW), b: u.buf(label+".b", n.NormB), fc: u.linear(label+".fc", n.FC), ch: n.Channels}
}

func (u *textUploader) resBlk(label string, b *AdainResBlk1d) *textResBlk {
	r := &textResBlk{norm1: u.adain(label+".norm1", b.Norm1), norm2: u.adain(label+".norm2", b.Norm2),
		conv1: u.conv(label+".conv1", b.Conv1), conv2: u.conv(label+".conv2", b.Conv2), in: b.In, out: b.Out}
	if b.Conv1x1 != nil {
		r.conv1x1 = u.conv(label+".conv1x1", b.Conv1x1)
	}
	if b.Pool != nil {
		a := ops.ConvTranspose1DArgs{InChannels: b.Pool.Args.InChannels, OutChannels: b.Pool.Args.OutChannels,
			Kernel: b.Pool.Args.Kernel, Stride: b.Pool.Args.Stride, Padding: b.Pool.Args.Padding,
			OutputPadding: b.Pool.Args.OutputPadding, Groups: b.Pool.Args.Groups}
		r.pool, r.poolW, r.poolB = &a, u.buf(label+".pool.w", b.Pool.W), u.buf(label+".pool.b", b.Pool.B)
	}
	return r
}

// newGPUText uploads the text side's weights.
func newGPUText(g *GPUModel) (*gpuText, error) {
	m := g.m
	c := m.Config
	u := &textUploader{g: g}
	b, L := m.BERT, m.BERT.Layer
	t := &gpuText{g: g, c: c}
	t.bert = textALBERT{
		word:          u.tensor("bert.word", b.WordEmbeddings, c.NToken, b.EmbeddingSize),
		pos:           u.buf("bert.pos", b.PositionEmbeddings),
		tokenType:     u.buf("bert.token_type", b.TokenTypeEmbeddings[:b.EmbeddingSize]),
		embNormW:      u.buf("bert.emb_norm.w", b.EmbedNormW),
		embNormB:      u.buf("bert.emb_norm.b", b.EmbedNormB),
		embedToHidden: u.tokenLinear("bert.embed_to_hidden", b.EmbedToHidden),
		query:         u.tokenLinear("bert.query", L.Query),
		key:           u.tokenLinear("bert.key", L.Key),
		value:         u.tokenLinear("bert.value", L.Value),
		dense:         u.tokenLinear("bert.dense", L.Dense),
		attnNormW:     u.buf("bert.attn_norm.w", L.AttnNormW),
		attnNormB:     u.buf("bert.attn_norm.b", L.AttnNormB),
		ffn:           u.tokenLinear("bert.ffn", L.FFN),
		ffnOut:        u.tokenLinear("bert.ffn_out", L.FFNOut),
		ffnNormW:      u.buf("bert.ffn_norm.w", L.FFNNormW),
		ffnNormB:      u.buf("bert.ffn_norm.b", L.FFNNormB),
		e:             b.EmbeddingSize, h: b.Hidden, heads: b.Heads, layers: b.Layers, ff: L.FFN.Out,
	}
	t.bertEncoder = u.tokenLinear("bert_encoder", m.BERTEncoder)
	p := m.Predictor
	for i, l := range p.TextEncoder.LSTMs {
		t.durEnc = append(t.durEnc, textDurLayer{
			lstm: u.lstm(fmt.Sprintf("dur_enc.%d.lstm", i), l),
			fc:   u.linear(fmt.Sprintf("dur_enc.%d.norm.fc", i), p.TextEncoder.Norms[i].FC),
		})
	}
	t.lstm = u.lstm("dur.lstm", p.LSTM)
	t.durProj = u.tokenLinear("dur.proj", p.DurationProj)
	t.shared = u.lstm("shared", p.Shared)
	for i, blk := range p.F0 {
		t.f0 = append(t.f0, u.resBlk(fmt.Sprintf("F0.%d", i), blk))
	}
	for i, blk := range p.N {
		t.n = append(t.n, u.resBlk(fmt.Sprintf("N.%d", i), blk))
	}
	t.f0Proj = u.conv("F0_proj", p.F0Proj)
	t.nProj = u.conv("N_proj", p.NProj)
	te := m.TextEncoder
	t.encoder.embedding = u.tensor("text_encoder.embedding", te.Embedding, c.NToken, te.Channels)
	for i, blk := range te.CNN {
		t.encoder.cnn = append(t.encoder.cnn, textConvBlock{conv: u.conv(fmt.Sprintf("text_encoder.cnn.%d", i), blk.Conv),
			gamma: u.buf(fmt.Sprintf("text_encoder.cnn.%d.gamma", i), blk.Gamma),
			beta:  u.buf(fmt.Sprintf("text_encoder.cnn.%d.beta", i), blk.Beta)})
	}
	t.encoder.lstm = u.lstm("text_encoder.lstm", te.LSTM)
	if u.err != nil {
		return nil, fmt.Errorf("text side: %w", u.err)
	}
	return t, nil
}

// framesOf is the durations DurationFrames read back for tokens, or an
// error naming the first token whose duration logits held a NaN (the
// kernel's DurationFramesNaN): a weight or an input gone bad, which no
// frame count would render.
func framesOf(frames []uint32, tokens []int) ([]int, error) {
	out := make([]int, len(frames))
	for i, n := range frames {
		if n == ops.DurationFramesNaN {
			return nil, fmt.Errorf("durations: token %d (id %d) has a NaN duration logit", i, tokens[i])
		}
		out[i] = int(n)
	}
	return out, nil
}

// textPass records one call's dispatches, keeping the first error so that
// the forward reads as a list of layers.
type textPass struct {
	g   *GPUModel
	ch  *gpu.Chain
	err error
	// sizes is what each label was first asked for in this pass (buf).
	sizes map[string]int
}

func (p *textPass) fail(err error) {
	if p.err == nil && err != nil {
		p.err = err
	}
}

// buf is the pool's "text."+label buffer of at least floats values. A
// label asked for twice in one pass must not grow: growing releases the
// buffer that earlier dispatches of the same chain bound, so it is an
// error (as the decoder's pass.buf).
func (p *textPass) buf(label string, floats int) *gpu.Buffer {
	if p.err != nil {
		return nil
	}
	if prev, ok := p.sizes[label]; ok && floats > prev {
		p.fail(fmt.Errorf("scratch %q asked for %d floats after %d in one pass", "text."+label, floats, prev))
		return nil
	} else if !ok {
		if p.sizes == nil {
			p.sizes = map[string]int{}
		}
		p.sizes[label] = floats
	}
	b, err := p.g.scratch("text."+label, floats)
	p.fail(err)
	return b
}

func (p *textPass) do(err error) { p.fail(err) }

// linear is y = x Wᵀ + b over rows rows.
func (p *textPass) linear(l *textLinear, x, y *gpu.Buffer, rows int) {
	if p.err != nil {
		return
	}
	if l.wt != nil {
		// X·Wᵀ as X·(Wᵀ): the input-gradient kernel computes dY·W for a
		// stored W, here the transposed weight, with its blocked tiles.
		p.do(ops.MatMulBackwardInput(p.ch, l.wt, x, y, rows))
	} else {
		p.do(ops.MatMul(p.ch, l.w, x, y, rows))
	}
	p.do(ops.AddBias(p.ch, y, l.b, rows, l.out))
}

func (p *textPass) conv(c *textConv, x, y *gpu.Buffer, length int) {
	if p.err != nil {
		return
	}
	a := c.a
	a.Length = length
	// As the decoder's pass.conv: the text encoder's and the F0/N blocks'
	// stride-1 convs (512 channels, k3/k5, at the token or frame rate) are
	// implicit GEMMs; the strided ones run one output per invocation.
	if ops.Conv1DTiledFits(a) == nil {
		p.do(ops.Conv1DTiled(p.ch, x, c.w, c.b, y, a))
	} else {
		p.do(ops.Conv1D(p.ch, x, c.w, c.b, y, a))
	}
}

// lstm runs the BiLSTM on x [input][length] into y [2*hidden][length];
// gates is the label of its scratch.
func (p *textPass) lstm(m *textLSTM, x, y *gpu.Buffer, length int, gates string) {
	a := ops.LSTMArgs{Input: m.input, Hidden: m.hidden, Length: length, Grid: m.grid}
	s := p.buf(gates, a.ScratchFloats(true))
	if p.err != nil {
		return
	}
	bwd := m.bwd
	p.do(ops.LSTM(p.ch, x, m.fwd, &bwd, s, y, a))
}

// style is a Linear of the prosody vector: an AdaLayerNorm's or AdaIN's
// [gamma | beta], in its own buffer.
func (p *textPass) style(label string, fc *textLinear, prosody *gpu.Buffer) *gpu.Buffer {
	gb := p.buf(label, fc.out)
	p.linear(fc, prosody, gb, 1)
	return gb
}

// upload writes v to the pool's label buffer (queued before the chain's
// submit).
func (p *textPass) upload(label string, v []byte) *gpu.Buffer {
	b := p.buf(label, len(v)/4)
	if p.err == nil {
		p.fail(b.Write(0, v))
	}
	return b
}

// checkTokens is the part of Model.checkInput that the text side's kernels
// rely on: ids inside the embedding tables, no more tokens than positions.
func (t *gpuText) checkTokens(tokens []int) error {
	c := t.c
	if len(tokens) == 0 {
		return errors.New("no tokens")
	}
	if len(tokens) > c.PLBert.MaxPositionEmbeddings {
		return fmt.Errorf("%d tokens: the model's context is %d (%d phonemes and the pads)", len(tokens), c.PLBert.MaxPositionEmbeddings, c.MaxPhonemes())
	}
	for i, id := range tokens {
		if id < 0 || id >= c.NToken {
			return fmt.Errorf("token %d is %d, outside [0, n_token=%d)", i, id, c.NToken)
		}
	}
	return nil
}

// durations runs PL-BERT, the duration encoder and the duration head, and
// the text encoder, in one submit, and reads back each token's frames:
// sigmoid(duration_proj(lstm(d))) summed, / speed, rounded half to even, at
// least 1. It keeps d and t_en on the device for frames.
func (t *gpuText) durations(tokens []int, prosody []float32, speed float64) ([]int, error) {
	c := t.c
	t.tokens = 0 // frames refuses d and t_en until this call succeeds
	if err := t.checkTokens(tokens); err != nil {
		return nil, err
	}
	if len(prosody) != c.StyleDim {
		return nil, fmt.Errorf("prosody style has %d values, want %d", len(prosody), c.StyleDim)
	}
	if !(speed > 0) || speed > 1e6 {
		return nil, fmt.Errorf("speed %g must be positive and at most 1e6", speed)
	}
	ch, err := t.g.dev.NewChain("kokoro.durations")
	if err != nil {
		return nil, err
	}
	defer ch.Discard()
	rb, d, tEn, err := t.record(ch, tokens, prosody, speed)
	if err != nil {
		return nil, err
	}
	if err := ch.Submit(); err != nil {
		return nil, err
	}
	raw, err := rb.Bytes()
	if err != nil {
		return nil, err
	}
	out, err := framesOf(gpu.U32From(raw), tokens)
	if err != nil {
		return nil, err
	}
	t.d, t.tEn, t.tokens = d, tEn, len(tokens)
	return out, nil
}

// record appends durations' work to ch, for tokens and prosody that
// durations checked, and a readback of each token's frames; it returns
// that readback, d and t_en (which stay on the device for frames).
func (t *gpuText) record(ch *gpu.Chain, tokens []int, prosody []float32, speed float64) (*gpu.Readback, *gpu.Buffer, *gpu.Buffer, error) {
	c := t.c
	T, H, S := len(tokens), c.HiddenDim, c.StyleDim
	ids := make([]uint32, T)
	for i, id := range tokens {
		ids[i] = uint32(id)
	}
	p := &textPass{g: t.g, ch: ch}
	idBuf := p.upload("tokens", gpu.U32Bytes(ids))
	sty := p.upload("prosody", gpu.F32Bytes(prosody))

	// PL-BERT over the phonemes, projected to hidden_dim: d_en [T][H].
	bert := t.bert.forward(p, idBuf, T)
	dEn := p.buf("d_en", T*H)
	p.linear(t.bertEncoder, bert, dEn, T)

	// Duration encoder: d = [d_en transposed; style], then per layer the
	// BiLSTM and the AdaLayerNorm (LayerNorm over channels, (1+gamma) x +
	// beta) written back over d's first H channels, the style kept below.
	d := p.buf("d", (H+S)*T)
	lstmOut := p.buf("dur_enc.lstm", H*T)
	if p.err == nil {
		p.do(ops.Transpose(ch, dEn, d, T, H))
		p.do(ops.BroadcastColumns(ch, sty, d, S, T, H*T))
	}
	for i, l := range t.durEnc {
		p.lstm(l.lstm, d, lstmOut, T, "gates.T")
		gb := p.style(fmt.Sprintf("dur_enc.%d.gb", i), l.fc, sty)
		if p.err == nil {
			p.do(ops.ChannelLayerNorm(ch, lstmOut, nil, nil, gb, d, ops.AudioNormArgs{Channels: H, Length: T, Eps: 1e-5}))
		}
	}

	// Durations in frames: sigmoid(duration_proj(lstm(d))) summed, / speed, rounded.
	x := p.buf("dur.lstm", H*T)
	p.lstm(t.lstm, d, x, T, "gates.T")
	xt := p.buf("dur.lstm.rows", T*H)
	logits := p.buf("dur.logits", T*c.MaxDur)
	frames := p.buf("dur.frames", T)
	if p.err == nil {
		p.do(ops.Transpose(ch, x, xt, H, T))
	}
	p.linear(t.durProj, xt, logits, T)
	if p.err == nil {
		p.do(ops.DurationFrames(ch, logits, frames, T, c.MaxDur, float32(speed)))
	}

	// Text encoder, which needs no durations: t_en [H][T].
	tEn := t.encoder.forward(p, idBuf, T, H)
	if p.err != nil {
		return nil, nil, nil, p.err
	}
	rb, err := ch.ReadBack(frames, 0, uint64(T)*4)
	return rb, d, tEn, err
}

// forward is ALBERT.forward: the last hidden state [T][h] of the token ids
// (one unpadded utterance, so attention sees every token).
func (m *textALBERT) forward(p *textPass, ids *gpu.Buffer, T int) *gpu.Buffer {
	ch, E, H := p.ch, m.e, m.h
	x := p.buf("bert.emb", T*E)
	h := p.buf("bert.h", T*H)
	q, k, v := p.buf("bert.q", T*H), p.buf("bert.k", T*H), p.buf("bert.v", T*H)
	ctx, a, tmp := p.buf("bert.ctx", T*H), p.buf("bert.a", T*H), p.buf("bert.tmp", T*H)
	f := p.buf("bert.ffn", T*m.ff)
	att := ops.AttentionArgs{HeadDim: H / m.heads, Heads: m.heads, KVHeads: m.heads, Tokens: T, KVLen: T, Bidirectional: true}
	attScratch := p.buf("bert.attn_scratch", int(ops.AttentionScratchBytes(att)/4))
	if p.err != nil {
		return nil
	}
	// Embeddings: word + position + token type 0, LayerNorm. ops.LayerNorm
	// is torch's (biased variance, eps inside the square root), with
	// ALBERT's eps 1e-12, a normal f32: the same as ref.LayerNorm.
	p.do(ops.Embed(ch, m.word, ids, T, x))
	p.do(ops.Add(ch, x, m.pos, x, T*E))
	p.do(ops.AddBias(ch, x, m.tokenType, T, E))
	p.do(ops.LayerNorm(ch, x, m.embNormW, m.embNormB, x, ops.NormArgs{Rows: T, Dim: E, Eps: albertNormEps}))
	p.linear(m.embedToHidden, x, h, T)

	// The one shared layer, layers times.
	norm := ops.NormArgs{Rows: T, Dim: H, Eps: albertNormEps}
	for range m.layers {
		if p.err != nil {
			return nil
		}
		// a = LayerNorm(h + dense(softmax(q kᵀ / sqrt(dh)) v))
		p.linear(m.query, h, q, T)
		p.linear(m.key, h, k, T)
		p.linear(m.value, h, v, T)
		p.do(ops.Attention(ch, q, k, v, attScratch, ctx, att))
		p.linear(m.dense, ctx, tmp, T)
		p.do(ops.Add(ch, h, tmp, a, T*H))
		p.do(ops.LayerNorm(ch, a, m.attnNormW, m.attnNormB, a, norm))
		// h = LayerNorm(a + ffn_output(gelu_tanh(ffn(a))))
		p.linear(m.ffn, a, f, T)
		p.do(ops.GELU(ch, f, f, T*m.ff))
		p.linear(m.ffnOut, f, tmp, T)
		p.do(ops.Add(ch, a, tmp, h, T*H))
		p.do(ops.LayerNorm(ch, h, m.ffnNormW, m.ffnNormB, h, norm))
	}
	return h
}

// forward is TextEncoder.forward: embedding, then per block conv →
// LayerNorm over channels → LeakyReLU 0.2, then the BiLSTM: [C][T].
func (e *textEncoder) forward(p *textPass, ids *gpu.Buffer, T, C int) *gpu.Buffer {
	ch := p.ch
	rows, x, y := p.buf("te.emb", T*C), p.buf("te.x", C*T), p.buf("te.y", C*T)
	out := p.buf("t_en", C*T)
	if p.err != nil {
		return nil
	}
	p.do(ops.Embed(ch, e.embedding, ids, T, rows))
	p.do(ops.Transpose(ch, rows, x, T, C))
	for _, b := range e.cnn {
		p.conv(b.conv, x, y, T)
		if p.err == nil {
			p.do(ops.ChannelLayerNorm(ch, y, b.gamma, b.beta, nil, y, ops.AudioNormArgs{Channels: C, Length: T, Eps: 1e-5}))
			p.do(ops.LeakyReLU(ch, y, x, C*T, 0.2))
		}
	}
	p.lstm(e.lstm, x, out, T, "gates.T")
	return out
}

// frames appends to ch the alignment (each token's column of d and t_en
// repeated over its frames), F0 and energy at 2F, and the content asr:
// asr [HiddenDim][F], f0 and n [2F], in the CPU trace's layouts. It reads
// the d and t_en the last durations call left, for the same tokens. It
// writes the frame index and the style to their buffers when called (queue
// writes, which land before ch is submitted), so call it once per chain.
func (t *gpuText) frames(ch *gpu.Chain, durations []int, prosody []float32) (asr, f0, n *gpu.Buffer, err error) {
	c := t.c
	T, H, S := t.tokens, c.HiddenDim, c.StyleDim
	if T == 0 {
		return nil, nil, nil, errors.New("frames: no durations call left d and t_en on the device")
	}
	if len(durations) != T {
		return nil, nil, nil, fmt.Errorf("frames: %d durations for the last durations call's %d tokens", len(durations), T)
	}
	if len(prosody) != S {
		return nil, nil, nil, fmt.Errorf("frames: prosody style has %d values, want %d", len(prosody), S)
	}
	F := 0
	for i, d := range durations {
		if d < 0 || d > ops.DurationFramesMax {
			return nil, nil, nil, fmt.Errorf("frames: token %d lasts %d frames, outside [0, %d]", i, d, ops.DurationFramesMax)
		}
		F += d
	}
	if F == 0 || F > math.MaxUint32/(2*(H+S)) {
		return nil, nil, nil, fmt.Errorf("frames: %d frames in all: want at least 1 and at most %d", F, math.MaxUint32/(2*(H+S)))
	}
	// The alignment as an index: frame f reads token idx[f]'s column.
	idx := make([]uint32, 0, F)
	for tok, d := range durations {
		for range d {
			idx = append(idx, uint32(tok))
		}
	}

	p := &textPass{g: t.g, ch: ch}
	idxBuf := p.upload("align.idx", gpu.U32Bytes(idx))
	sty := p.upload("frames.prosody", gpu.F32Bytes(prosody))

	// Alignment: d spread over the frames, then F0 and energy at 2F.
	en, shared := p.buf("en", (H+S)*F), p.buf("shared", H*F)
	if p.err == nil {
		p.do(ops.GatherColumns(ch, t.d, idxBuf, en, H+S, T, F))
	}
	p.lstm(t.shared, en, shared, F, "gates.F")
	f0 = p.curve("F0", t.f0, t.f0Proj, shared, F, sty)
	n = p.curve("N", t.n, t.nProj, shared, F, sty)

	// Text encoder's content spread the same way: asr.
	asr = p.buf("asr", H*F)
	if p.err == nil {
		p.do(ops.GatherColumns(ch, t.tEn, idxBuf, asr, H, T, F))
	}
	if p.err != nil {
		return nil, nil, nil, p.err
	}
	return asr, f0, n, nil
}

// curve is one branch of ProsodyPredictor.f0n: the AdainResBlk1d blocks
// from the shared LSTM's output [H][F], then the 1×1 projection to one
// channel at 2F. The blocks ping-pong between two buffers and share their
// scratch, all sized for H channels at 2F, the most any block holds.
func (p *textPass) curve(name string, blocks []*textResBlk, proj *textConv, shared *gpu.Buffer, F int, sty *gpu.Buffer) *gpu.Buffer {
	H := p.g.m.Config.HiddenDim
	size := H * 2 * F
	io := [2]*gpu.Buffer{p.buf("blk.a", size), p.buf("blk.b", size)}
	var s resBlkScratch
	for i, l := range []string{"r", "rp", "c1", "sc", "up"} {
		s[i] = p.buf("blk."+l, size)
	}
	x, T := shared, F
	for i, b := range blocks {
		y := io[i%2]
		T = p.resBlk(fmt.Sprintf("%s.%d", name, i), b, x, y, T, sty, s)
		x = y
	}
	out := p.buf(name, T)
	p.conv(proj, x, out, T)
	return out
}

// resBlkScratch are a block's intermediates: the residual branch after
// norm1, after the pool, after conv1 (norm2 in place), the shortcut's 1×1
// conv and its upsampling.
type resBlkScratch [5]*gpu.Buffer

// resBlk is AdainResBlk1d.apply on x [in][T] into y [out][T'], returning
// T' (2T when it upsamples).
func (p *textPass) resBlk(label string, b *textResBlk, x, y *gpu.Buffer, T int, sty *gpu.Buffer, s resBlkScratch) int {
	g1 := p.style(label+".norm1.gb", b.norm1.fc, sty)
	g2 := p.style(label+".norm2.gb", b.norm2.fc, sty)
	if p.err != nil {
		return T
	}
	ch := p.ch
	r, rp, c1, sc, up := s[0], s[1], s[2], s[3], s[4]

	// Residual: AdaIN → LeakyReLU 0.2 → (depthwise transposed-conv
	// upsampling) → conv1 → AdaIN → LeakyReLU → conv2.
	p.do(ops.AdaIN1D(ch, x, g1, b.norm1.w, b.norm1.b, r, ops.AudioNormArgs{Channels: b.in, Length: T, Eps: instanceNormEps}))
	p.do(ops.LeakyReLU(ch, r, r, b.in*T, 0.2))
	t := T
	if b.pool != nil {
		a := *b.pool
		a.Length = T
		p.do(ops.ConvTranspose1D(ch, r, b.poolW, b.poolB, rp, a))
		r, t = rp, a.OutLength()
	}
	p.conv(b.conv1, r, c1, t)
	p.do(ops.AdaIN1D(ch, c1, g2, b.norm2.w, b.norm2.b, c1, ops.AudioNormArgs{Channels: b.out, Length: t, Eps: instanceNormEps}))
	p.do(ops.LeakyReLU(ch, c1, c1, b.out*t, 0.2))
	p.conv(b.conv2, c1, y, t)

	// Shortcut: nearest upsampling, then the 1×1 conv when the width
	// changes. The 1×1 conv runs first here, at T steps rather than 2T: it
	// acts on each step alone, so the values are the same.
	short := x
	if b.conv1x1 != nil {
		p.conv(b.conv1x1, x, sc, T)
		short = sc
	}
	if b.pool != nil {
		if p.err == nil {
			p.do(ops.UpsampleNearest1D(ch, short, up, b.out, T, 2))
		}
		short = up
	}
	// (residual + shortcut) / sqrt 2, in y.
	if p.err == nil {
		p.do(ops.Add(ch, y, short, y, b.out*t))
		p.do(ops.Scale(ch, y, y, b.out*t, invSqrt2))
	}
	return t
}
