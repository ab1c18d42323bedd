package ref

// CopyF32 copies n floats from src[srcOff:] to dst[dstOff:].
func CopyF32(src []float32, srcOff int, dst []float32, dstOff, n int) {
	copy(dst[dstOff:dstOff+n], src[srcOff:srcOff+n])
}
