package attention

import "github.com/attnlab/attnlab/internal/vec"

// The tile products of fully computed tiles go to package vec's SIMD GEMM
// when T is float32 or float64: same products, another summation order (the
// kernels agree with the plain loops to rounding). Tiles that hold hidden
// keys keep the *Skip loops, which never read a hidden row.

// useVec is switched off by tests to run the plain loops.
var useVec = true

// vecGemm computes c = alpha·op(a)·op(b) + beta·c on row-major tiles and
// reports whether it could.
func vecGemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) bool {
	if !useVec || m == 0 || n == 0 {
		return false
	}
	switch a := any(a).(type) {
	case []float32:
		vec.Gemm32(transA, transB, m, n, k, float32(alpha), a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
		return true
	case []float64:
		vec.Gemm64(transA, transB, m, n, k, float64(alpha), a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
		return true
	}
	return false
}
