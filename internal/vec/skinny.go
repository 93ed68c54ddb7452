package vec

import "sync"

// skinnyRows is the largest number of rows (or, for the dot form, columns)
// of C that gemm computes without packing.
//
// Packing copies op(A) and op(B) into panels so that the micro-kernel can
// reuse each loaded element many times; with a handful of rows there is
// nothing to reuse, and the copy costs as much as the product. This is
// the shape of decoding: one token (or a few: a GQA group, a speculative
// chunk) against a weight matrix or a key cache.
const skinnyRows = 8

// PackedMinRows is the fewest rows of a product C = alpha·A·op(B) that
// Gemm and GemmSerial compute with the packed kernels whenever C also has
// at least this many columns. There every element of C is the same bits
// whatever the other rows (each is summed in the order of k, in blocks that
// depend on k alone), so a caller that needs only some rows of a product may
// compute at least this many of them and get exactly the bits of the whole
// product's rows. Fewer rows take the skinny forms, which sum another way.
const PackedMinRows = skinnyRows + 1

// skinnyForm says how a skinny product is computed, or 0 if it is not
// skinny:
//
//	skinnyDot:  c[i][j] = alpha·Dot(row i of A, row j of B) + beta·c[i][j]
//	            (A not transposed, B transposed: both operands by rows;
//	            k at least skinnyRows, or the calls cost more than the sums)
//	skinnyAxpy: row i of C = beta·(row i of C) + Σ_p (alpha·opA(i, p))·(row p of B)
//	            (B not transposed: its rows are read once, in order)
func skinnyForm(transA, transB bool, m, n, k int) int {
	switch {
	case !transA && transB && (m <= skinnyRows || n <= skinnyRows) && k >= skinnyRows:
		return skinnyDot
	case !transB && m <= skinnyRows:
		return skinnyAxpy
	}
	return 0
}

const (
	skinnyDot = 1 + iota
	skinnyAxpy
)

// skinnyChunk is the number of columns of C per piece of a parallel skinny
// product (a multiple of every vector width, so that pieces meet on vector
// boundaries).
const skinnyChunk = 256

// gemmSkinny computes C = alpha·op(A)·op(B) + beta·C in the given form,
// splitting the columns of C (the rows of C for the dot form when C is tall)
// across goroutines for large products unless procs is 1. Every element is computed by the same
// operations whatever the split: the result does not depend on the number of
// goroutines.
func gemmSkinny[T Float](form, procs int, transA bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	t := skinnyPool[T]().Get().(*skinnyTask[T])
	*t = skinnyTask[T]{form: form, transA: transA, m: m, n: n, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	t.byRows = form == skinnyDot && m > n
	span := n
	if t.byRows {
		span = m
	}
	t.chunk = skinnyChunk
	if form == skinnyDot {
		t.chunk = skinnyChunk / 8 // a dot product per element: fewer elements per piece
	}
	pieces := (span + t.chunk - 1) / t.chunk
	if m*n*k < parallelMin || procs == 1 {
		t.chunk, pieces = span, 1
	}
	Parallel(pieces, t)
	*t = skinnyTask[T]{}
	skinnyPool[T]().Put(t)
}

// skinnyTask is one skinny product, cut into pieces of chunk columns (or
// rows, when byRows) of C.
type skinnyTask[T Float] struct {
	form          int
	transA        bool
	byRows        bool
	m, n, k       int
	alpha, beta   T
	a, b, c       []T
	lda, ldb, ldc int
	chunk         int
}

var skinnyPools = [2]sync.Pool{
	{New: func() any { return new(skinnyTask[float32]) }},
	{New: func() any { return new(skinnyTask[float64]) }},
}

func skinnyPool[T Float]() *sync.Pool {
	if is32[T]() {
		return &skinnyPools[0]
	}
	return &skinnyPools[1]
}

func (t *skinnyTask[T]) Run(piece int) {
	lo := piece * t.chunk
	if t.byRows {
		hi := min(lo+t.chunk, t.m)
		t.dot(lo, hi, 0, t.n)
		return
	}
	hi := min(lo+t.chunk, t.n)
	if t.form == skinnyDot {
		t.dot(0, t.m, lo, hi)
	} else {
		t.axpy(lo, hi)
	}
}

// skinnyBlock is the number of rows of B a skinny product takes at a time:
// they stay in cache while every row of A (at most skinnyRows) meets them.
const skinnyBlock = 64

// dot computes the block rows [i0, i1) × columns [j0, j1) of C by dot
// products (dots), skinnyBlock columns at a time, so that a row of B is read
// from memory once for all rows of A.
func (t *skinnyTask[T]) dot(i0, i1, j0, j1 int) {
	var tmp [skinnyBlock]T
	direct := t.alpha == 1 && t.beta == 0
	k := t.k
	for jb := j0; jb < j1; jb += skinnyBlock {
		bn := min(skinnyBlock, j1-jb)
		b := t.b[jb*t.ldb:]
		for i := i0; i < i1; i++ {
			ai := t.a[i*t.lda : i*t.lda+k]
			row := t.c[i*t.ldc+jb : i*t.ldc+jb+bn]
			if direct {
				dots(ai, b, t.ldb, row)
				continue
			}
			s := tmp[:bn]
			dots(ai, b, t.ldb, s)
			for x := range row {
				if t.beta == 0 {
					row[x] = t.alpha * s[x]
				} else {
					row[x] = t.alpha*s[x] + t.beta*row[x]
				}
			}
		}
	}
}

// axpy computes columns [j0, j1) of every row of C: scale them by beta,
// then add the rows of B, each weighted by alpha times the matching element
// of op(A), in the order of the rows of B (axpys), skinnyBlock rows at a
// time, so that each is read from memory once for all rows of C.
func (t *skinnyTask[T]) axpy(j0, j1 int) {
	for i := range t.m {
		row := t.c[i*t.ldc+j0 : i*t.ldc+j1]
		switch t.beta {
		case 0:
			clear(row)
		case 1:
		default:
			for x := range row {
				row[x] *= t.beta
			}
		}
	}
	var coef [skinnyBlock]T
	for p0 := 0; p0 < t.k; p0 += skinnyBlock {
		p1 := min(p0+skinnyBlock, t.k)
		b := t.b[p0*t.ldb+j0:]
		for i := range t.m {
			var alphas []T // alpha·op(A)(i, p) for p in [p0, p1)
			if !t.transA && t.alpha == 1 {
				alphas = t.a[i*t.lda+p0 : i*t.lda+p1]
			} else {
				alphas = coef[:p1-p0]
				for p := p0; p < p1; p++ {
					if t.transA {
						alphas[p-p0] = t.alpha * t.a[p*t.lda+i]
					} else {
						alphas[p-p0] = t.alpha * t.a[i*t.lda+p]
					}
				}
			}
			axpys(alphas, b, t.ldb, t.c[i*t.ldc+j0:i*t.ldc+j1])
		}
	}
}
