package ref

// Conv1DTiled is the reference of ops.Conv1DTiled: the same convolution as
// Conv1D (stride 1, groups 1, zero padding being the only arguments the
// tiled kernel takes), which the tiled kernel only schedules differently.
func Conv1DTiled(x, w, bias []float32, a Conv1DArgs) []float32 {
	return Conv1D(x, w, bias, a)
}
