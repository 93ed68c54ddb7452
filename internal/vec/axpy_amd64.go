//go:build !purego

package vec

//go:noescape
func axpy32AVX512(alpha float32, x, y []float32)

//go:noescape
func axpy32AVX2(alpha float32, x, y []float32)

//go:noescape
func axpy64AVX512(alpha float64, x, y []float64)

//go:noescape
func axpy64AVX2(alpha float64, x, y []float64)

func axpy32(alpha float32, x, y []float32) {
	switch {
	case useAVX512:
		axpy32AVX512(alpha, x, y)
	case useAVX2:
		axpy32AVX2(alpha, x, y)
	default:
		axpyGeneric(alpha, x, y)
	}
}

func axpy64(alpha float64, x, y []float64) {
	switch {
	case useAVX512:
		axpy64AVX512(alpha, x, y)
	case useAVX2:
		axpy64AVX2(alpha, x, y)
	default:
		axpyGeneric(alpha, x, y)
	}
}
