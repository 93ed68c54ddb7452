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
