//go:build !amd64 || purego

package vec

func exp32(dst, x []float32) { exp32Generic(dst, x) }

func exp64(dst, x []float64) { exp64Generic(dst, x) }

func expShiftFloor32(dst, x []float32, shift, floor float32) (float32, bool) {
	return expShiftFloor32Generic(dst, x, shift, floor)
}

func max32(x []float32) float32 { return maxGeneric(x) }

func softcap32(dst, x []float32, c float32) { softcap32Generic(dst, x, c) }
