//go:build !purego

package vec

//go:noescape
func dot32AVX512(x, y []float32) float32

//go:noescape
func dot32AVX2(x, y []float32) float32

//go:noescape
func dot64AVX512(x, y []float64) float64

//go:noescape
func dot64AVX2(x, y []float64) float64

func dot32(x, y []float32) float32 {
	switch {
	case useAVX512:
		return dot32AVX512(x, y)
	case useAVX2:
		return dot32AVX2(x, y)
	}
	return dotGeneric(x, y)
}

func dot64(x, y []float64) float64 {
	switch {
	case useAVX512:
		return dot64AVX512(x, y)
	case useAVX2:
		return dot64AVX2(x, y)
	}
	return dotGeneric(x, y)
}
