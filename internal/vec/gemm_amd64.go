//go:build !purego

package vec

//go:noescape
func gemm32KernelAVX512(k int, a, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm64KernelAVX512(k int, a, b, c []float64, ldc int, alpha, beta float64)

//go:noescape
func gemm32KernelAVX2(k int, a, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm64KernelAVX2(k int, a, b, c []float64, ldc int, alpha, beta float64)

//go:noescape
func gemm32KernelAVX2RowA(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm32KernelAVX2RowAP(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32, np int)

//go:noescape
func gemm32KernelAVX2RowA1(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm32KernelAVX2RowA2(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm32KernelAVX2RowA3(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm32KernelAVX2RowA4(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm32KernelAVX2RowA5(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32)

//go:noescape
func gemm64KernelAVX2RowA(k int, a []float64, lda int, b, c []float64, ldc int, alpha, beta float64)

//go:noescape
func pack32CopyAVX2(dst, src []float32, ld, rows, np, nr int)

//go:noescape
func pack32TransAVX2(dst, src []float32, ld, r, kb, w int)

//go:noescape
func pack32CopyAVX512(dst, src []float32, ld, rows, np, nr int, tmask, smask uint32)

//go:noescape
func pack64CopyAVX512(dst, src []float64, ld, rows, np, nr int, tmask, smask uint32)

//go:noescape
func pack32TransAVX512(dst, src []float32, ld, r, kb, w int)

//go:noescape
func pack64TransAVX512(dst, src []float64, ld, r, kb, w int)

// Register tiles are fixed by the assembly (mkasm.go). The cache blocks are
// sized for Zen 5 (48 KiB L1d, 1 MiB L2 per core): an nr×kc panel of B takes
// about half of L1, an mc×kc block of A about a quarter of L2. A sweep of
// mc ∈ [112, 504] and kc ∈ [128, 384] found no setting better than the
// noise of a shared machine.
var (
	avx512Kernel32 = gemmKernel[float32]{
		mr: 14, nr: 32, mc: 336, kc: 192, nc: 3072,
		fn:       gemm32KernelAVX512,
		packCopy: packCopyAVX512[float32], packTrans: packTransAVX512[float32],
	}
	avx512Kernel64 = gemmKernel[float64]{
		mr: 14, nr: 16, mc: 168, kc: 192, nc: 3072,
		fn:       gemm64KernelAVX512,
		packCopy: packCopyAVX512[float64], packTrans: packTransAVX512[float64],
	}
	avx2Kernel32 = gemmKernel[float32]{
		mr: 6, nr: 16, mc: 192, kc: 256, nc: 3072,
		fn: gemm32KernelAVX2, fnRowA: gemm32KernelAVX2RowA, fnRowAP: gemm32KernelAVX2RowAP,
		fnRowAEdge: [8]func(k int, a []float32, lda int, b, c []float32, ldc int, alpha, beta float32){
			1: gemm32KernelAVX2RowA1, 2: gemm32KernelAVX2RowA2, 3: gemm32KernelAVX2RowA3,
			4: gemm32KernelAVX2RowA4, 5: gemm32KernelAVX2RowA5,
		},
		packCopy: packCopyAVX2, packTrans: packTransAVX2,
	}
	avx2Kernel64 = gemmKernel[float64]{
		mr: 6, nr: 8, mc: 96, kc: 256, nc: 3072,
		fn: gemm64KernelAVX2, fnRowA: gemm64KernelAVX2RowA,
		packCopy: packCopyGeneric[float64], packTrans: packTransGeneric[float64],
	}
)

func kernel32() *gemmKernel[float32] {
	switch {
	case useAVX512:
		return &avx512Kernel32
	case useAVX2:
		return &avx2Kernel32
	}
	return &genericKernel32
}

func kernel64() *gemmKernel[float64] {
	switch {
	case useAVX512:
		return &avx512Kernel64
	case useAVX2:
		return &avx2Kernel64
	}
	return &genericKernel64
}

// packCopyAVX512 is packCopyGeneric for nr ≤ 2 vectors. The bounds checks
// here stand in for those the assembly does not make.
func packCopyAVX512[T Float](dst, src []T, ld, rows, w, nr int) {
	if rows == 0 || w == 0 {
		return
	}
	_ = src[(rows-1)*ld+w-1]
	_ = dst[ceilDiv(w, nr)*nr*rows-1]
	// Lane masks of the two vectors: the low 16 (float32) or 8 (float64)
	// bits cover the first one.
	np, tail := w/nr, w%nr
	tmask, smask := uint32(uint64(1)<<tail-1), uint32(uint64(1)<<nr-1)
	switch d := any(dst).(type) {
	case []float32:
		pack32CopyAVX512(d, any(src).([]float32), ld, rows, np, nr, tmask, smask)
	case []float64:
		pack64CopyAVX512(d, any(src).([]float64), ld, rows, np, nr, tmask, smask)
	}
}

// packTransAVX512 is packTransGeneric. The bounds checks here stand in for
// those the assembly does not make.
func packTransAVX512[T Float](dst, src []T, ld, r, kb, w int) {
	if kb == 0 {
		return
	}
	if r > 0 {
		_ = src[(r-1)*ld+kb-1]
	}
	_ = dst[kb*w-1]
	switch d := any(dst).(type) {
	case []float32:
		pack32TransAVX512(d, any(src).([]float32), ld, r, kb, w)
	case []float64:
		pack64TransAVX512(d, any(src).([]float64), ld, r, kb, w)
	}
}

// packTransAVX2 is packTransGeneric with the assembly for whole blocks of 8
// rows and 8 columns: w a multiple of 8, the columns past the last whole
// block of 8 by packTransGeneric.
func packTransAVX2(dst, src []float32, ld, r, kb, w int) {
	kb8 := kb &^ 7
	if w%8 != 0 || kb8 == 0 {
		packTransGeneric(dst, src, ld, r, kb, w)
		return
	}
	// the bounds checks the assembly does not make
	if r > 0 {
		_ = src[(min(r, w)-1)*ld+kb8-1]
	}
	_ = dst[kb8*w-1]
	pack32TransAVX2(dst, src, ld, min(r, w), kb8, w)
	if kb8 < kb {
		tail := src // no row present: src is not read
		if r > 0 {
			tail = src[kb8:]
		}
		packTransGeneric(dst[kb8*w:], tail, ld, r, kb-kb8, w)
	}
}

// packCopyAVX2 is packCopyGeneric with the assembly for the whole panels of
// the AVX2 kernel's widths (nr = 16 for B, 6 for A); the last, partial
// panel and other widths by packCopyGeneric.
func packCopyAVX2(dst, src []float32, ld, rows, w, nr int) {
	np := w / nr
	if rows == 0 || np == 0 || nr != 16 && nr != 6 {
		packCopyGeneric(dst, src, ld, rows, w, nr)
		return
	}
	// the bounds checks the assembly does not make
	_ = src[(rows-1)*ld+np*nr-1]
	_ = dst[np*nr*rows-1]
	pack32CopyAVX2(dst, src, ld, rows, np, nr)
	if np*nr < w {
		packCopyGeneric(dst[np*nr*rows:], src[np*nr:], ld, rows, w-np*nr, nr)
	}
}
