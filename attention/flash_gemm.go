package attention

import (
	"github.com/attnlab/attnlab/internal/vec"
)

// The tile-level matrix products of the fused attention. Each is one small
// function over packed row-major tiles, so that it can be replaced by a
// SIMD GEMM without touching the tile loops. They are plain Go written for
// the compiler: every row is re-sliced to the common length before the inner
// loop, which lets the compiler prove the indices in range and drop the
// bounds checks, and the inner loops carry several independent sums (or four
// coefficients) per step, so that the latency of one addition does not
// serialise the loop.
//
// Without FMA (GOAMD64=v1, the default) a scalar multiply-add costs a
// multiplication and an addition. The dot-product form (gemmNT) is bound by
// the latency of its running sums, so it keeps six of them going; the
// accumulating forms (gemmNN, gemmTN) have no such chain and are bound by
// loads and stores, so they reuse each loaded row of b for two rows of c.

// gemmNT computes, overwriting c,
//
//	c = alpha · a bᵀ    a is (m, k), b is (n, k), c is (m, n)
//
// It is S = Q Kᵀ · scale and dP = dO Vᵀ: each element is a dot product of
// two contiguous rows, summed with one accumulator in the order of k, so
// every blocking gives the same bits. Blocks of 2 rows of a × 3 rows of b:
// six independent sums per step from five loads, which fits the registers
// (2 × 4 spills) and keeps the adder busy while earlier sums complete.
func gemmNT[T Float](c, a, b []T, m, n, k int, alpha T) {
	if vecGemm(false, true, m, n, k, alpha, a, k, b, k, 0, c, n) {
		return
	}
	i := 0
	for ; i+2 <= m; i += 2 {
		a0 := a[i*k : i*k+k]
		a1 := a[(i+1)*k : (i+1)*k+k]
		a1 = a1[:len(a0)]
		c0 := c[i*n : i*n+n]
		c1 := c[(i+1)*n : (i+1)*n+n]
		c1 = c1[:len(c0)]
		j := 0
		for ; j+3 <= n; j += 3 {
			b0 := b[j*k : j*k+k]
			b1 := b[(j+1)*k : (j+1)*k+k]
			b2 := b[(j+2)*k : (j+2)*k+k]
			b0, b1, b2 = b0[:len(a0)], b1[:len(a0)], b2[:len(a0)]
			var s00, s01, s02, s10, s11, s12 T
			for x, u := range a0 {
				w := a1[x]
				s00 += u * b0[x]
				s10 += w * b0[x]
				s01 += u * b1[x]
				s11 += w * b1[x]
				s02 += u * b2[x]
				s12 += w * b2[x]
			}
			c0[j], c0[j+1], c0[j+2] = alpha*s00, alpha*s01, alpha*s02
			c1[j], c1[j+1], c1[j+2] = alpha*s10, alpha*s11, alpha*s12
		}
		for ; j < n; j++ {
			bj := b[j*k : j*k+k]
			bj = bj[:len(a0)]
			var s0, s1 T
			for x, u := range a0 {
				s0 += u * bj[x]
				s1 += a1[x] * bj[x]
			}
			c0[j], c1[j] = alpha*s0, alpha*s1
		}
	}
	if i < m {
		a0 := a[i*k : i*k+k]
		c0 := c[i*n : i*n+n]
		j := 0
		for ; j+4 <= n; j += 4 {
			b0 := b[j*k : j*k+k]
			b1 := b[(j+1)*k : (j+1)*k+k]
			b2 := b[(j+2)*k : (j+2)*k+k]
			b3 := b[(j+3)*k : (j+3)*k+k]
			b0, b1, b2, b3 = b0[:len(a0)], b1[:len(a0)], b2[:len(a0)], b3[:len(a0)]
			var s0, s1, s2, s3 T
			for x, u := range a0 {
				s0 += u * b0[x]
				s1 += u * b1[x]
				s2 += u * b2[x]
				s3 += u * b3[x]
			}
			c0[j], c0[j+1], c0[j+2], c0[j+3] = alpha*s0, alpha*s1, alpha*s2, alpha*s3
		}
		for ; j < n; j++ {
			bj := b[j*k : j*k+k]
			bj = bj[:len(a0)]
			var s T
			for x, u := range a0 {
				s += u * bj[x]
			}
			c0[j] = alpha * s
		}
	}
}

// gemmNN adds
//
//	c += a b    a is (m, k), b is (k, n), c is (m, n)
//
// in the i-k-j order: row i of c collects the rows of b weighted by row i of
// a. It is O += P V and dQ += dS K. Two rows of c and four rows of b per step:
// each loaded element of b serves two rows. Every row of c, paired or not,
// is summed in the same order (blocks of four rows of b, then the rest one by
// one), the order gemmNNSkip follows too.
func gemmNN[T Float](c, a, b []T, m, n, k int) {
	if vecGemm(false, false, m, n, k, 1, a, k, b, n, 1, c, n) {
		return
	}
	i := 0
	for ; i+2 <= m; i += 2 {
		c0 := c[i*n : i*n+n]
		c1 := c[(i+1)*n : (i+1)*n+n]
		c1 = c1[:len(c0)]
		a0 := a[i*k : i*k+k]
		a1 := a[(i+1)*k : (i+1)*k+k]
		a1 = a1[:len(a0)]
		r := 0
		for ; r+4 <= k; r += 4 {
			x0, x1, x2, x3 := a0[r], a0[r+1], a0[r+2], a0[r+3]
			y0, y1, y2, y3 := a1[r], a1[r+1], a1[r+2], a1[r+3]
			b0 := b[r*n : r*n+n]
			b1 := b[(r+1)*n : (r+1)*n+n]
			b2 := b[(r+2)*n : (r+2)*n+n]
			b3 := b[(r+3)*n : (r+3)*n+n]
			b0, b1, b2, b3 = b0[:len(c0)], b1[:len(c0)], b2[:len(c0)], b3[:len(c0)]
			for x := range c0 {
				e0, e1, e2, e3 := b0[x], b1[x], b2[x], b3[x]
				c0[x] += x0*e0 + x1*e1 + x2*e2 + x3*e3
				c1[x] += y0*e0 + y1*e1 + y2*e2 + y3*e3
			}
		}
		for ; r < k; r++ {
			x0, y0 := a0[r], a1[r]
			br := b[r*n : r*n+n]
			br = br[:len(c0)]
			for x, e := range br {
				c0[x] += x0 * e
				c1[x] += y0 * e
			}
		}
	}
	if i < m {
		axpy4(c[i*n:i*n+n], a[i*k:i*k+k], 1, b, n, k, nil)
	}
}

// gemmTN adds
//
//	c += aᵀ b    a is (k, m), b is (k, n), c is (m, n)
//
// in the i-k-j order, reading a down its columns: row i of c collects the
// rows of b weighted by column i of a. It is dV += Pᵀ dO and dK += dSᵀ Q. Two
// rows of c and four rows of b per step, summed in the order of gemmNN.
func gemmTN[T Float](c, a, b []T, m, n, k int) {
	if vecGemm(true, false, m, n, k, 1, a, m, b, n, 1, c, n) {
		return
	}
	i := 0
	for ; i+2 <= m; i += 2 {
		c0 := c[i*n : i*n+n]
		c1 := c[(i+1)*n : (i+1)*n+n]
		c1 = c1[:len(c0)]
		r := 0
		for ; r+4 <= k; r += 4 {
			x0, y0 := a[r*m+i], a[r*m+i+1]
			x1, y1 := a[(r+1)*m+i], a[(r+1)*m+i+1]
			x2, y2 := a[(r+2)*m+i], a[(r+2)*m+i+1]
			x3, y3 := a[(r+3)*m+i], a[(r+3)*m+i+1]
			b0 := b[r*n : r*n+n]
			b1 := b[(r+1)*n : (r+1)*n+n]
			b2 := b[(r+2)*n : (r+2)*n+n]
			b3 := b[(r+3)*n : (r+3)*n+n]
			b0, b1, b2, b3 = b0[:len(c0)], b1[:len(c0)], b2[:len(c0)], b3[:len(c0)]
			for x := range c0 {
				e0, e1, e2, e3 := b0[x], b1[x], b2[x], b3[x]
				c0[x] += x0*e0 + x1*e1 + x2*e2 + x3*e3
				c1[x] += y0*e0 + y1*e1 + y2*e2 + y3*e3
			}
		}
		for ; r < k; r++ {
			x0, y0 := a[r*m+i], a[r*m+i+1]
			br := b[r*n : r*n+n]
			br = br[:len(c0)]
			for x, e := range br {
				c0[x] += x0 * e
				c1[x] += y0 * e
			}
		}
	}
	if i < m {
		axpy4(c[i*n:i*n+n], a[i:], m, b, n, k, nil)
	}
}

// gemmNNSkip is gemmNN for partially visible tiles, where a holds exact
// zeros (P = 0, dS = 0) for hidden pairs. A row of b whose coefficient is 0
// is read as a row of zeros instead: 0 · 0 adds nothing, while 0 · NaN would
// let whatever a hidden row holds (an unwritten cache slot) leak into the
// result. The reference skips such terms; so does this, and since adding an
// exact zero leaves a sum unchanged, each row of c comes out bit-identical to
// gemmNN's. zero must hold n zeros.
func gemmNNSkip[T Float](c, a, b []T, m, n, k int, zero []T) {
	if finite(b[:k*n]) && vecGemm(false, false, m, n, k, 1, a, k, b, n, 1, c, n) {
		return // every row of b finite: 0 · b adds exact zeros, as skipping would
	}
	for i := range m {
		axpy4(c[i*n:i*n+n], a[i*k:i*k+k], 1, b, n, k, zero[:n])
	}
}

// gemmTNSkip is gemmTN for partially visible tiles (see gemmNNSkip): a
// padding query's row of Q or dO never reaches dK or dV.
func gemmTNSkip[T Float](c, a, b []T, m, n, k int, zero []T) {
	if finite(b[:k*n]) && vecGemm(true, false, m, n, k, 1, a, m, b, n, 1, c, n) {
		return
	}
	for i := range m {
		axpy4(c[i*n:i*n+n], a[i:], m, b, n, k, zero[:n])
	}
}

// axpy4 adds to the row c the rows of b weighted by the coefficients
// a[0], a[stride], …, a[(k−1)·stride], one per row of b (k, n), four rows per
// step in the order of gemmNN's rows. With zero not nil, a row whose
// coefficient is 0 is replaced by zero, and a block of four zeros is skipped.
func axpy4[T Float](c, a []T, stride int, b []T, n, k int, zero []T) {
	r := 0
	for ; r+4 <= k; r += 4 {
		x0, x1, x2, x3 := a[r*stride], a[(r+1)*stride], a[(r+2)*stride], a[(r+3)*stride]
		b0 := b[r*n : r*n+n]
		b1 := b[(r+1)*n : (r+1)*n+n]
		b2 := b[(r+2)*n : (r+2)*n+n]
		b3 := b[(r+3)*n : (r+3)*n+n]
		if zero != nil {
			if x0 == 0 && x1 == 0 && x2 == 0 && x3 == 0 {
				continue
			}
			if x0 == 0 {
				b0 = zero
			}
			if x1 == 0 {
				b1 = zero
			}
			if x2 == 0 {
				b2 = zero
			}
			if x3 == 0 {
				b3 = zero
			}
		}
		b0, b1, b2, b3 = b0[:len(c)], b1[:len(c)], b2[:len(c)], b3[:len(c)]
		for x := range c {
			c[x] += x0*b0[x] + x1*b1[x] + x2*b2[x] + x3*b3[x]
		}
	}
	for ; r < k; r++ {
		x0 := a[r*stride]
		if zero != nil && x0 == 0 {
			continue
		}
		br := b[r*n : r*n+n]
		br = br[:len(c)]
		for x, e := range br {
			c[x] += x0 * e
		}
	}
}

// expShift computes p[j] = exp(s[j] − shift) for a row and returns the sum of
// the results (vec.ExpShift: the vectorised exponential for float32 rows,
// math.Exp itself for float64 ones, so that the float64 path, the one every
// derivative check runs, carries no approximation of its own) and whether
// any p[j] is left non-zero. A score of −Inf (a hidden key) gives exactly 0.
//
// The callers' shift is at least the row's largest score (the running
// maximum, or the log-sum-exp), so every p[j] is at most 1. float32 results
// below flushBelow are set to 0, as a GPU kernel's flush-to-zero mode does
// for denormals: such a weight moves no float32 output or gradient (each is
// a sum of weights times values whose own rounding is 2⁻²⁴ of the largest
// term, and the row's largest weight is 1), but denormal operands cost the
// products that read P and dS a microcode assist each, and a tile with no
// weight left is skipped by the callers. ALiBi makes such tiles common (a
// slope of 1/2 puts every key more than ~90 positions back below 2⁻⁶⁴); with
// only denormals flushed (2⁻¹²⁶) dS = P ⊙ (dP − Δ) still made denormals from
// the small normal P, and unflushed the ALiBi backward ran at twice plain
// attention's time. The sum is of the unflushed values (it goes into the
// log-sum-exp).
func expShift[T Float](p, s []T, shift T) (sum T, live bool) {
	sum = vec.ExpShift(p, s, shift)
	if !vec.Is32[T]() {
		return sum, sum > 0
	}
	p = p[:len(s)]
	for x, e := range p {
		if e < flushBelow {
			p[x] = 0
		} else {
			live = true
		}
	}
	return sum, live
}

// flushBelow is the float32 weight expShift flushes to zero: 2⁻⁶⁴ of the
// row's largest, forty bits below float32's rounding.
const flushBelow = 0x1p-64

// finite reports whether x holds no NaN and no infinity.
func finite[T Float](x []T) bool {
	for _, v := range x {
		if v-v != 0 { // NaN − NaN and ∞ − ∞ are NaN; every finite v gives 0
			return false
		}
	}
	return true
}
