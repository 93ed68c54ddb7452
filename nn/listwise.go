package nn

import (
	"fmt"
	"math"
)

// Listwise is the scoring head and loss of a cross-encoder reranker. A
// cross-encoder reads a query and one candidate document as a single
// sequence and returns one number, its relevance; the head turns the
// encoder's pooled vector p of the pair into that number with a learned
// vector w (the linear scoring head of a BERT reranker [5]):
//
//	s[g,k] = w · p[g,k,:]                                          (G, K)
//
// Training groups the pairs by query: group g holds its positive at k = 0
// and K−1 hard negatives (documents a first-stage retriever ranks high but
// that are not the answer). The loss is the softmax cross-entropy of each
// group against its positive, averaged over groups (the localised
// contrastive estimation of [6]):
//
//	L = (1/G) Σ_g ( log Σ_{k: valid[g,k]} exp s[g,k] − s[g,0] )
//
// A candidate with valid[g,k] false (a group with fewer negatives than K,
// padded) leaves the denominator and gets exactly zero gradient. The
// positive is always valid.
//
// A bias b in the score would have no effect: s+b shifts every score of a
// group equally and the softmax ignores a shift, so its gradient is exactly
// zero. The head has none.
type Listwise[T Float] struct {
	G, K, D int // groups (queries), candidates per group (the positive first), width of p
}

// ListwiseActs holds what Forward saves for Backward.
type ListwiseActs[T Float] struct {
	S  []T // scores (G, K)
	P  []T // softmax of each group over its valid candidates (G, K); 0 where invalid
	DS []T // set by Backward: ∂L/∂S (G, K), overwritten on each call
}

// NewActs returns the activations of the loss's shapes.
func (l Listwise[T]) NewActs() *ListwiseActs[T] {
	n := l.G * l.K
	return &ListwiseActs[T]{S: make([]T, n), P: make([]T, n), DS: make([]T, n)}
}

// Score writes s[i] = w · p[i,:] for the n rows of p (n, D): the relevance
// of n pairs at inference.
//
// It panics if a slice has the wrong length.
func (l Listwise[T]) Score(s, p, w []T, n int) {
	if len(s) != n || len(p) != n*l.D || len(w) != l.D {
		panic(fmt.Sprintf("nn: Listwise.Score: len(s) = %d, len(p) = %d, len(w) = %d, want n = %d, n*D = %d, D = %d",
			len(s), len(p), len(w), n, n*l.D, l.D))
	}
	D := l.D
	for i := range n {
		pi := p[i*D : (i+1)*D][:len(w)]
		var v T
		for j, x := range w {
			v += x * pi[j]
		}
		s[i] = v
	}
}

// Forward computes the scores, each group's softmax and the loss for the
// pooled pair vectors p (G, K, D), the head w (D) and valid (G·K; nil: all
// valid), saving S and P in a. The log-sum-exps subtract the group maximum
// and the loss is summed in float64.
//
// It panics if the sizes are not G, K, D ≥ 1, a slice has the wrong length,
// or a positive is marked invalid.
func (l Listwise[T]) Forward(a *ListwiseActs[T], p, w []T, valid []bool) T {
	l.check("Listwise.Forward", a, p, w, valid)
	G, K := l.G, l.K
	ok := func(g, k int) bool { return valid == nil || valid[g*K+k] }
	// pass 1: s = p w
	l.Score(a.S, p, w, G*K)
	// pass 2: softmax over each group's valid candidates, and the loss
	var loss float64
	for g := range G {
		sg, pg := a.S[g*K:(g+1)*K], a.P[g*K:(g+1)*K]
		mx := sg[0] // the positive is always valid
		for k, s := range sg {
			if ok(g, k) {
				mx = max(mx, s)
			}
		}
		var z float64
		for k, s := range sg {
			pg[k] = 0
			if ok(g, k) {
				e := math.Exp(float64(s - mx))
				pg[k] = T(e)
				z += e
			}
		}
		for k := range pg {
			pg[k] = T(float64(pg[k]) / z)
		}
		// −log p[g,0] = log Σ_k e^(s[g,k] − max) − (s[g,0] − max)
		loss += math.Log(z) - float64(sg[0]-mx)
	}
	return T(loss / float64(G))
}

// Backward adds dloss times the gradients into dp (G, K, D) and dw (D),
// given the p, w and activations of Forward:
//
//	dS[g,k] = dloss · (P[g,k] − [k = 0]) / G      (0 where invalid)
//	dp[g,k,:] += dS[g,k] · w;   dw += Σ_{g,k} dS[g,k] · p[g,k,:]
//
// Backward adds into dp and dw; callers zero them.
//
// It panics on the conditions of Forward.
func (l Listwise[T]) Backward(dp, dw []T, dloss T, p, w []T, valid []bool, a *ListwiseActs[T]) {
	l.check("Listwise.Backward", a, p, w, valid)
	if len(dp) != len(p) || len(dw) != len(w) {
		panic(fmt.Sprintf("nn: Listwise.Backward: len(dp) = %d, len(dw) = %d, want %d and %d", len(dp), len(dw), len(p), len(w)))
	}
	G, K, D := l.G, l.K, l.D
	// forward was: L = (1/G) Σ_g (log Σ_k e^s[g,k] − s[g,0]); its derivative
	// by s[g,k] is the softmax minus the one-hot of the positive
	scale := dloss / T(G)
	for g := range G {
		for k := range K {
			i := g*K + k
			d := a.P[i] // exactly 0 where invalid
			if k == 0 {
				d--
			}
			a.DS[i] = d * scale
		}
	}
	// forward was: s[i] = w · p[i,:]
	for i, ds := range a.DS {
		if ds == 0 {
			continue // an invalid candidate: nothing flows
		}
		pi := p[i*D : (i+1)*D][:len(w)]
		dpi := dp[i*D : (i+1)*D][:len(w)]
		for j, x := range w {
			dpi[j] += ds * x
			dw[j] += ds * pi[j]
		}
	}
}

func (l Listwise[T]) check(op string, a *ListwiseActs[T], p, w []T, valid []bool) {
	G, K, D := l.G, l.K, l.D
	switch {
	case G < 1 || K < 1 || D < 1:
		panic(fmt.Sprintf("nn: %s: G = %d, K = %d, D = %d: want all >= 1", op, G, K, D))
	case len(p) != G*K*D || len(w) != D:
		panic(fmt.Sprintf("nn: %s: len(p) = %d, len(w) = %d, want G*K*D = %d and D = %d", op, len(p), len(w), G*K*D, D))
	case valid != nil && len(valid) != G*K:
		panic(fmt.Sprintf("nn: %s: len(valid) = %d, want G*K = %d", op, len(valid), G*K))
	case len(a.S) != G*K || len(a.P) != G*K || len(a.DS) != G*K:
		panic(fmt.Sprintf("nn: %s: activations of the wrong size (see NewActs)", op))
	}
	for g := range G {
		if valid != nil && !valid[g*K] {
			panic(fmt.Sprintf("nn: %s: valid[%d, 0] is false: the positive of group %d is masked", op, g, g))
		}
	}
}
