package vec

// Blocking of the portable micro-kernel (2×4 tile).
var (
	genericKernel32 = gemmKernel[float32]{
		mr: 2, nr: 4, mc: 128, kc: 256, nc: 2048,
		fn:       kernelGeneric[float32],
		packCopy: packCopyGeneric[float32], packTrans: packTransGeneric[float32],
	}
	genericKernel64 = gemmKernel[float64]{
		mr: 2, nr: 4, mc: 128, kc: 256, nc: 2048,
		fn:       kernelGeneric[float64],
		packCopy: packCopyGeneric[float64], packTrans: packTransGeneric[float64],
	}
)

// gemm32Generic is the portable Gemm32: the same blocking and packing with
// the Go micro-kernel.
func gemm32Generic(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemm(&genericKernel32, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemm64Generic is the portable Gemm64.
func gemm64Generic(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	gemm(&genericKernel64, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// kernelGeneric is the portable 2×4 micro-kernel (see gemmKernel). The tile
// is small because Go keeps scalars in the 15 usable XMM registers of amd64
// and spills a 4×4 tile (16 accumulators); two steps per iteration halve
// the loop overhead. Testing len(a) and len(b) in the loop condition lets
// the compiler drop the bounds checks.
func kernelGeneric[T Float](k int, a, b, c []T, ldc int, alpha, beta T) {
	var c00, c01, c02, c03, c10, c11, c12, c13 T
	a, b = a[:2*k], b[:4*k]
	for len(a) >= 4 && len(b) >= 8 {
		a0, a1 := a[0], a[1]
		b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		a0, a1 = a[2], a[3]
		b0, b1, b2, b3 = b[4], b[5], b[6], b[7]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		a, b = a[4:], b[8:]
	}
	if len(a) >= 2 && len(b) >= 4 {
		a0, a1 := a[0], a[1]
		b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
	}
	storeRow(c[0:4], alpha, beta, c00, c01, c02, c03)
	storeRow(c[ldc:ldc+4], alpha, beta, c10, c11, c12, c13)
}

// storeRow sets row = alpha·(s0, s1, s2, s3) + beta·row, not reading row
// when beta is 0.
func storeRow[T Float](row []T, alpha, beta T, s0, s1, s2, s3 T) {
	row = row[:4]
	if beta == 0 {
		row[0], row[1], row[2], row[3] = alpha*s0, alpha*s1, alpha*s2, alpha*s3
		return
	}
	row[0] = alpha*s0 + beta*row[0]
	row[1] = alpha*s1 + beta*row[1]
	row[2] = alpha*s2 + beta*row[2]
	row[3] = alpha*s3 + beta*row[3]
}
