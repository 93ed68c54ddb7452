//go:build !purego

package vec

//go:noescape
func exp32AVX512(dst, x []float32)

// exp32AVX2 handles whole vectors of 8 only.
//
//go:noescape
func exp32AVX2(dst, x []float32)

//go:noescape
func exp64AVX512(dst, x []float64)

// exp64AVX2 handles whole vectors of 4 only.
//
//go:noescape
func exp64AVX2(dst, x []float64)

func exp32(dst, x []float32) {
	switch {
	case useAVX512:
		exp32AVX512(dst, x)
	case useAVX2:
		// The tail goes through a whole vector in a buffer, so that every
		// element gets the same polynomial.
		n := len(x) &^ 7
		exp32AVX2(dst[:n], x[:n])
		if n < len(x) {
			var buf [8]float32
			copy(buf[:], x[n:])
			exp32AVX2(buf[:], buf[:])
			copy(dst[n:], buf[:len(x)-n])
		}
	default:
		exp32Generic(dst, x)
	}
}

func exp64(dst, x []float64) {
	switch {
	case useAVX512:
		exp64AVX512(dst, x)
	case useAVX2:
		n := len(x) &^ 3
		exp64AVX2(dst[:n], x[:n])
		if n < len(x) {
			var buf [4]float64
			copy(buf[:], x[n:])
			exp64AVX2(buf[:], buf[:])
			copy(dst[n:], buf[:len(x)-n])
		}
	default:
		exp64Generic(dst, x)
	}
}
