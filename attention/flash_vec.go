package attention

import "github.com/attnlab/attnlab/internal/vec"

// The tile products of fully computed tiles go to package vec's SIMD GEMM
// when T is float32 or float64: same products, another summation order (the
// kernels agree with the plain loops to rounding). Tiles that hold hidden
// keys keep the *Skip loops, which never read a hidden row. Each product
// runs on the calling goroutine (vec.GemmSerial): the tiles are already
// shared out among the threads, one work item each, and a product split
// again would start goroutines that wait on the other workers' items.

// useVec is switched off by tests to run the plain loops.
var useVec = true

// vecGemm computes c = alpha·op(a)·op(b) + beta·c on row-major tiles and
// reports whether it could.
func vecGemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) bool {
	if !useVec || m == 0 || n == 0 {
		return false
	}
	vec.GemmSerial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return true
}
