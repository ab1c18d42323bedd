package kokoro

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// ProsodyPredictor is StyleTTS2's prosody predictor: from PL-BERT's
// projected output and the prosody half of the style it predicts each
// phoneme's duration in frames, then, over the frames, the pitch (F0, Hz)
// and energy (N) curves at twice the frame rate.
type ProsodyPredictor struct {
	TextEncoder  *DurationEncoder
	LSTM         *BiLSTM
	DurationProj *Linear // to max_dur logits, whose sigmoids sum to the duration
	Shared       *BiLSTM
	F0, N        []*AdainResBlk1d
	F0Proj       *Conv1d
	NProj        *Conv1d
}

// DurationEncoder alternates bidirectional LSTMs and AdaLayerNorms,
// appending the style to every layer's input and to its output.
type DurationEncoder struct {
	LSTMs []*BiLSTM
	Norms []*AdaLayerNorm
}

// AdaLayerNorm is LayerNorm over channels without affine weights, then
// (1 + gamma) x + beta with [gamma | beta] = FC(style).
type AdaLayerNorm struct {
	FC       *Linear
	Channels int
}

func loadProsodyPredictor(l *loader, c *Config) *ProsodyPredictor {
	d, s, p := c.HiddenDim, c.StyleDim, "predictor."
	enc := &DurationEncoder{}
	for i := range c.NLayer {
		// The ModuleList interleaves them: lstms.0, lstms.1 (norm), lstms.2, …
		enc.LSTMs = append(enc.LSTMs, loadBiLSTM(l, fmt.Sprintf("%stext_encoder.lstms.%d", p, 2*i), d+s, d/2))
		enc.Norms = append(enc.Norms, &AdaLayerNorm{FC: loadLinear(l, fmt.Sprintf("%stext_encoder.lstms.%d.fc", p, 2*i+1), s, 2*d), Channels: d})
	}
	m := &ProsodyPredictor{
		TextEncoder:  enc,
		LSTM:         loadBiLSTM(l, p+"lstm", d+s, d/2),
		DurationProj: loadLinear(l, p+"duration_proj.linear_layer", d, c.MaxDur),
		Shared:       loadBiLSTM(l, p+"shared", d+s, d/2),
		F0Proj:       loadConv1d(l, p+"F0_proj", d/2, 1, 1, 1, 0, 1, true),
		NProj:        loadConv1d(l, p+"N_proj", d/2, 1, 1, 1, 0, 1, true),
	}
	for _, branch := range []struct {
		name   string
		blocks *[]*AdainResBlk1d
	}{{"F0", &m.F0}, {"N", &m.N}} {
		*branch.blocks = []*AdainResBlk1d{
			loadAdainResBlk1d(l, fmt.Sprintf("%s%s.0", p, branch.name), d, d, s, false),
			loadAdainResBlk1d(l, fmt.Sprintf("%s%s.1", p, branch.name), d, d/2, s, true),
			loadAdainResBlk1d(l, fmt.Sprintf("%s%s.2", p, branch.name), d/2, d/2, s, false),
		}
	}
	return m
}

// forward runs the duration encoder on x ([HiddenDim][T], PL-BERT
// projected) and returns d, [HiddenDim+StyleDim][T]: its last norm's
// output with the style appended, what both the duration LSTM and the
// frame-level features read.
func (e *DurationEncoder) forward(x []float32, T int, style []float32) []float32 {
	sty := broadcast(style, T)
	x = concatChannels(x, sty)
	for i, lstm := range e.LSTMs {
		x = lstm.apply(x, T)
		x = e.Norms[i].apply(x, T, style)
		x = concatChannels(x, sty)
	}
	return x
}

func (n *AdaLayerNorm) apply(x []float32, length int, style []float32) []float32 {
	gb := n.FC.rows(style, 1)
	return ref.ChannelLayerNorm(x, nil, nil, gb, ref.AudioNormArgs{Channels: n.Channels, Length: length, Eps: 1e-5})
}

// durations turns the duration encoder's output d ([C][T]) into frames per
// token: sigmoid(duration_proj(lstm(d))) summed over the max_dur logits,
// divided by speed, rounded half to even (torch.round) and at least 1.
// It also returns the LSTM's output, [HiddenDim][T], for tracing.
func (m *ProsodyPredictor) durations(d []float32, T int, speed float64) ([]int, []float32) {
	x := m.LSTM.apply(d, T)
	logits := m.DurationProj.rows(transpose(x, m.DurationProj.In, T), T)
	out := make([]int, T)
	for t := range T {
		// torch sums the sigmoids in f32; float64 here differs from it by
		// far less than the distance to a rounding boundary that matters.
		sum := 0.0
		for _, v := range logits[t*m.DurationProj.Out:][:m.DurationProj.Out] {
			sum += 1 / (1 + math.Exp(-float64(v)))
		}
		out[t] = max(1, int(math.RoundToEven(sum/speed)))
	}
	return out, x
}

// f0n predicts the F0 and energy curves, 2F values each, from the
// duration encoder's output expanded to F frames (en, [C][F]). It also
// returns the shared LSTM's output for tracing.
func (m *ProsodyPredictor) f0n(en []float32, F int, style []float32) (f0, n, shared []float32) {
	shared = m.Shared.apply(en, F)
	curve := func(blocks []*AdainResBlk1d, proj *Conv1d) []float32 {
		x, t := shared, F
		for _, b := range blocks {
			x, t = b.apply(x, t, style)
		}
		return proj.apply(x, t)
	}
	return curve(m.F0, m.F0Proj), curve(m.N, m.NProj), shared
}

// broadcast repeats a vector along time: [len(v)][T].
func broadcast(v []float32, T int) []float32 {
	out := make([]float32, len(v)*T)
	for c, x := range v {
		for t := range T {
			out[c*T+t] = x
		}
	}
	return out
}

// expand is the alignment product x @ pred_aln_trg: token t's column of x
// ([C][T]) repeated durations[t] times, [C][sum(durations)].
func expand(x []float32, C int, durations []int) []float32 {
	T, F := len(durations), 0
	for _, d := range durations {
		F += d
	}
	out := make([]float32, C*F)
	for c := range C {
		f := 0
		for t, d := range durations {
			for range d {
				out[c*F+f] = x[c*T+t]
				f++
			}
		}
	}
	return out
}
