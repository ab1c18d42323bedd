package kokoro

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/parallel"
	"github.com/hearthstudio/hearth/pth"
)

// StyleTTS2's style encoders make a voice from a reference recording
// (models.py, and compute_style in its inference notebooks):
//
//	ref_s = cat(style_encoder(mel), predictor_encoder(mel))
//
// two StyleEncoder modules of the same shape, the first giving the 128
// acoustic (timbre) values the decoder takes, the second the 128 prosodic
// ones the prosody predictor takes: Kokoro's 256-value style row. Each is
//
//	shared:   Conv2d(1, d, 3, 1, 1)
//	          4 × ResBlk(d, min(2d, max_conv_dim), downsample='half')
//	          LeakyReLU(0.2), Conv2d(c, c, 5, 1, 0), AdaptiveAvgPool2d(1), LeakyReLU(0.2)
//	unshared: Linear(c, style_dim)
//
// over the log-mel as a one-channel image [1][80][frames]. A ResBlk is
//
//	(shortcut(x) + residual(x)) / √2
//	shortcut = DownSample(conv1x1(x))   conv1x1 only when the width changes
//	residual = conv2(lrelu(LearnedDownSample(conv1(lrelu(x)))))
//
// with conv1, conv2 3×3 (padding 1), LearnedDownSample a depthwise 3×3
// convolution of stride 2 and padding 1, and DownSample F.avg_pool2d(x,
// 2) after repeating the last column of an odd width. Every convolution
// is spectral-normed (torch.nn.utils.spectral_norm); the Linear is not.
// The released LibriTTS model has d = 64, max_conv_dim = 512 and
// style_dim = 128; the loader takes every width from the tensor shapes.

const (
	styleSlope  = 0.2 // every LeakyReLU of the encoder
	styleBlocks = 4
	styleHead   = 5 // the last convolution's kernel, without padding

	// MinStyleFrames is the shortest mel the encoders take. Each block
	// halves the height and takes the width w to ceil(w/2) (the strided
	// depthwise convolution gives floor((w+2-3)/2)+1, the shortcut's pool
	// of the width padded to even the same), so four blocks leave 80/16 = 5
	// rows and ceil(frames/16) columns, and the 5×5 head needs 5 of each:
	// frames ≥ 65.
	MinStyleFrames = (styleHead-1)*(1<<styleBlocks) + 1
	// MinStyleSamples is MinStyleFrames of 24 kHz audio, 0.8 s
	// (MelFrames(n) = 1 + n/300).
	MinStyleSamples = (MinStyleFrames - 1) * melHop
	// MaxStyleFrames bounds one reference to 30 s: the GPU forward's
	// largest activation, the first block's widened shortcut of
	// 128×80×(frames+1) floats, is then 98 MB, under lavapipe's 128 MiB
	// binding limit. PrepareReference keeps a longer recording's first 30
	// s; the encoders average over time, so more adds little.
	MaxStyleFrames = 1 + 30*MelRate/melHop
)

// StyleEncoder is StyleTTS2's pair of style encoders, loaded by
// LoadStyleEncoder.
type StyleEncoder struct {
	Path     string
	Acoustic *StyleNet // style_encoder: the first 128 values of a style row
	Prosodic *StyleNet // predictor_encoder: the last 128
}

// StyleNet is one StyleEncoder module, spectral norm folded.
type StyleNet struct {
	Name   string
	Stem   *Conv2d // shared.0
	Blocks []*StyleBlock
	Head   *Conv2d // shared.6, 5×5 without padding
	Out    *Linear // unshared
}

// StyleBlock is a ResBlk with downsample='half'.
type StyleBlock struct {
	In, Out  int
	Conv1    *Conv2d // In → In, 3×3
	Down     *Conv2d // downsample_res.conv: depthwise 3×3, stride 2
	Conv2    *Conv2d // In → Out, 3×3
	Shortcut *Conv2d // conv1x1, In → Out without bias; nil when In == Out
}

// Conv2d is nn.Conv2d with square kernels, strides and zero padding:
// weight [Out][In/Groups][Kernel][Kernel], bias [Out] or nil.
type Conv2d struct {
	W, B                                     []float32
	In, Out, Kernel, Stride, Padding, Groups int
}

func (c *Conv2d) args(h, w int) ref.Conv2DArgs {
	return ref.Conv2DArgs{InChannels: c.In, OutChannels: c.Out, Height: h, Width: w,
		KernelH: c.Kernel, KernelW: c.Kernel, StrideH: c.Stride, StrideW: c.Stride,
		PadH: c.Padding, PadW: c.Padding, Groups: c.Groups}
}

func (c *Conv2d) opsArgs(h, w int) ops.Conv2DArgs {
	a := c.args(h, w)
	return ops.Conv2DArgs{InChannels: a.InChannels, OutChannels: a.OutChannels, Height: h, Width: w,
		KernelH: a.KernelH, KernelW: a.KernelW, StrideH: a.StrideH, StrideW: a.StrideW,
		PadH: a.PadH, PadW: a.PadW, Groups: a.Groups}
}

// apply is ref.Conv2D over x [In][h][w], giving [Out][ho][wo]: the same
// products summed in float64 in the same order (bias, then input channel,
// kernel row, kernel column) and rounded once to f32, but computed a
// kernel tap at a time over a whole output plane, so that the inner loop
// runs along a row of contiguous memory, and in parallel over output
// channels. The released encoders are 17 G multiply-adds for 5 s of
// audio: ref.Conv2D's loop, which tests each tap's bounds per output, took
// 128 s for them on two busy cores, this one 16 s.
// TestConv2dMatchesReference holds it to ref.Conv2D.
func (c *Conv2d) apply(x []float32, h, w int) ([]float32, int, int) {
	a := c.args(h, w)
	ho, wo := a.OutSize()
	y := make([]float32, c.Out*ho*wo)
	inG, outG := c.In/c.Groups, c.Out/c.Groups
	k, s, p := c.Kernel, c.Stride, c.Padding
	parallel.For(c.Out, 1, func(lo, hi int) {
		acc := make([]float64, ho*wo)
		for co := lo; co < hi; co++ {
			b := 0.0
			if c.B != nil {
				b = float64(c.B[co])
			}
			for i := range acc {
				acc[i] = b
			}
			g := co / outG
			for ci := range inG {
				plane := x[(g*inG+ci)*h*w : (g*inG+ci+1)*h*w]
				kern := c.W[(co*inG+ci)*k*k:]
				for ky := range k {
					for kx := range k {
						wv := float64(kern[ky*k+kx])
						// The outputs whose tap lands inside the row:
						// 0 <= ox*s + kx - p < w.
						oxLo := max(0, (p-kx+s-1)/s)
						oxHi := min(wo-1, floorDiv(w-1+p-kx, s))
						if oxLo > oxHi {
							continue
						}
						for oy := range ho {
							yy := oy*s + ky - p
							if yy < 0 || yy >= h {
								continue
							}
							row := plane[yy*w:]
							out := acc[oy*wo+oxLo : oy*wo+oxHi+1]
							if s == 1 { // contiguous: no index arithmetic or bounds checks inside
								in := row[oxLo+kx-p : oxHi+kx-p+1]
								for i, v := range in {
									out[i] += float64(v) * wv
								}
								continue
							}
							for i := range out {
								out[i] += float64(row[(oxLo+i)*s+kx-p]) * wv
							}
						}
					}
				}
			}
			dst := y[co*ho*wo:]
			for i, v := range acc {
				dst[i] = float32(v)
			}
		}
	})
	return y, ho, wo
}

// floorDiv is a/b rounded toward −∞, b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// The checkpoint.

// styleModules are the two encoders' names in StyleTTS2's checkpoint.
var styleModules = []string{"style_encoder", "predictor_encoder"}

// LoadStyleEncoder reads both style encoders from a StyleTTS2 checkpoint:
// a torch.save file as train_second.py writes it (epochs_2nd_00020.pth
// of StyleTTS2-LibriTTS: {'net': {'style_encoder': state_dict,
// 'predictor_encoder': state_dict, …}, 'optimizer': …, 'epoch': …}, keys
// under DataParallel's 'module.' prefix; only the two encoders' tensors
// are read), a bare {'style_encoder': …, 'predictor_encoder': …}, or a
// safetensors file of "style_encoder.…" and "predictor_encoder.…" names
// (a "net." before them and a "module." after them are dropped).
// Spectral norm is folded at load (foldSpectralNorm). Every width comes
// from the tensor shapes, which are checked against each other.
//
// Kokoro-82M's own checkpoint holds no style encoder (its voices were
// made with encoders that were not released), and the StyleTTS2-LibriTTS
// encoders were trained with another decoder: their styles are
// StyleTTS2's, which Kokoro's decoder was not trained on. A voice made
// with them is a starting point to blend with a stock voice, not a clone.
func LoadStyleEncoder(path string) (*StyleEncoder, error) {
	tensors, err := readStyleCheckpoint(path)
	if err != nil {
		return nil, fmt.Errorf("kokoro: style encoder %s: %w", path, err)
	}
	return NewStyleEncoder(path, tensors)
}

// NewStyleEncoder builds the encoders from tensors named as the
// checkpoint names them ("style_encoder.shared.0.weight_orig", …,
// without 'module.'), spectral-norm parts included; name stands for the
// file in errors. Tests use it for weights they generate.
func NewStyleEncoder(name string, tensors map[string]*Tensor) (*StyleEncoder, error) {
	if err := foldSpectralNorm(tensors); err != nil {
		return nil, fmt.Errorf("kokoro: style encoder %s: %w", name, err)
	}
	l := newLoader(&Weights{Path: name, tensors: tensors})
	e := &StyleEncoder{Path: name}
	var err error
	if e.Acoustic, err = loadStyleNet(l, styleModules[0]); err != nil {
		return nil, fmt.Errorf("kokoro: style encoder %s: %w", name, err)
	}
	if e.Prosodic, err = loadStyleNet(l, styleModules[1]); err != nil {
		return nil, fmt.Errorf("kokoro: style encoder %s: %w", name, err)
	}
	if extra := l.unused(); len(extra) > 0 {
		if len(extra) > 5 {
			extra = append(extra[:5], "…")
		}
		return nil, fmt.Errorf("kokoro: style encoder %s: tensors no layer takes: %s (not StyleTTS2's StyleEncoder?)", name, strings.Join(extra, ", "))
	}
	return e, nil
}

// readStyleCheckpoint returns the two encoders' tensors by full name.
func readStyleCheckpoint(path string) (map[string]*Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if pth.IsZip(f) {
		return readStylePTH(f, info.Size())
	}
	all, err := readSafetensors(path)
	if err != nil {
		return nil, err
	}
	out := map[string]*Tensor{}
	for name, t := range all {
		name = strings.TrimPrefix(name, "net.")
		mod, rest, _ := strings.Cut(name, ".")
		if !slices.Contains(styleModules, mod) {
			continue
		}
		full := mod + "." + strings.TrimPrefix(rest, "module.")
		if _, dup := out[full]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", full)
		}
		t.Name = full
		out[full] = t
	}
	if err := haveStyleModules(out, "the safetensors file", keysOf(all)); err != nil {
		return nil, err
	}
	return out, nil
}

// readStylePTH finds net.style_encoder and net.predictor_encoder in a
// torch.save archive and reads only their tensors (the rest of a
// StyleTTS2 checkpoint, 700 MB with the optimizer, is never read).
func readStylePTH(f *os.File, size int64) (map[string]*Tensor, error) {
	obj, err := pth.Load(f, size)
	if err != nil {
		return nil, err
	}
	top, err := pth.DictItems(obj)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint is %T, want a dict", obj)
	}
	modules := top
	for _, it := range top {
		if k, _ := it.Key.(string); k == "net" {
			if modules, err = pth.DictItems(it.Value); err != nil {
				return nil, fmt.Errorf("net is %T, want a dict of state dicts", it.Value)
			}
		}
	}
	out := map[string]*Tensor{}
	var have []string
	for _, m := range modules {
		mod, ok := m.Key.(string)
		if !ok {
			continue
		}
		have = append(have, mod)
		if !slices.Contains(styleModules, mod) {
			continue
		}
		if err := pth.AddStateDict(out, mod, m.Value); err != nil {
			return nil, err
		}
	}
	if err := haveStyleModules(out, "the checkpoint", have); err != nil {
		return nil, err
	}
	return out, nil
}

func keysOf(m map[string]*Tensor) []string {
	seen := map[string]bool{}
	var out []string
	for n := range m {
		mod, _, _ := strings.Cut(strings.TrimPrefix(n, "net."), ".")
		if !seen[mod] {
			seen[mod] = true
			out = append(out, mod)
		}
	}
	return out
}

// haveStyleModules says what a checkpoint without the encoders is.
func haveStyleModules(ts map[string]*Tensor, what string, have []string) error {
	var missing []string
	for _, m := range styleModules {
		found := false
		for n := range ts {
			if strings.HasPrefix(n, m+".") {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(have)
	hint := ""
	if slices.Contains(have, "decoder") && slices.Contains(have, "bert") {
		hint = "; Kokoro's own checkpoint has no style encoders: use a StyleTTS2 one, such as StyleTTS2-LibriTTS's epochs_2nd_00020.pth"
	}
	if len(have) > 8 {
		have = append(have[:8], "…")
	}
	return fmt.Errorf("%s has no %s (it holds %s): not a StyleTTS2 checkpoint%s", what, strings.Join(missing, " or "), strings.Join(have, ", "), hint)
}

// foldSpectralNorm replaces each spectral-normed weight's parts by the
// weight torch uses in eval mode, W/σ with σ = uᵀ·W·v over W viewed as
// [out][in·kh·kw] and the stored u and v (SpectralNorm.compute_weight with
// do_power_iteration=False: power iteration runs only in training). The
// parts are name.weight_orig, name.weight_u, name.weight_v of
// torch.nn.utils.spectral_norm (StyleTTS2's), or
// name.parametrizations.weight.original / .0._u / .0._v of
// torch.nn.utils.parametrizations.spectral_norm, whose eval-mode σ is the
// same vdot(u, W v).
func foldSpectralNorm(ts map[string]*Tensor) error {
	type parts struct{ w, u, v string }
	found := map[string]parts{}
	for name := range ts {
		switch {
		case strings.HasSuffix(name, ".weight_orig"):
			base := strings.TrimSuffix(name, "_orig")
			found[base] = parts{name, base + "_u", base + "_v"}
		case strings.HasSuffix(name, ".parametrizations.weight.original"):
			p := strings.TrimSuffix(name, "original")
			found[strings.TrimSuffix(name, ".parametrizations.weight.original")+".weight"] = parts{name, p + "0._u", p + "0._v"}
		}
	}
	bases := make([]string, 0, len(found))
	for b := range found {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	for _, base := range bases {
		p := found[base]
		w, u, v := ts[p.w], ts[p.u], ts[p.v]
		if u == nil || v == nil {
			// Spectral norm before torch 1.1 (state dict version None)
			// kept no v but stored the normalised weight itself.
			if old, ok := ts[base]; ok && u != nil && v == nil {
				delete(ts, p.w)
				delete(ts, p.u)
				old.Name = base
				continue
			}
			return fmt.Errorf("spectral norm: %q without its %q and %q", p.w, p.u, p.v)
		}
		if _, clash := ts[base]; clash {
			return fmt.Errorf("spectral norm: both %q and its parts", base)
		}
		if len(w.Shape) == 0 || w.Shape[0] == 0 {
			return fmt.Errorf("spectral norm: %q has shape %v", p.w, w.Shape)
		}
		rows := w.Shape[0]
		cols := len(w.Data) / rows
		if len(u.Data) != rows || len(v.Data) != cols {
			return fmt.Errorf("spectral norm: %q is %v, so u should hold %d values and v %d; they hold %d and %d", p.w, w.Shape, rows, cols, len(u.Data), len(v.Data))
		}
		sigma := 0.0
		for i := range rows {
			s := 0.0
			for j, x := range w.Data[i*cols : (i+1)*cols] {
				s += float64(x) * float64(v.Data[j])
			}
			sigma += float64(u.Data[i]) * s
		}
		if sigma == 0 || math.IsNaN(sigma) || math.IsInf(sigma, 0) {
			return fmt.Errorf("spectral norm of %q: σ = uᵀWv is %g", base, sigma)
		}
		out := &Tensor{Name: base, Shape: slices.Clone(w.Shape), DType: w.DType, Data: make([]float32, len(w.Data))}
		for i, x := range w.Data {
			out.Data[i] = float32(float64(x) / sigma)
		}
		delete(ts, p.w)
		delete(ts, p.u)
		delete(ts, p.v)
		ts[base] = out
	}
	return nil
}

func loadConv2d(l *loader, name string, in, out, kernel, stride, padding, groups int, bias bool) *Conv2d {
	c := &Conv2d{In: in, Out: out, Kernel: kernel, Stride: stride, Padding: padding, Groups: groups}
	c.W = l.tensor(name+".weight", out, in/groups, kernel, kernel)
	if bias {
		c.B = l.tensor(name+".bias", out)
	}
	return c
}

// loadStyleNet builds one encoder, its widths read off the tensors.
func loadStyleNet(l *loader, name string) (*StyleNet, error) {
	p := name + ".shared."
	stem := l.shape(p + "0.weight")
	if err := l.err(); err != nil {
		return nil, err
	}
	if len(stem) != 4 || stem[1] != 1 || stem[2] != 3 || stem[3] != 3 || stem[0] < 1 {
		return nil, fmt.Errorf("%s: shared.0.weight has shape %v, want [dim_in 1 3 3]", name, stem)
	}
	n := &StyleNet{Name: name}
	c := stem[0]
	n.Stem = loadConv2d(l, p+"0", 1, c, 3, 1, 1, 1, true)
	for i := 1; i <= styleBlocks; i++ {
		b := fmt.Sprintf("%s%d.", p, i)
		s := l.shape(b + "conv2.weight")
		if len(s) != 4 || s[0] < 1 {
			return nil, errors.Join(l.err(), fmt.Errorf("%s: block %d's conv2 has shape %v", name, i, s))
		}
		out := s[0]
		blk := &StyleBlock{In: c, Out: out,
			Conv1: loadConv2d(l, b+"conv1", c, c, 3, 1, 1, 1, true),
			Down:  loadConv2d(l, b+"downsample_res.conv", c, c, 3, 2, 1, c, true),
			Conv2: loadConv2d(l, b+"conv2", c, out, 3, 1, 1, 1, true)}
		if out != c {
			blk.Shortcut = loadConv2d(l, b+"conv1x1", c, out, 1, 1, 0, 1, false)
		}
		n.Blocks = append(n.Blocks, blk)
		c = out
	}
	n.Head = loadConv2d(l, fmt.Sprintf("%s%d", p, styleBlocks+2), c, c, styleHead, 1, 0, 1, true)
	s := l.shape(name + ".unshared.weight")
	if err := l.err(); err != nil {
		return nil, err
	}
	if len(s) != 2 || s[0] != VoiceDim/2 {
		return nil, fmt.Errorf("%s: unshared.weight has shape %v, want [%d %d]: a Kokoro style row is two halves of %d (style_dim)", name, s, VoiceDim/2, c, VoiceDim/2)
	}
	n.Out = loadLinear(l, name+".unshared", c, s[0])
	if err := l.err(); err != nil {
		return nil, err
	}
	return n, nil
}

// Style is ref_s for a log-mel of [MelBins][frames] (LogMel's layout):
// the acoustic encoder's 128 values, then the prosodic encoder's. On the
// CPU, in engine/ops/ref's arithmetic.
func (e *StyleEncoder) Style(mel []float32, frames int) ([]float32, error) {
	a, err := e.Acoustic.Forward(mel, frames)
	if err != nil {
		return nil, err
	}
	p, err := e.Prosodic.Forward(mel, frames)
	if err != nil {
		return nil, err
	}
	return append(a, p...), nil
}

func checkMel(mel []float32, frames int) error {
	if frames < MinStyleFrames || frames > MaxStyleFrames {
		return fmt.Errorf("kokoro: style encoder: %d mel frames; it takes %d (%.2f s) to %d", frames, MinStyleFrames, float64(MinStyleSamples)/MelRate, MaxStyleFrames)
	}
	if len(mel) != MelBins*frames {
		return fmt.Errorf("kokoro: style encoder: mel of %d values, want %d×%d", len(mel), MelBins, frames)
	}
	return nil
}

// Forward is the encoder's style vector for a log-mel [MelBins][frames].
func (n *StyleNet) Forward(mel []float32, frames int) ([]float32, error) {
	y, err := n.forward(mel, frames, nil)
	return y, err
}

// forward runs the encoder, handing trace each block's output (as
// the fixture records them: "shared.1" … "shared.4", "shared.6",
// "shared.8") when it is not nil.
func (n *StyleNet) forward(mel []float32, frames int, trace func(name string, x []float32)) ([]float32, error) {
	if err := checkMel(mel, frames); err != nil {
		return nil, err
	}
	if trace == nil {
		trace = func(string, []float32) {}
	}
	// shared.0: the mel as a one-channel image.
	h, H, W := n.Stem.apply(mel, MelBins, frames)
	for i, b := range n.Blocks {
		h, H, W = b.apply(h, H, W)
		trace(fmt.Sprintf("shared.%d", i+1), h)
	}
	// shared.5–8: LeakyReLU, the 5×5 head, the mean over the plane
	// (AdaptiveAvgPool2d(1)), LeakyReLU.
	h = ref.LeakyReLU(h, styleSlope)
	h, H, W = n.Head.apply(h, H, W)
	trace("shared.6", h)
	c := n.Head.Out
	h = ref.LeakyReLU(ref.AvgPool2D(h, c, H, W, H, W), styleSlope)
	trace("shared.8", h)
	// unshared.
	return n.Out.rows(h, 1), nil
}

// apply is ResBlk.forward on x [In][h][w], giving [Out][h/2][ceil(w/2)].
func (b *StyleBlock) apply(x []float32, h, w int) ([]float32, int, int) {
	// Shortcut: the 1×1 convolution, then DownSample('half').
	sc := x
	if b.Shortcut != nil {
		sc, _, _ = b.Shortcut.apply(x, h, w)
	}
	sc = downsampleHalf(sc, b.Out, h, w)
	// Residual: lrelu, conv1, the learned downsampling, lrelu, conv2.
	r := ref.LeakyReLU(x, styleSlope)
	r, _, _ = b.Conv1.apply(r, h, w)
	r, ho, wo := b.Down.apply(r, h, w)
	r = ref.LeakyReLU(r, styleSlope)
	r, _, _ = b.Conv2.apply(r, ho, wo)
	// (shortcut + residual) / √2, in f32 as torch: x / math.sqrt(2).
	for i := range r {
		r[i] = (sc[i] + r[i]) / float32(math.Sqrt2)
	}
	return r, ho, wo
}

// downsampleHalf is StyleTTS2's DownSample('half'): an odd width gets its
// last column repeated, then F.avg_pool2d(x, 2).
func downsampleHalf(x []float32, c, h, w int) []float32 {
	if w%2 == 1 {
		wide := make([]float32, c*h*(w+1))
		for r := range c * h {
			copy(wide[r*(w+1):], x[r*w:(r+1)*w])
			wide[r*(w+1)+w] = x[r*w+w-1]
		}
		x, w = wide, w+1
	}
	return ref.AvgPool2D(x, c, h, w, 2, 2)
}

// Voices from recordings.

// VoiceFromStyle makes a voice pack of one 256-value style: the same row
// for every utterance length. A stock pack's rows differ by length
// because Kokoro's voices were averaged from styles of utterances of
// each length; a reference recording gives one style, whatever is said
// later, so every row is it and Voice.Style returns it for any phoneme
// count. Blending with a stock pack (BlendVoices) mixes row by row, so the
// blend keeps the stock voice's length dependence at its weight.
func VoiceFromStyle(name string, style []float32) (*Voice, error) {
	if len(style) != VoiceDim {
		return nil, fmt.Errorf("kokoro: a style of %d values, want %d", len(style), VoiceDim)
	}
	for i, x := range style {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("kokoro: style value %d is %g", i, x)
		}
	}
	v := &Voice{Name: name, Pack: make([]float32, VoiceRows*VoiceDim)}
	for r := range VoiceRows {
		copy(v.Pack[r*VoiceDim:], style)
	}
	return v, nil
}

// VoiceFromAudio makes a voice from a reference recording of any rate
// (PrepareReference: resampled to 24 kHz, trimmed, its log-mel) through
// the encoders on the CPU.
func (e *StyleEncoder) VoiceFromAudio(samples []float32, rate int) (*Voice, error) {
	mel, frames, err := PrepareReference(samples, rate)
	if err != nil {
		return nil, err
	}
	s, err := e.Style(mel, frames)
	if err != nil {
		return nil, err
	}
	return VoiceFromStyle("reference", s)
}

// The GPU forward.

// GPUStyleEncoder is StyleEncoder's forward on engine/ops kernels, both
// encoders in one command encoder and one submit. Weights are uploaded
// once by NewGPUStyleEncoder; activations are allocated per call and freed
// after it (a voice is made once, not per sentence). Not safe for
// concurrent use: the caller owns the device.
type GPUStyleEncoder struct {
	dev  *gpu.Device
	nets []*styleGPUNet
	bufs []*gpu.Buffer
}

type styleGPUConv struct {
	c    *Conv2d
	w, b *gpu.Buffer
}

type styleGPUBlock struct {
	b                            *StyleBlock
	conv1, down, conv2, shortcut styleGPUConv
}

type styleGPUNet struct {
	n          *StyleNet
	stem, head styleGPUConv
	out        styleGPUConv // unshared as a 1×1 convolution of a 1×1 image
	blocks     []styleGPUBlock
}

// NewGPUStyleEncoder uploads e's weights to dev.
func NewGPUStyleEncoder(dev *gpu.Device, e *StyleEncoder) (*GPUStyleEncoder, error) {
	g := &GPUStyleEncoder{dev: dev}
	for _, n := range []*StyleNet{e.Acoustic, e.Prosodic} {
		gn := &styleGPUNet{n: n}
		var err error
		up := func(c *Conv2d, label string) styleGPUConv {
			gc := styleGPUConv{c: c}
			if err == nil {
				gc.w, err = g.upload(label+".weight", c.W)
			}
			if err == nil && c.B != nil {
				gc.b, err = g.upload(label+".bias", c.B)
			}
			return gc
		}
		gn.stem = up(n.Stem, n.Name+".shared.0")
		for i, b := range n.Blocks {
			p := fmt.Sprintf("%s.shared.%d.", n.Name, i+1)
			gb := styleGPUBlock{b: b, conv1: up(b.Conv1, p+"conv1"), down: up(b.Down, p+"downsample_res.conv"), conv2: up(b.Conv2, p+"conv2")}
			if b.Shortcut != nil {
				gb.shortcut = up(b.Shortcut, p+"conv1x1")
			}
			gn.blocks = append(gn.blocks, gb)
		}
		gn.head = up(n.Head, n.Name+".shared.6")
		gn.out = up(&Conv2d{W: n.Out.W, B: n.Out.B, In: n.Out.In, Out: n.Out.Out, Kernel: 1, Stride: 1, Groups: 1}, n.Name+".unshared")
		if err != nil {
			g.Release()
			return nil, fmt.Errorf("kokoro: style encoder: gpu: %w", err)
		}
		g.nets = append(g.nets, gn)
	}
	return g, nil
}

func (g *GPUStyleEncoder) upload(label string, v []float32) (*gpu.Buffer, error) {
	b, err := g.dev.NewBufferF32(label, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	g.bufs = append(g.bufs, b)
	return b, nil
}

// Release frees the weights; the encoder is unusable after.
func (g *GPUStyleEncoder) Release() {
	for _, b := range g.bufs {
		b.Release()
	}
	g.bufs, g.nets = nil, nil
}

// styleRun is one forward's chain and the buffers it allocated.
type styleRun struct {
	dev     *gpu.Device
	ch      *gpu.Chain
	bufs    []*gpu.Buffer
	tensors []*gpu.Tensor
	err     error
}

func (r *styleRun) buffer(label string, floats int) *gpu.Buffer {
	if r.err != nil {
		return nil
	}
	b, err := r.dev.NewBuffer(label, uint64(max(floats, 1))*4)
	if err != nil {
		r.err = err
		return nil
	}
	r.bufs = append(r.bufs, b)
	return b
}

// lastColumn is a 1×w f32 matrix selecting a row's last value: ops.MatMul
// with it copies the last column of a [rows][w] buffer into another
// layout (DownSample's repeated column).
func (r *styleRun) lastColumn(w int) *gpu.Tensor {
	if r.err != nil {
		return nil
	}
	sel := make([]float32, w)
	sel[w-1] = 1
	t, err := r.dev.NewTensor(fmt.Sprintf("style.last_column.%d", w), gguf.TypeF32, 1, w, gpu.F32Bytes(sel), 0)
	if err != nil {
		r.err = err
		return nil
	}
	r.tensors = append(r.tensors, t)
	return t
}

func (r *styleRun) check(err error) {
	if r.err == nil && err != nil {
		r.err = err
	}
}

func (r *styleRun) release() {
	for _, b := range r.bufs {
		b.Release()
	}
	for _, t := range r.tensors {
		t.Release()
	}
}

// Style is StyleEncoder.Style on the GPU.
func (g *GPUStyleEncoder) Style(mel []float32, frames int) ([]float32, error) {
	if g.nets == nil {
		return nil, errors.New("kokoro: style encoder: gpu: released")
	}
	if err := checkMel(mel, frames); err != nil {
		return nil, err
	}
	ch, err := g.dev.NewChain("style_encoder")
	if err != nil {
		return nil, fmt.Errorf("kokoro: style encoder: gpu: %w", err)
	}
	defer ch.Discard()
	r := &styleRun{dev: g.dev, ch: ch}
	defer r.release()
	x, err := g.dev.NewBufferF32("style.mel", mel)
	if err != nil {
		return nil, fmt.Errorf("kokoro: style encoder: gpu: %w", err)
	}
	r.bufs = append(r.bufs, x)
	half := VoiceDim / 2
	out := r.buffer("style.ref_s", VoiceDim)
	for i, n := range g.nets {
		s := n.forward(r, x, frames)
		if r.err == nil {
			r.check(ops.CopyF32(ch, s, 0, out, i*half, half))
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("kokoro: style encoder: gpu: %w", r.err)
	}
	rb, err := ch.ReadBack(out, 0, VoiceDim*4)
	if err == nil {
		err = ch.Submit()
	}
	var b []byte
	if err == nil {
		b, err = rb.Bytes()
	}
	if err != nil {
		return nil, fmt.Errorf("kokoro: style encoder: gpu: %w", err)
	}
	return gpu.F32From(b), nil
}

// VoiceFromAudio is StyleEncoder.VoiceFromAudio with the encoders on the
// GPU (the mel is computed on the CPU).
func (g *GPUStyleEncoder) VoiceFromAudio(samples []float32, rate int) (*Voice, error) {
	mel, frames, err := PrepareReference(samples, rate)
	if err != nil {
		return nil, err
	}
	s, err := g.Style(mel, frames)
	if err != nil {
		return nil, err
	}
	return VoiceFromStyle("reference", s)
}

// conv appends c over x [In][h][w] into a new buffer.
func (r *styleRun) conv(c styleGPUConv, x *gpu.Buffer, h, w int, label string) (*gpu.Buffer, int, int) {
	a := c.c.opsArgs(h, w)
	ho, wo := a.OutSize()
	y := r.buffer(label, c.c.Out*ho*wo)
	if r.err == nil {
		r.check(ops.Conv2D(r.ch, x, c.w, c.b, y, a))
	}
	return y, ho, wo
}

func (r *styleRun) leaky(x, y *gpu.Buffer, n int) {
	if r.err == nil {
		r.check(ops.LeakyReLU(r.ch, x, y, n, styleSlope))
	}
}

// forward appends the encoder over the mel x and returns its output buffer
// (style_dim floats). It reads top to bottom as StyleNet.forward.
func (n *styleGPUNet) forward(r *styleRun, x *gpu.Buffer, frames int) *gpu.Buffer {
	name := n.n.Name
	h, H, W := r.conv(n.stem, x, MelBins, frames, name+".shared.0")
	for i, b := range n.blocks {
		h, H, W = b.forward(r, h, H, W, fmt.Sprintf("%s.shared.%d", name, i+1))
	}
	c := n.head.c.In
	a := r.buffer(name+".shared.5", c*H*W)
	r.leaky(h, a, c*H*W)
	f, Hf, Wf := r.conv(n.head, a, H, W, name+".shared.6")
	p := r.buffer(name+".shared.7", c)
	if r.err == nil {
		r.check(ops.AvgPool2D(r.ch, f, p, c, Hf, Wf, Hf, Wf))
	}
	r.leaky(p, p, c)
	s, _, _ := r.conv(n.out, p, 1, 1, name+".unshared")
	return s
}

// forward appends the block over x [In][h][w].
func (gb styleGPUBlock) forward(r *styleRun, x *gpu.Buffer, h, w int, label string) (*gpu.Buffer, int, int) {
	b := gb.b
	// Residual: lrelu, conv1, the learned downsampling, lrelu, conv2.
	a := r.buffer(label+".lrelu1", b.In*h*w)
	r.leaky(x, a, b.In*h*w)
	c1, _, _ := r.conv(gb.conv1, a, h, w, label+".conv1")
	d, ho, wo := r.conv(gb.down, c1, h, w, label+".downsample_res")
	r.leaky(d, d, b.In*ho*wo)
	res, _, _ := r.conv(gb.conv2, d, ho, wo, label+".conv2")
	// Shortcut: conv1x1, then DownSample('half'). An odd width's last
	// column is repeated: the rows are zero-padded by one (Pad1D) and a
	// one-hot matmul writes each row's last value into the pad, strided
	// (every weight is 0 but one 1, so the copy is exact).
	sc := x
	if gb.shortcut.c != nil {
		sc, _, _ = r.conv(gb.shortcut, x, h, w, label+".conv1x1")
	}
	rows := b.Out * h
	pooled := r.buffer(label+".downsample", b.Out*ho*wo)
	if w%2 == 1 {
		wide := r.buffer(label+".downsample.pad", rows*(w+1))
		sel := r.lastColumn(w)
		if r.err == nil {
			r.check(ops.Pad1D(r.ch, sc, wide, rows, w, 0, 1, ops.PadZeros))
		}
		if r.err == nil {
			r.check(ops.MatMulWith(r.ch, sel, sc, wide, rows, ops.MatmulOptions{XStride: w, YStride: w + 1, YOffset: w}))
		}
		if r.err == nil {
			r.check(ops.AvgPool2D(r.ch, wide, pooled, b.Out, h, w+1, 2, 2))
		}
	} else if r.err == nil {
		r.check(ops.AvgPool2D(r.ch, sc, pooled, b.Out, h, w, 2, 2))
	}
	// (shortcut + residual) / √2.
	n := b.Out * ho * wo
	if r.err == nil {
		r.check(ops.Add(r.ch, pooled, res, res, n))
	}
	if r.err == nil {
		r.check(ops.Scale(r.ch, res, res, n, float32(1/math.Sqrt2)))
	}
	return res, ho, wo
}
