package kokoro

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

func TestConv1dMatchesReference(t *testing.T) {
	for _, c := range []struct{ in, out, length, k, s, p, d int }{
		{3, 5, 17, 3, 1, 1, 1}, {4, 2, 40, 12, 6, 3, 1}, {2, 3, 9, 11, 1, 25, 5}, {5, 4, 23, 7, 1, 3, 3}, {1, 1, 10, 3, 2, 1, 1},
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			conv := &Conv1d{In: c.in, Out: c.out, Kernel: c.k, Stride: c.s, Padding: c.p, Dilation: c.d}
			conv.W, conv.B = make([]float32, c.out*c.in*c.k), make([]float32, c.out)
			x := make([]float32, c.in*c.length)
			for i := range conv.W {
				conv.W[i] = float32(fixtureUniform("w", i))
			}
			for i := range conv.B {
				conv.B[i] = float32(fixtureUniform("b", i))
			}
			for i := range x {
				x[i] = float32(100 * fixtureUniform("x", i))
			}
			got := conv.apply(x, c.length)
			want := ref.Conv1D(x, conv.W, conv.B, ref.Conv1DArgs{InChannels: c.in, OutChannels: c.out, Length: c.length,
				Kernel: c.k, Stride: c.s, Padding: c.p, Dilation: c.d})
			if !slices.Equal(got, want) {
				// The same float64 sum in the same order: exact.
				t.Fatalf("got %v\nwant %v", got, want)
			}
		})
	}
}
