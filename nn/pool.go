package nn

import (
	"fmt"
	"math"
)

// MeanPool averages the vectors of the valid tokens of each sequence: the
// pooling of sentence-transformers' default dual encoders.
type MeanPool[T Float] struct {
	D int // vector width
}

// Forward writes the mean of each sequence's valid token vectors into out
// (B, D), for x (B, Tn, D) row-major and valid (B·Tn; nil: every token
// valid):
//
//	n_b = |{t : valid[b·Tn+t]}|      out[b,:] = (1/n_b) Σ_{t valid} x[b,t,:]
//
// A sequence without a valid token gets the zero vector. out is overwritten.
//
// It panics if D or Tn is not positive, B is negative, or a slice has the
// wrong length.
func (p MeanPool[T]) Forward(out, x []T, valid []bool, B, Tn int) {
	p.check("MeanPool.Forward", "out", out, x, valid, B, Tn)
	D := p.D
	for b := range B {
		ob := out[b*D : (b+1)*D]
		clear(ob)
		n := 0
		// pass 1: the sum of the valid rows
		for t := range Tn {
			if valid != nil && !valid[b*Tn+t] {
				continue
			}
			n++
			xt := x[(b*Tn+t)*D : (b*Tn+t+1)*D][:len(ob)]
			for j, v := range xt {
				ob[j] += v
			}
		}
		if n == 0 {
			continue
		}
		// pass 2: divide by the count
		inv := 1 / T(n)
		for j := range ob {
			ob[j] *= inv
		}
	}
}

// Backward adds the gradient with respect to x into dx (B, Tn, D), given
// dout = ∂L/∂out (B, D):
//
//	dx[b,t,:] += dout[b,:] / n_b   for valid t;   padding gets exactly zero
//
// The counts n_b are taken again from valid (a count, not a recomputed
// value). Backward adds into dx; callers zero it.
//
// It panics if D or Tn is not positive, B is negative, or a slice has the
// wrong length.
func (p MeanPool[T]) Backward(dx, dout []T, valid []bool, B, Tn int) {
	p.check("MeanPool.Backward", "dout", dout, dx, valid, B, Tn)
	D := p.D
	for b := range B {
		n := 0
		for t := range Tn {
			if valid == nil || valid[b*Tn+t] {
				n++
			}
		}
		if n == 0 {
			continue
		}
		// forward was: out[b,:] = (1/n_b) Σ_{t valid} x[b,t,:]
		inv := 1 / T(n)
		db := dout[b*D : (b+1)*D]
		for t := range Tn {
			if valid != nil && !valid[b*Tn+t] {
				continue
			}
			dxt := dx[(b*Tn+t)*D : (b*Tn+t+1)*D][:len(db)]
			for j, g := range db {
				dxt[j] += g * inv
			}
		}
	}
}

func (p MeanPool[T]) check(op, outName string, out, x []T, valid []bool, B, Tn int) {
	switch {
	case p.D < 1 || Tn < 1 || B < 0:
		panic(fmt.Sprintf("nn: %s: D = %d, Tn = %d, B = %d: want D, Tn >= 1 and B >= 0", op, p.D, Tn, B))
	case len(out) != B*p.D:
		panic(fmt.Sprintf("nn: %s: len(%s) = %d, want B*D = %d", op, outName, len(out), B*p.D))
	case len(x) != B*Tn*p.D:
		panic(fmt.Sprintf("nn: %s: token tensor has %d values, want B*Tn*D = %d", op, len(x), B*Tn*p.D))
	case valid != nil && len(valid) != B*Tn:
		panic(fmt.Sprintf("nn: %s: len(valid) = %d, want B*Tn = %d", op, len(valid), B*Tn))
	}
}

// L2Norm scales each row to unit Euclidean length, as PyTorch's
// F.normalize(x, dim=-1, eps=Eps): the divisor is max(‖x‖, Eps), so a zero
// row stays zero instead of becoming 0/0.
type L2Norm[T Float] struct {
	D   int // row width
	Eps T   // smallest divisor (PyTorch: 1e-12)
}

// Forward writes y[i,:] = x[i,:] / max(‖x[i,:]‖, Eps) for the n rows of x
// (n, D) and saves norm[i] = ‖x[i,:]‖ (n) for the backward. The square sum
// is accumulated in float64. y may be x itself.
//
// It panics if D is not positive, Eps is negative or NaN, n is negative, or a
// slice has the wrong length.
func (l L2Norm[T]) Forward(y, norm, x []T, n int) {
	l.check("L2Norm.Forward", y, norm, x, n)
	D := l.D
	for i := range n {
		xi := x[i*D : (i+1)*D]
		yi := y[i*D : (i+1)*D][:len(xi)]
		var ss float64
		for _, v := range xi {
			ss += float64(v) * float64(v)
		}
		r := T(math.Sqrt(ss))
		norm[i] = r
		div := max(r, l.Eps)
		for j, v := range xi {
			yi[j] = v / div // a division, as F.normalize: 3/5 is 0.6 exactly, 3·(1/5) is not
		}
	}
}

// Backward adds the gradient with respect to x into dx (n, D), given
// dy = ∂L/∂y (n, D) and the y and norm saved by Forward. Where ‖x‖ > Eps,
//
//	dx += (dy − y·(y·dy)) / ‖x‖
//
// the projection of dy onto the plane orthogonal to y: moving x along
// itself does not move y. Where ‖x‖ ≤ Eps the divisor is the constant Eps
// and dx += dy/Eps. Backward adds into dx; callers zero it.
//
// It panics if D is not positive, Eps is negative or NaN, n is negative, or a
// slice has the wrong length.
func (l L2Norm[T]) Backward(dx, dy, y, norm []T, n int) {
	l.check("L2Norm.Backward", dy, norm, y, n)
	if len(dx) != n*l.D {
		panic(fmt.Sprintf("nn: L2Norm.Backward: len(dx) = %d, want n*D = %d", len(dx), n*l.D))
	}
	D := l.D
	for i := range n {
		yi := y[i*D : (i+1)*D]
		dyi := dy[i*D : (i+1)*D][:len(yi)]
		dxi := dx[i*D : (i+1)*D][:len(yi)]
		r := norm[i]
		if r <= l.Eps {
			// forward was: y = x / Eps, a constant divisor
			for j, g := range dyi {
				dxi[j] += g / l.Eps
			}
			continue
		}
		// forward was: y = x/r with r = ‖x‖, ∂r/∂x = y; so
		// ∂L/∂x = dy/r − (dy·x)/r² · y = (dy − y(y·dy))/r
		var ydy T
		for j, v := range yi {
			ydy += v * dyi[j]
		}
		inv := 1 / r
		for j, v := range yi {
			dxi[j] += (dyi[j] - v*ydy) * inv
		}
	}
}

func (l L2Norm[T]) check(op string, y, norm, x []T, n int) {
	switch {
	case l.D < 1 || n < 0:
		panic(fmt.Sprintf("nn: %s: D = %d, n = %d: want D >= 1 and n >= 0", op, l.D, n))
	case !(l.Eps >= 0):
		panic(fmt.Sprintf("nn: %s: Eps = %v, want >= 0", op, l.Eps))
	case len(y) != n*l.D || len(x) != n*l.D:
		panic(fmt.Sprintf("nn: %s: rows of %d and %d values, want n*D = %d", op, len(y), len(x), n*l.D))
	case len(norm) != n:
		panic(fmt.Sprintf("nn: %s: len(norm) = %d, want n = %d", op, len(norm), n))
	}
}
