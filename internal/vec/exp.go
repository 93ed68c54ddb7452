package vec

// Exp32 sets dst to the element-wise exponential of x:
//
//	for i, v := range x {
//		dst[i] = float32(math.Exp(float64(v)))
//	}
//
// The fast paths evaluate a polynomial after range reduction; their results
// are within 2 ulp of the exact exponential for every finite result,
// denormal ones included. exp(−Inf) = 0, exp(+Inf) = +Inf and exp(NaN) = NaN;
// results beyond MaxFloat32 are +Inf and those below half the smallest
// denormal are 0.
//
// dst must be at least as long as x. dst and x may be the same slice, but
// must not otherwise overlap.
func Exp32(dst, x []float32) {
	exp32(dst[:len(x)], x)
}

// Exp64 sets dst to the element-wise exponential of x:
//
//	for i, v := range x {
//		dst[i] = math.Exp(v)
//	}
//
// with the accuracy and special cases of Exp32. Unlike math.Exp on amd64,
// whose assembly returns +Inf from about x = 709.43 on, Exp64 stays finite up
// to log(MaxFloat64) ≈ 709.78.
//
// dst must be at least as long as x. dst and x may be the same slice, but
// must not otherwise overlap.
func Exp64(dst, x []float64) {
	exp64(dst[:len(x)], x)
}
