package ref

import (
	"fmt"
	"math"
)

// SineGenArgs are Kokoro's harmonic-source settings, as ops.SineGenArgs.
type SineGenArgs struct {
	Frames, Upsample, Harmonics                    int
	SampleRate, SineAmp, NoiseStd, VoicedThreshold float32
}

// lerpIndex is PyTorch's CPU linear-interpolation source index for output i
// (align_corners=False, a given scale): src = ratio*(i+0.5) - 0.5 in f32,
// clamped at 0, then index i0, its right neighbour i1 (i0 itself at the
// end) and lambda1, as guard_index_and_lambda computes them.
func lerpIndex(i int, ratio float32, inSize int) (i0, i1 int, l1 float32) {
	s := float32(i) + 0.5
	s = float32(ratio * s)
	src := float32(s - 0.5)
	if src < 0 {
		src = 0
	}
	i0 = min(int(math.Floor(float64(src))), inSize-1)
	l1 = float32(min(max(src-float32(i0), 0), 1))
	i1 = i0
	if i0 < inSize-1 {
		i1++
	}
	return i0, i1, l1
}

// SineGen is Kokoro's Generator harmonic source up to SineGen's output:
// f0_upsamp (nearest, factor Upsample) of the frame-rate f0, then
// SineGen.forward with flag_for_pulse=False, returning sine_waves laid out
// [Harmonics][Frames*Upsample]. initPhase (rand_ini, Harmonics values) and
// noise (randn_like(sine_waves), same layout) may be nil for zeros.
//
// The elementwise front end follows torch's f32 arithmetic step by step
// (f0*h, /sr, %1, + rand_ini on sample 0, the downsampling interpolation
// and its f32 source indices), since those roundings are deterministic.
// From the cumulative sum on it is exact (float64): torch's f32 cumsum and
// its f32 phase of up to 3e5 rad carry rounding of their own (an ulp of
// 3e5 is 0.03 rad), which no implementation reproduces bit for bit.
func SineGen(f0, initPhase, noise []float32, a SineGenArgs) ([]float32, error) {
	U := a.Upsample
	L := a.Frames * U
	td := int(float64(L) * (1 / float64(U)))
	if td <= 0 || td*U != L {
		return nil, fmt.Errorf("ref: sine_gen: %d samples downsample to %d frames", L, td)
	}
	ratioDown := float32(1 / (1 / float64(U)))
	ratioUp := float32(1 / float64(U))
	y := make([]float32, a.Harmonics*L)
	for h := range a.Harmonics {
		rad := func(j int) float32 {
			fn := float32(f0[j/U] * float32(h+1))
			q := fn / a.SampleRate
			r := float32(q - float32(math.Floor(float64(q))))
			if j == 0 && initPhase != nil {
				r = float32(r + initPhase[h])
			}
			return r
		}
		rd := make([]float32, td)
		cum := make([]float64, td) // U * cumsum(rad_d), in cycles
		acc := 0.0
		for i := range td {
			i0, i1, l1 := lerpIndex(i, ratioDown, L)
			l0 := float32(1 - l1)
			rd[i] = float32(float32(l0*rad(i0)) + float32(l1*rad(i1)))
			acc += float64(rd[i])
			cum[i] = float64(U) * acc
		}
		for j := range L {
			i0, i1, l1 := lerpIndex(j, ratioUp, td)
			cyc := cum[i0]
			if i1 != i0 {
				// (1-l) P0 + l P1 with P1 = P0 + U*rd[i1], in exact arithmetic.
				cyc += float64(l1) * float64(U) * float64(rd[i1])
			}
			cyc -= math.Floor(cyc)
			v := 0.0
			voiced := f0[j/U] > a.VoicedThreshold
			if voiced {
				v = float64(a.SineAmp) * math.Sin(2*math.Pi*cyc)
			}
			if noise != nil {
				amp := float64(a.SineAmp) / 3
				if voiced {
					amp = float64(a.NoiseStd)
				}
				v += amp * float64(noise[h*L+j])
			}
			y[h*L+j] = float32(v)
		}
	}
	return y, nil
}
