//go:build !purego

package vec

//go:noescape
func scale32AVX512(alpha float32, x []float32)

//go:noescape
func scale32AVX2(alpha float32, x []float32)

//go:noescape
func scale64AVX512(alpha float64, x []float64)

//go:noescape
func scale64AVX2(alpha float64, x []float64)

func scale32(alpha float32, x []float32) {
	switch {
	case useAVX512:
		scale32AVX512(alpha, x)
	case useAVX2:
		scale32AVX2(alpha, x)
	default:
		scaleGeneric(alpha, x)
	}
}

func scale64(alpha float64, x []float64) {
	switch {
	case useAVX512:
		scale64AVX512(alpha, x)
	case useAVX2:
		scale64AVX2(alpha, x)
	default:
		scaleGeneric(alpha, x)
	}
}
