package nn

import "github.com/attnlab/attnlab/internal/vec"

// gemm computes C = op(A)·op(B) + beta·C, row-major, through package vec's
// SIMD kernels when T is float32 or float64, and reports whether it did; for
// other element types (named float types) the caller keeps its plain loops.
// The plain loops remain the definition: tests compare the two.
func gemm[T Float](transA, transB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) bool {
	if !useGemm {
		return false
	}
	switch a := any(a).(type) {
	case []float32:
		vec.Gemm32(transA, transB, m, n, k, 1, a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
		return true
	case []float64:
		vec.Gemm64(transA, transB, m, n, k, 1, a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
		return true
	}
	return false
}

// useGemm is switched off by tests to run the plain loops.
var useGemm = true

// sigmoids32 writes σ(a) into s for float32 slices through package vec's
// vectorised exp, and reports whether it did (T is float32). float64 keeps
// math.Exp: it is the precision the gradients are checked in.
func sigmoids32[T Float](s, a []T) bool {
	s32, ok := any(s).([]float32)
	if !ok || !useGemm {
		return false
	}
	a32 := any(a).([]float32)
	for i, v := range a32 {
		s32[i] = -v
	}
	vec.Exp32(s32, s32) // e^−a: +Inf for very negative a, which gives σ = 0 below
	for i := range s32 {
		s32[i] = 1 / (1 + s32[i])
	}
	return true
}

// expShifted32 writes exp(x − shift) into dst for float32 slices through
// package vec (dst may be x), and reports whether it did.
func expShifted32[T Float](dst, x []T, shift T) bool {
	d32, ok := any(dst).([]float32)
	if !ok || !useGemm {
		return false
	}
	x32, sh := any(x).([]float32), float32(shift)
	for i, v := range x32 {
		d32[i] = v - sh
	}
	vec.Exp32(d32, d32)
	return true
}
