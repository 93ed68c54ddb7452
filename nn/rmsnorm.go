package nn

import (
	"fmt"
	"math"
)

// RMSNorm normalises each row of width D by its root mean square and scales
// it by a learned weight w (D), as Llama's RMSNorm (Hugging Face's
// input_layernorm.weight, post_attention_layernorm.weight, norm.weight). Eps
// is added to the mean square before the square root; Llama uses 1e-5 or
// 1e-6.
type RMSNorm[T Float] struct {
	D   int // row width
	Eps T   // ε, added under the square root
}

// Forward normalises each row of x (n, D) into y (n, D):
//
//	r[i] = sqrt(mean_j x[i,j]² + ε)      y[i,j] = w[j]·x[i,j] / r[i]
//
// and saves rstd[i] = 1/r[i] (n) for the backward. y may be x itself (the
// update is elementwise once rstd is known), but Backward needs x, so
// normalise in place only when no gradient is wanted.
//
// It panics if D is not positive, Eps is negative or NaN, n is negative, or a
// slice has the wrong length.
func (m RMSNorm[T]) Forward(y, rstd, x, w []T, n int) {
	m.check("RMSNorm.Forward", "y", y, x, w, rstd, n)
	D := m.D
	for i := range n {
		xi := x[i*D : (i+1)*D]
		yi := y[i*D : (i+1)*D]
		// pass 1: the mean square; ε goes under the root, so that an all-zero
		// row gives y = 0 instead of 0/0
		var ss T
		for _, v := range xi {
			ss += v * v
		}
		s := T(1 / math.Sqrt(float64(ss/T(D)+m.Eps)))
		rstd[i] = s
		// pass 2: scale
		yi, wi := yi[:len(xi)], w[:len(xi)]
		for j, v := range xi {
			yi[j] = wi[j] * v * s
		}
	}
}

// Backward adds the gradients of a scalar loss into dx (n, D) and dw (D),
// given dy = ∂L/∂y (n, D), the input x and the rstd saved by Forward. With
// g = dy ⊙ w and r = 1/rstd, row by row,
//
//	dx += g/r − x·mean(g ⊙ x)/r³      dw += Σ_i dy[i,:] ⊙ x[i,:] / r[i]
//
// The second term of dx is the feedback through r, which depends on every
// element of the row; treating r as a constant drops it. Backward adds into
// dx and dw; callers zero them. The gradient buffers must not overlap the
// inputs.
//
// It panics if D is not positive, Eps is negative or NaN, n is negative, or a
// slice has the wrong length.
func (m RMSNorm[T]) Backward(dx, dw, dy, x, w, rstd []T, n int) {
	m.check("RMSNorm.Backward", "dy", dy, x, w, rstd, n)
	mustLen("RMSNorm.Backward", "dx", len(dx), n*m.D, "n*D")
	mustLen("RMSNorm.Backward", "dw", len(dw), m.D, "D")
	D := m.D
	for i := range n {
		xi := x[i*D : (i+1)*D]
		dyi := dy[i*D : (i+1)*D][:len(xi)]
		dxi := dx[i*D : (i+1)*D][:len(xi)]
		wi, dwi := w[:len(xi)], dw[:len(xi)]
		s := rstd[i]
		// forward was: y[i,j] = w[j]·x[i,j]·s with s = (mean_k x[i,k]² + ε)^(−1/2),
		// so ∂s/∂x[i,j] = −x[i,j]·s³/D.
		// pass 1: mean(g ⊙ x), the weight of the feedback through s
		var gx T
		for j, v := range xi {
			gx += dyi[j] * wi[j] * v
		}
		c := gx / T(D) * s * s * s
		// pass 2: direct term g·s, the feedback −x·mean(g⊙x)·s³, and dw
		for j, v := range xi {
			dxi[j] += dyi[j]*wi[j]*s - v*c
			dwi[j] += dyi[j] * v * s // ∂y[i,j]/∂w[j] = x[i,j]·s
		}
	}
}

// check validates the sizes shared by Forward and Backward.
func (m RMSNorm[T]) check(op, outName string, out, x, w, rstd []T, n int) {
	mustPositive(op, "D", m.D)
	if !(m.Eps >= 0) {
		panic(fmt.Sprintf("nn: %s: Eps = %v, want >= 0", op, m.Eps))
	}
	mustRows(op, n)
	mustLen(op, outName, len(out), n*m.D, "n*D")
	mustLen(op, "x", len(x), n*m.D, "n*D")
	mustLen(op, "w", len(w), m.D, "D")
	mustLen(op, "rstd", len(rstd), n, "n")
}
