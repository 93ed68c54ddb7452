package nn

import "fmt"

// PairPool pools a cross-encoder's pair sequence "query SEP code" into one
// feature vector: the unit mean of the query's token vectors times the unit
// mean of the code's, element by element. For sequence b with nq[b] query
// tokens (positions 0..nq−1), the separator at nq, and code at the valid
// positions after it,
//
//	q = (1/nq) Σ_{t<nq} x[b,t,:]      c = (1/nc) Σ_{code t} x[b,t,:]
//	u = q / ‖q‖                        v = c / ‖c‖
//	f[b,:] = u ⊙ v
//
// so that a linear score w·f = Σ_j w_j u_j v_j is a weighted cosine of the
// two sides, the form of a dual encoder's similarity, but of token vectors
// that may have attended to both sides. With w = 1/τ it is exactly a dual
// encoder's score when the two sides have not met: a reranker that starts
// from a dual encoder starts from its ranking, where the mean of the whole
// sequence would start from none (its query part is the same for every
// candidate of a query, and only the code part would differ).
//
// A side's norm below 1e-12 is taken as 1e-12, as F.normalize does.
type PairPool[T Float] struct {
	D int // vector width
}

// PairPoolActs holds what Forward saves for Backward.
type PairPoolActs[T Float] struct {
	U, V   []T // unit side means (B, D)
	NQ, NC []T // the side means' norms (B)
}

// NewActs returns activations for B sequences.
func (p PairPool[T]) NewActs(B int) *PairPoolActs[T] {
	return &PairPoolActs[T]{U: make([]T, B*p.D), V: make([]T, B*p.D), NQ: make([]T, B), NC: make([]T, B)}
}

const pairEps = 1e-12

// Forward writes f (B, D) for token vectors x (B, Tn, D), query lengths nq
// (B) and token validity valid (B·Tn; nil: every token valid), saving the
// side means in a. f is overwritten.
//
// It panics if a sequence has no query or no code token, D or Tn is not
// positive, or a slice has the wrong length.
func (p PairPool[T]) Forward(f []T, a *PairPoolActs[T], x []T, nq []int, valid []bool, B, Tn int) {
	p.check("PairPool.Forward", a, f, x, nq, valid, B, Tn)
	D := p.D
	norm := L2Norm[T]{D: D, Eps: pairEps}
	for b := range B {
		qb, cb, fb := a.U[b*D:(b+1)*D], a.V[b*D:(b+1)*D], f[b*D:(b+1)*D]
		clear(qb)
		clear(cb)
		nc := 0
		// pass 1: the sums of each side's rows
		for t := range Tn {
			xt := x[(b*Tn+t)*D : (b*Tn+t+1)*D][:D]
			switch {
			case t < nq[b]:
				for j, v := range xt {
					qb[j] += v
				}
			case t > nq[b] && (valid == nil || valid[b*Tn+t]):
				nc++
				for j, v := range xt {
					cb[j] += v
				}
			}
		}
		// pass 2: the means, at unit length
		iq, ic := 1/T(nq[b]), 1/T(nc)
		for j := range fb {
			qb[j] *= iq
			cb[j] *= ic
		}
		norm.Forward(qb, a.NQ[b:b+1], qb, 1)
		norm.Forward(cb, a.NC[b:b+1], cb, 1)
		// pass 3: their product
		for j := range fb {
			fb[j] = qb[j] * cb[j]
		}
	}
}

// Backward adds the gradient with respect to x into dx (B, Tn, D), given
// df = ∂L/∂f (B, D) and the activations of Forward:
//
//	du = df ⊙ v,  dv = df ⊙ u
//	dq = (du − u (u·du)) / ‖q‖,  dc = (dv − v (v·dv)) / ‖c‖      (L2Norm's backward)
//	dx[b,t,:] += dq/nq (query tokens), dc/nc (code tokens); 0 at the separator and padding
//
// Backward adds into dx; callers zero it.
//
// It panics on the conditions of Forward.
func (p PairPool[T]) Backward(dx, df []T, nq []int, valid []bool, B, Tn int, a *PairPoolActs[T]) {
	p.check("PairPool.Backward", a, df, dx, nq, valid, B, Tn)
	D := p.D
	norm := L2Norm[T]{D: D, Eps: pairEps}
	du, dv, dq, dc := make([]T, D), make([]T, D), make([]T, D), make([]T, D)
	for b := range B {
		nc := 0
		for t := nq[b] + 1; t < Tn; t++ {
			if valid == nil || valid[b*Tn+t] {
				nc++
			}
		}
		// forward was: f = u ⊙ v
		ub, vb, dfb := a.U[b*D:(b+1)*D], a.V[b*D:(b+1)*D], df[b*D:(b+1)*D]
		for j, g := range dfb {
			du[j] = g * vb[j]
			dv[j] = g * ub[j]
		}
		// forward was: u = q/‖q‖, v = c/‖c‖
		clear(dq)
		clear(dc)
		norm.Backward(dq, du, ub, a.NQ[b:b+1], 1)
		norm.Backward(dc, dv, vb, a.NC[b:b+1], 1)
		// forward was: q, c = the means of their sides
		iq, ic := 1/T(nq[b]), 1/T(nc)
		for j := range dq {
			dq[j] *= iq
			dc[j] *= ic
		}
		for t := range Tn {
			var d []T
			switch {
			case t < nq[b]:
				d = dq
			case t > nq[b] && (valid == nil || valid[b*Tn+t]):
				d = dc
			default:
				continue // the separator and padding: not pooled
			}
			dxt := dx[(b*Tn+t)*D : (b*Tn+t+1)*D][:D]
			for j, v := range d {
				dxt[j] += v
			}
		}
	}
}

func (p PairPool[T]) check(op string, a *PairPoolActs[T], f, x []T, nq []int, valid []bool, B, Tn int) {
	D := p.D
	switch {
	case D < 1 || Tn < 1 || B < 0:
		panic(fmt.Sprintf("nn: %s: D = %d, Tn = %d, B = %d: want D, Tn >= 1 and B >= 0", op, D, Tn, B))
	case len(f) != B*D || len(x) != B*Tn*D || len(nq) != B:
		panic(fmt.Sprintf("nn: %s: %d feature values, %d token values, %d query lengths: want B*D = %d, B*Tn*D = %d, B = %d",
			op, len(f), len(x), len(nq), B*D, B*Tn*D, B))
	case valid != nil && len(valid) != B*Tn:
		panic(fmt.Sprintf("nn: %s: len(valid) = %d, want B*Tn = %d", op, len(valid), B*Tn))
	case len(a.U) != B*D || len(a.V) != B*D || len(a.NQ) != B || len(a.NC) != B:
		panic(fmt.Sprintf("nn: %s: activations of the wrong size (see NewActs)", op))
	}
	for b := range B {
		nc := 0
		for t := nq[b] + 1; t < Tn; t++ {
			if valid == nil || valid[b*Tn+t] {
				nc++
			}
		}
		if nq[b] < 1 || nq[b]+1 >= Tn || nc == 0 || valid != nil && !valid[b*Tn+nq[b]-1] {
			panic(fmt.Sprintf("nn: %s: sequence %d: %d query tokens and %d code tokens in %d: want at least one of each around the separator", op, b, nq[b], nc, Tn))
		}
	}
}
