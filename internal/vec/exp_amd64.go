//go:build !purego

package vec

import "math"

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

// expShiftFloor32AVX2 handles whole vectors of 8 only (see mkasm.go).
//
//go:noescape
func expShiftFloor32AVX2(dst, x []float32, shift, floor float32) (sum float32, live bool)

// softcap32AVX2 handles whole vectors of 8 only (see mkasm.go).
//
//go:noescape
func softcap32AVX2(dst, x []float32, twoOverC, c float32)

func softcap32(dst, x []float32, c float32) {
	if !useAVX2 {
		softcap32Generic(dst, x, c)
		return
	}
	n := len(x) &^ 7
	softcap32AVX2(dst[:n], x[:n], 2/c, c)
	if n < len(x) {
		// the tail as a whole vector, so that every element gets the same
		// polynomial
		var buf [8]float32
		copy(buf[:], x[n:])
		softcap32AVX2(buf[:], buf[:], 2/c, c)
		copy(dst[n:len(x)], buf[:])
	}
}

// max32AVX2 handles whole vectors of 8, at least one.
//
//go:noescape
func max32AVX2(x []float32) (m float32, nan bool)

func expShiftFloor32(dst, x []float32, shift, floor float32) (float32, bool) {
	if !useAVX2 {
		return expShiftFloor32Generic(dst, x, shift, floor)
	}
	n := len(x) &^ 7
	sum, live := expShiftFloor32AVX2(dst[:n], x[:n], shift, floor)
	if n < len(x) {
		// the tail as a whole vector, padded with −Inf (which gives 0)
		buf := [8]float32{}
		for i := range buf {
			buf[i] = float32(math.Inf(-1))
		}
		copy(buf[:], x[n:])
		s, l := expShiftFloor32AVX2(buf[:], buf[:], shift, floor)
		copy(dst[n:len(x)], buf[:])
		sum, live = sum+s, live || l
	}
	return sum, live
}

func max32(x []float32) float32 {
	if !useAVX2 || len(x) < 8 {
		return maxGeneric(x)
	}
	n := len(x) &^ 7
	m, nan := max32AVX2(x[:n])
	for _, v := range x[n:] {
		nan = nan || v != v
		m = max(m, v)
	}
	if nan {
		return float32(math.NaN())
	}
	return m
}
