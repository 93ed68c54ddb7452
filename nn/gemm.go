package nn

import "github.com/attnlab/attnlab/internal/vec"

// gemm computes C = op(A)·op(B) + beta·C, row-major, through package vec's
// SIMD kernels, and reports whether it did (not when tests switch them off
// to run the plain loops, which remain the definition: tests compare the
// two).
func gemm[T Float](transA, transB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) bool {
	if !useGemm {
		return false
	}
	vec.Gemm(transA, transB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
	return true
}

// useGemm is switched off by tests to run the plain loops.
var useGemm = true

// sigmoids32 writes σ(a) into s for float32 slices through package vec's
// vectorised exp, and reports whether it did (T is float32). float64 keeps
// math.Exp: it is the precision the gradients are checked in.
func sigmoids32[T Float](s, a []T) bool {
	if !vec.Is32[T]() || !useGemm {
		return false
	}
	for i, v := range a {
		s[i] = -v
	}
	vec.Exp(s, s) // e^−a: +Inf for very negative a, which gives σ = 0 below
	for i := range s {
		s[i] = 1 / (1 + s[i])
	}
	return true
}

// expShifted32 writes exp(x − shift) into dst for float32 slices through
// package vec (dst may be x), and reports whether it did.
func expShifted32[T Float](dst, x []T, shift T) bool {
	if !vec.Is32[T]() || !useGemm {
		return false
	}
	for i, v := range x {
		dst[i] = v - shift
	}
	vec.Exp(dst, dst)
	return true
}
