package vec

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Gemm32 computes the matrix product
//
//	C = alpha * op(A) * op(B) + beta * C
//
// where op(A) is m×k, op(B) is k×n and C is m×n, all row-major with leading
// dimensions lda, ldb and ldc. op(X) is X, or Xᵀ when transX is set, so A is
// stored m×k (or k×m when transA) and B is stored k×n (or n×k when transB).
// The reference loop is
//
//	for i := 0; i < m; i++ {
//		for j := 0; j < n; j++ {
//			var sum float32
//			for p := 0; p < k; p++ {
//				sum += opA(i, p) * opB(p, j)
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * sum
//			} else {
//				c[i*ldc+j] = alpha*sum + beta*c[i*ldc+j]
//			}
//		}
//	}
//
// with opA(i, p) = a[i*lda+p] (a[p*lda+i] if transA) and opB(p, j) =
// b[p*ldb+j] (b[j*ldb+p] if transB). As in BLAS, C is not read when beta is
// 0, so NaNs in it are overwritten, and A and B are not read when alpha is 0
// or k is 0. C must not overlap A or B.
//
// It panics if m, n or k is negative, if a leading dimension is smaller than
// the row length of its stored matrix (or 1), or if a slice is too short for
// its matrix.
func Gemm32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	gemm(kernel32(), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Gemm64 computes the matrix product
//
//	C = alpha * op(A) * op(B) + beta * C
//
// in float64, with the arguments, reference loop and panics of Gemm32:
//
//	for i := 0; i < m; i++ {
//		for j := 0; j < n; j++ {
//			var sum float64
//			for p := 0; p < k; p++ {
//				sum += opA(i, p) * opB(p, j)
//			}
//			if beta == 0 {
//				c[i*ldc+j] = alpha * sum
//			} else {
//				c[i*ldc+j] = alpha*sum + beta*c[i*ldc+j]
//			}
//		}
//	}
func Gemm64(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	gemm(kernel64(), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// checkGemm panics unless the arguments describe valid matrices.
func checkGemm(transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("vec: negative size m=%d n=%d k=%d", m, n, k))
	}
	ra, ca := m, k
	if transA {
		ra, ca = k, m
	}
	rb, cb := k, n
	if transB {
		rb, cb = n, k
	}
	checkMatrix("a", ra, ca, la, lda)
	checkMatrix("b", rb, cb, lb, ldb)
	checkMatrix("c", m, n, lc, ldc)
}

// checkMatrix panics unless a slice of length l holds an r×c matrix with
// leading dimension ld.
func checkMatrix(name string, r, c, l, ld int) {
	if ld < max(1, c) {
		panic(fmt.Sprintf("vec: ld%s=%d < max(1, %d) for a %d×%d matrix", name, ld, c, r, c))
	}
	if r > 0 && c > 0 && l < (r-1)*ld+c {
		panic(fmt.Sprintf("vec: len(%s)=%d < %d for a %d×%d matrix with ld%s=%d", name, l, (r-1)*ld+c, r, c, name, ld))
	}
}

// gemmKernel is a micro-kernel with its register tile and cache blocking.
//
// fn computes one mr×nr tile of C from a packed mr×k panel of op(A) (a[p*mr+i])
// and a packed k×nr panel of op(B) (b[p*nr+j]):
//
//	c[i*ldc+j] = alpha·Σ_p a[p*mr+i]·b[p*nr+j] + beta·c[i*ldc+j]
//
// not reading c when beta is 0.
type gemmKernel[T Float] struct {
	mr, nr int // register tile
	mc     int // rows of a packed block of op(A) (a multiple of mr): L2 resident
	kc     int // depth of the packed panels: an nr×kc panel of op(B) stays in L1
	nc     int // columns of a packed panel of op(B) (a multiple of nr): L3 resident
	fn     func(k int, a, b, c []T, ldc int, alpha, beta T)
	// fnRowA, when not nil, is fn reading the mr rows of a row-major A in
	// place (a[i*lda+p]) instead of a packed panel: gemmSerial uses it for
	// products of at most rowAMaxN columns with A not transposed, where
	// packing A (a transposition into panels) costs about as much as the
	// product. The A micro-kernel of AVX2 has 6 rows, which it can address
	// from one register and multiples of lda.
	fnRowA func(k int, a []T, lda int, b, c []T, ldc int, alpha, beta T)
	// fnRowAP, when not nil, is fnRowA for np tiles side by side: C's
	// columns 0..np·nr−1 from np consecutive packed panels of b, one call
	// for a row of tiles instead of np.
	fnRowAP func(k int, a []T, lda int, b, c []T, ldc int, alpha, beta T, np int)
	// fnRowAEdge[r], when not nil, is fnRowA for r < mr rows: the last
	// rows of a product whose rows are not a multiple of mr, computed in
	// place instead of packed into a zero-padded panel.
	fnRowAEdge [8]func(k int, a []T, lda int, b, c []T, ldc int, alpha, beta T)

	// packCopy and packTrans fill packed panels (see packCopyGeneric and
	// packTransGeneric, the portable versions).
	packCopy  func(dst, src []T, ld, rows, w, nr int)
	packTrans func(dst, src []T, ld, r, kb, w int)
}

// parallelMin is the smallest m·n·k that is split across goroutines; below it
// the goroutine start-up costs more than the second core gains.
const parallelMin = 1 << 18

// gemm computes C = alpha·op(A)·op(B) + beta·C with the micro-kernel kr,
// splitting large products across goroutines.
func gemm[T Float](kr *gemmKernel[T], transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	gemmSplit(kr, runtime.GOMAXPROCS(0), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// GemmSerial is Gemm on the calling goroutine alone: for a caller that is
// itself one of several parallel workers (the fused attention's tile
// products), where splitting each product again would only start
// goroutines that wait on each other and on the other workers. The result
// is the same bits as Gemm's (the split never changes a sum).
func GemmSerial[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	checkGemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if is32[T]() {
		gemmSplit(kernel32(), 1, transA, transB, m, n, k, float32(alpha), as32(a), lda, as32(b), ldb, float32(beta), as32(c), ldc)
		return
	}
	gemmSplit(kernel64(), 1, transA, transB, m, n, k, float64(alpha), as64(a), lda, as64(b), ldb, float64(beta), as64(c), ldc)
}

// gemmSplit is gemm on at most procs goroutines.
func gemmSplit[T Float](kr *gemmKernel[T], procs int, transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleMatrix(m, n, beta, c, ldc)
		return
	}
	if form := skinnyForm(transA, transB, m, n, k); form != 0 {
		gemmSkinny(form, procs, transA, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// Split C into nt ranges of whole tiles along its longer side (in
	// tiles). Tile boundaries and the kc blocking do not move with the
	// split, so every element is computed the same way for any nt.
	tilesM, tilesN := ceilDiv(m, kr.mr), ceilDiv(n, kr.nr)
	tiles := max(tilesM, tilesN)
	nt := procs
	if m*n*k < parallelMin {
		nt = 1
	}
	nt = min(nt, tiles)
	if nt <= 1 {
		gemmSerial(kr, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	var wg sync.WaitGroup
	for t := nt - 1; t >= 0; t-- {
		lo, hi := t*tiles/nt, (t+1)*tiles/nt
		as, bs, cs, mm, nn := a, b, c, m, n
		if tilesN >= tilesM {
			j0, j1 := lo*kr.nr, min(hi*kr.nr, n)
			nn = j1 - j0
			cs = c[j0:]
			if transB {
				bs = b[j0*ldb:]
			} else {
				bs = b[j0:]
			}
		} else {
			i0, i1 := lo*kr.mr, min(hi*kr.mr, m)
			mm = i1 - i0
			cs = c[i0*ldc:]
			if transA {
				as = a[i0:]
			} else {
				as = a[i0*lda:]
			}
		}
		if t == 0 {
			// The calling goroutine takes the first range.
			gemmSerial(kr, transA, transB, mm, nn, k, alpha, as, lda, bs, ldb, beta, cs, ldc)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			gemmSerial(kr, transA, transB, mm, nn, k, alpha, as, lda, bs, ldb, beta, cs, ldc)
		}()
	}
	wg.Wait()
}

// gemmSerial is gemm on the calling goroutine: the five loops around the
// micro-kernel of Goto and BLIS.
func gemmSerial[T Float](kr *gemmKernel[T], transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	mr, nr := kr.mr, kr.nr
	// kc depends on k only, never on the split, so the order of the sums
	// is the same on every goroutine count (see gemm).
	kc := blockSize(k, kr.kc, 1)
	mc := blockSize(m, kr.mc, mr)
	nc := blockSize(n, kr.nc, nr)
	ws := getWorkspace[T](mc*kc, nc*kc, mr*nr)
	defer putWorkspace(ws)
	rowA := kr.fnRowA != nil && !transA && n <= rowAMaxN
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			packB(kr, ws.b, transB, b, ldb, pc, jc, kb, nb)
			// beta scales C once; later k blocks accumulate.
			bet := beta
			if pc > 0 {
				bet = 1
			}
			for ic := 0; ic < m; ic += mc {
				mb := min(mc, m-ic)
				if rowA {
					macroKernelRowA(kr, mb, nb, kb, alpha, a[ic*lda+pc:], lda, ws.a, ws.b, bet, c[ic*ldc+jc:], ldc, ws.tile)
					continue
				}
				packA(kr, ws.a, transA, a, lda, ic, pc, mb, kb)
				macroKernel(kr, mb, nb, kb, alpha, ws.a, ws.b, bet, c[ic*ldc+jc:], ldc, ws.tile)
			}
		}
	}
}

// rowAMaxN is the widest product (columns of C) whose A the row-A kernel
// reads in place. Packing A costs one pass over the mb×kb block per B
// panel of nc columns, spread over nb/nr tiles: at a few tiles it is as
// dear as the products, at hundreds it is noise, and packed panels stream
// better from L2 than rows lda apart.
var rowAMaxN = 512 // a variable: TestGemmRowA turns the row-A path off

// macroKernelRowA is macroKernel with A read in place: full tiles of mr
// rows go to kr.fnRowA at the rows of a (a[i*lda+p] for the block's row i
// and column p); the last tile, with fewer rows, to kr.fnRowAEdge of its
// rows, or, without one, packed into ap (its missing rows zero) and
// computed by kr.fn into tile.
func macroKernelRowA[T Float](kr *gemmKernel[T], mb, nb, kb int, alpha T, a []T, lda int, ap, bp []T, beta T, c []T, ldc int, tile []T) {
	mr, nr := kr.mr, kr.nr
	full := mb / mr * mr
	edge := kr.fnRowAEdge[mb-full]
	if full < mb && edge == nil {
		kr.packTrans(ap[:mr*kb], a[full*lda:], lda, mb-full, kb, mr)
	}
	// rows outer, panels inner: the mr rows of A, read in place with a
	// stride, stay in L1 across the panels of B, which stream from the
	// packed block in order
	for ir := 0; ir < mb; ir += mr {
		mm := min(mr, mb-ir)
		jr := 0
		if np := nb / nr; mm == mr && np > 1 && kr.fnRowAP != nil {
			// the whole panels in one call; it reads rows ir..ir+mr-1
			// of a, kb each, the np panels of bp, and writes mr rows
			// of np·nr columns of c, unchecked
			_ = a[(ir+mr-1)*lda+kb-1]
			_ = bp[np*nr*kb-1]
			_ = c[(ir+mr-1)*ldc+np*nr-1]
			kr.fnRowAP(kb, a[ir*lda:], lda, bp, c[ir*ldc:], ldc, alpha, beta, np)
			jr = np * nr
		}
		for ; jr < nb; jr += nr {
			nn := min(nr, nb-jr)
			bpan := bp[jr*kb : (jr+nr)*kb]
			cc := c[ir*ldc+jr:]
			if mm == mr && nn == nr {
				// the kernel reads rows ir..ir+mr-1 of a, kb each, unchecked
				_ = a[(ir+mr-1)*lda+kb-1]
				kr.fnRowA(kb, a[ir*lda:], lda, bpan, cc, ldc, alpha, beta)
				continue
			}
			switch {
			case mm == mr:
				_ = a[(ir+mr-1)*lda+kb-1]
				kr.fnRowA(kb, a[ir*lda:], lda, bpan, tile, nr, 1, 0)
			case edge != nil && nn == nr:
				_ = a[(ir+mm-1)*lda+kb-1]
				edge(kb, a[ir*lda:], lda, bpan, cc, ldc, alpha, beta)
				continue
			case edge != nil:
				_ = a[(ir+mm-1)*lda+kb-1]
				edge(kb, a[ir*lda:], lda, bpan, tile, nr, 1, 0)
			default:
				kr.fn(kb, ap[:mr*kb], bpan, tile, nr, 1, 0)
			}
			for i := 0; i < mm; i++ {
				row := cc[i*ldc : i*ldc+nn]
				t := tile[i*nr : i*nr+nn]
				if beta == 0 {
					for j := range row {
						row[j] = alpha * t[j]
					}
				} else {
					for j := range row {
						row[j] = alpha*t[j] + beta*row[j]
					}
				}
			}
		}
	}
}

// macroKernel multiplies a packed mb×kb block of op(A) by a packed kb×nb
// panel of op(B) into C, one mr×nr tile at a time. The B micro-panel of the
// outer loop stays in L1 while the A micro-panels stream from L2.
func macroKernel[T Float](kr *gemmKernel[T], mb, nb, kb int, alpha T, ap, bp []T, beta T, c []T, ldc int, tile []T) {
	mr, nr := kr.mr, kr.nr
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		bpan := bp[jr*kb : (jr+nr)*kb]
		for ir := 0; ir < mb; ir += mr {
			mm := min(mr, mb-ir)
			apan := ap[ir*kb : (ir+mr)*kb]
			cc := c[ir*ldc+jr:]
			if mm == mr && nn == nr {
				kr.fn(kb, apan, bpan, cc, ldc, alpha, beta)
				continue
			}
			// Edge tile: compute the whole tile (the packed panels are
			// zero-padded) into a buffer and copy out the part in C.
			kr.fn(kb, apan, bpan, tile, nr, 1, 0)
			for i := 0; i < mm; i++ {
				row := cc[i*ldc : i*ldc+nn]
				t := tile[i*nr : i*nr+nn]
				if beta == 0 {
					for j := range row {
						row[j] = alpha * t[j]
					}
				} else {
					for j := range row {
						row[j] = alpha*t[j] + beta*row[j]
					}
				}
			}
		}
	}
}

// packA copies the mb×kb block of op(A) at (i0, p0) into dst as micro-panels
// of mr rows: element (i, p) of the block goes to
// dst[(i/mr)*mr*kb + p*mr + i%mr]. Rows past mb are zero.
func packA[T Float](kr *gemmKernel[T], dst []T, trans bool, a []T, lda, i0, p0, mb, kb int) {
	mr := kr.mr
	if trans {
		// op(A)(i, p) = a[p*lda+i]: row p of the stored matrix holds a
		// run of i, which goes across the micro-panels.
		kr.packCopy(dst, a[p0*lda+i0:], lda, kb, mb, mr)
		return
	}
	for ir := 0; ir < mb; ir += mr {
		mm := min(mr, mb-ir)
		kr.packTrans(dst[ir*kb:(ir+mr)*kb], a[(i0+ir)*lda+p0:], lda, mm, kb, mr)
	}
}

// packB copies the kb×nb panel of op(B) at (p0, j0) into dst as micro-panels
// of nr columns: element (p, j) of the panel goes to
// dst[(j/nr)*nr*kb + p*nr + j%nr]. Columns past nb are zero.
func packB[T Float](kr *gemmKernel[T], dst []T, trans bool, b []T, ldb, p0, j0, kb, nb int) {
	nr := kr.nr
	if !trans {
		// op(B)(p, j) = b[p*ldb+j]: row p of B is a run of j, which goes
		// across the micro-panels.
		kr.packCopy(dst, b[p0*ldb+j0:], ldb, kb, nb, nr)
		return
	}
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		kr.packTrans(dst[jr*kb:(jr+nr)*kb], b[(j0+jr)*ldb+p0:], ldb, nn, kb, nr)
	}
}

// packCopyGeneric copies the rows of a matrix into micro-panels of nr
// columns: d[(j/nr)*nr*rows + q*nr + j%nr] = src[q*ld+j] for q < rows,
// j < w, and zero for w ≤ j < nr·⌈w/nr⌉.
func packCopyGeneric[T Float](d, src []T, ld, rows, w, nr int) {
	for q := 0; q < rows; q++ {
		s := src[q*ld:][:w]
		for jp := 0; jp < w; jp += nr {
			n := min(nr, w-jp)
			dq := d[jp*rows+q*nr:][:nr]
			copy(dq, s[jp:jp+n])
			clear(dq[n:])
		}
	}
}

// packTransGeneric transposes rows of a matrix into a packed panel:
// d[p*w+i] = src[i*ld+p] for i < r, p < kb, and d[p*w+i] = 0 for r ≤ i < w.
// Four rows at a time keep four read streams and write whole runs of d.
func packTransGeneric[T Float](d, src []T, ld, r, kb, w int) {
	i := 0
	for ; i+4 <= r; i += 4 {
		s0 := src[i*ld:][:kb]
		s1 := src[(i+1)*ld:][:kb]
		s2 := src[(i+2)*ld:][:kb]
		s3 := src[(i+3)*ld:][:kb]
		for p := range s0 {
			q := d[p*w+i:][:4]
			q[0], q[1], q[2], q[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; i < r; i++ {
		s := src[i*ld:][:kb]
		for p, v := range s {
			d[p*w+i] = v
		}
	}
	if r < w {
		for p := 0; p < kb; p++ {
			clear(d[p*w+r : (p+1)*w])
		}
	}
}

// scaleMatrix sets C = beta·C, writing zeros when beta is 0.
func scaleMatrix[T Float](m, n int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// blockSize splits total into equal blocks of at most limit (rounded up to a
// multiple of mult), so that the last block is not a sliver.
func blockSize(total, limit, mult int) int {
	nb := ceilDiv(total, limit)
	return ceilDiv(ceilDiv(total, nb), mult) * mult
}

// workspace holds the packing buffers of one goroutine.
type workspace[T Float] struct {
	a, b, tile []T
}

// pools caches workspaces per element size (4 and 8 bytes).
var pools [2]sync.Pool

func poolOf[T Float]() *sync.Pool {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return &pools[0]
	}
	return &pools[1]
}

func getWorkspace[T Float](na, nb, nt int) *workspace[T] {
	ws, _ := poolOf[T]().Get().(*workspace[T])
	if ws == nil {
		ws = new(workspace[T])
	}
	if len(ws.a) < na {
		ws.a = alignedSlice[T](na)
	}
	if len(ws.b) < nb {
		ws.b = alignedSlice[T](nb)
	}
	if len(ws.tile) < nt {
		ws.tile = alignedSlice[T](nt)
	}
	return ws
}

func putWorkspace[T Float](ws *workspace[T]) { poolOf[T]().Put(ws) }

// alignedSlice returns a slice of n elements starting on a 64-byte (cache
// line) boundary, so that vector loads of packed panels never split lines.
func alignedSlice[T Float](n int) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	pad := 64 / size
	s := make([]T, n+pad)
	off := int(uintptr(unsafe.Pointer(&s[0]))%64) / size
	if off != 0 {
		off = pad - off
	}
	return s[off : off+n : off+n]
}
