package ref

// AvgPool2D is F.avg_pool2d(x, (kh, kw)) on [channels][height][width]: the
// mean of each kh x kw window, stride = kernel, no padding, floor mode
// (trailing rows and columns that do not fill a window are dropped). In
// float64.
func AvgPool2D(x []float32, channels, height, width, kh, kw int) []float32 {
	ho, wo := height/kh, width/kw
	y := make([]float32, channels*ho*wo)
	for c := range channels {
		for oy := range ho {
			for ox := range wo {
				s := 0.0
				for ky := range kh {
					for kx := range kw {
						s += float64(x[(c*height+oy*kh+ky)*width+ox*kw+kx])
					}
				}
				y[(c*ho+oy)*wo+ox] = float32(s / float64(kh*kw))
			}
		}
	}
	return y
}
