package ref

// Conv2DArgs shapes a 2-D convolution as ops.Conv2DArgs: x
// [InChannels][Height][Width], weight [OutChannels][InChannels/Groups]
// [KernelH][KernelW]. Strides and Groups of 0 mean 1.
type Conv2DArgs struct {
	InChannels, OutChannels int
	Height, Width           int
	KernelH, KernelW        int
	StrideH, StrideW        int
	PadH, PadW              int
	Groups                  int
}

// OutSize is floor((in + 2p - k) / s) + 1 per axis.
func (a Conv2DArgs) OutSize() (h, w int) {
	return (a.Height+2*a.PadH-a.KernelH)/orOne(a.StrideH) + 1, (a.Width+2*a.PadW-a.KernelW)/orOne(a.StrideW) + 1
}

// Conv2D is torch.nn.functional.conv2d(x, w, bias, stride, padding,
// dilation=1, groups) on one batch item with zero padding. bias may be
// nil. Sums in float64.
func Conv2D(x, w, bias []float32, a Conv2DArgs) []float32 {
	sh, sw, g := orOne(a.StrideH), orOne(a.StrideW), orOne(a.Groups)
	ho, wo := a.OutSize()
	cinG, coutG := a.InChannels/g, a.OutChannels/g
	y := make([]float32, a.OutChannels*ho*wo)
	for co := range a.OutChannels {
		grp := co / coutG
		for oy := range ho {
			for ox := range wo {
				acc := 0.0
				if bias != nil {
					acc = float64(bias[co])
				}
				for ci := range cinG {
					plane := x[(grp*cinG+ci)*a.Height*a.Width:]
					kern := w[(co*cinG+ci)*a.KernelH*a.KernelW:]
					for ky := range a.KernelH {
						yy := oy*sh + ky - a.PadH
						if yy < 0 || yy >= a.Height {
							continue
						}
						for kx := range a.KernelW {
							xx := ox*sw + kx - a.PadW
							if xx < 0 || xx >= a.Width {
								continue
							}
							acc += float64(plane[yy*a.Width+xx]) * float64(kern[ky*a.KernelW+kx])
						}
					}
				}
				y[(co*ho+oy)*wo+ox] = float32(acc)
			}
		}
	}
	return y
}
