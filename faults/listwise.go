package faults

import (
	"math"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// Listwise returns the faults of the reranker head: package retrieve's
// listwise loss with its forward or backward replaced.
func Listwise() []Fault[checks.ListwiseImpl] {
	ref := checks.ListwiseReference
	return []Fault[checks.ListwiseImpl]{
		{Name: "listwise-positive-not-in-denominator",
			Impl: with(ref, func(i *checks.ListwiseImpl) { i.Forward = listwisePositiveOutside }),
			Breaks: "each group's softmax sums over its negatives only: loss = log Σ_{k>0} exp s[g,k] − s[g,0]; the backward is consistent, " +
				"so finite differences see it only in a group without a valid negative, whose loss becomes −∞"},
		{Name: "listwise-invalid-counted", FDBlind: true,
			Impl: with(ref, func(i *checks.ListwiseImpl) {
				i.Forward = func(l nn.Listwise[float64], a *nn.ListwiseActs[float64], p, w []float64, _ []bool) float64 {
					return l.Forward(a, p, w, nil)
				}
				i.Backward = func(l nn.Listwise[float64], dp, dw []float64, dloss float64, p, w []float64, _ []bool, a *nn.ListwiseActs[float64]) {
					l.Backward(dp, dw, dloss, p, w, nil, a)
				}
			}),
			Breaks: "the candidate validity is ignored: the padding candidates of short groups enter every softmax (forward and backward alike)"},
		{Name: "listwise-positive-last", FDBlind: true,
			Impl:   with(ref, func(i *checks.ListwiseImpl) { i.Forward, i.Backward = listwiseLastForward, listwiseLastBackward }),
			Breaks: "the loss takes each group's last candidate as its positive instead of the first (backward consistent)"},
		{Name: "pairpool-separator-pooled", FDBlind: true,
			Impl: with(ref, func(i *checks.ListwiseImpl) {
				i.PoolForward, i.PoolBackward = pairPoolForward(true), pairPoolBackward(true, false)
			}),
			Breaks: "the code side's mean starts at the separator instead of after it (forward and backward alike)"},
		{Name: "pairpool-norm-constant-in-backward",
			Impl: with(ref, func(i *checks.ListwiseImpl) {
				i.PoolForward, i.PoolBackward = pairPoolForward(false), pairPoolBackward(false, true)
			}),
			Breaks: "the backward treats each side's norm as a constant: dq = du/‖q‖, the −u(u·du)/‖q‖ projection dropped"},
		{Name: "listwise-no-mean-in-backward",
			Impl:   with(ref, func(i *checks.ListwiseImpl) { i.Backward = listwiseSumBackward }),
			Breaks: "the backward drops the 1/G of the mean over groups: gradients G times too large"},
	}
}

// listwisePositiveOutside runs the correct forward, then renormalises the
// saved softmaxes without the positive, so that the correct backward
// differentiates the faulty loss exactly.
func listwisePositiveOutside(l nn.Listwise[float64], a *nn.ListwiseActs[float64], p, w []float64, valid []bool) float64 {
	loss := l.Forward(a, p, w, valid)
	var extra float64
	for g := range l.G {
		rest := 1 - a.P[g*l.K]
		extra += math.Log(rest)
		for k := range l.K {
			a.P[g*l.K+k] /= rest
		}
		a.P[g*l.K] = 0
	}
	return loss + extra/float64(l.G)
}

// rotate returns the rows of p (G·K rows of width values) with each group's
// candidates in the order K−1, 0, 1, …, K−2 (the last first); back undoes it.
func rotate(l nn.Listwise[float64], p []float64, width int, back bool) []float64 {
	out := make([]float64, len(p))
	for g := range l.G {
		for k := range l.K {
			from, to := g*l.K+(k+l.K-1)%l.K, g*l.K+k
			if back {
				from, to = to, from
			}
			copy(out[to*width:(to+1)*width], p[from*width:(from+1)*width])
		}
	}
	return out
}

func listwiseLastForward(l nn.Listwise[float64], a *nn.ListwiseActs[float64], p, w []float64, valid []bool) float64 {
	return l.Forward(a, rotate(l, p, l.D, false), w, nil)
}

func listwiseLastBackward(l nn.Listwise[float64], dp, dw []float64, dloss float64, p, w []float64, valid []bool, a *nn.ListwiseActs[float64]) {
	dr := make([]float64, len(dp))
	l.Backward(dr, dw, dloss, rotate(l, p, l.D, false), w, nil, a)
	for i, v := range rotate(l, dr, l.D, true) {
		dp[i] += v
	}
}

func listwiseSumBackward(l nn.Listwise[float64], dp, dw []float64, dloss float64, p, w []float64, valid []bool, a *nn.ListwiseActs[float64]) {
	l.Backward(dp, dw, dloss*float64(l.G), p, w, valid, a)
}

// pairSides returns, for sequence b, whether token t is pooled into the
// query side (0), the code side (1) or neither (−1); with sep the
// separator counts as code.
func pairSides(nq []int, valid []bool, b, t, Tn int, sep bool) int {
	switch {
	case t < nq[b]:
		return 0
	case (t > nq[b] || sep && t == nq[b]) && (valid == nil || valid[b*Tn+t]):
		return 1
	}
	return -1
}

// pairPoolForward is nn.PairPool's forward written out, with the
// separator pooled into the code side when sep is set.
func pairPoolForward(sep bool) func(p nn.PairPool[float64], f []float64, a *nn.PairPoolActs[float64], x []float64, nq []int, valid []bool, B, Tn int) {
	return func(p nn.PairPool[float64], f []float64, a *nn.PairPoolActs[float64], x []float64, nq []int, valid []bool, B, Tn int) {
		D := p.D
		for b := range B {
			sides := [2][]float64{a.U[b*D : (b+1)*D], a.V[b*D : (b+1)*D]}
			norms := [2][]float64{a.NQ[b : b+1], a.NC[b : b+1]}
			var n [2]int
			clear(sides[0])
			clear(sides[1])
			for t := range Tn {
				if k := pairSides(nq, valid, b, t, Tn, sep); k >= 0 {
					n[k]++
					for j := range D {
						sides[k][j] += x[(b*Tn+t)*D+j]
					}
				}
			}
			for k, side := range sides {
				var ss float64
				for j := range side {
					side[j] /= float64(n[k])
					ss += side[j] * side[j]
				}
				norms[k][0] = math.Sqrt(ss)
				for j := range side {
					side[j] /= max(norms[k][0], 1e-12)
				}
			}
			for j := range D {
				f[b*D+j] = sides[0][j] * sides[1][j]
			}
		}
	}
}

// pairPoolBackward is nn.PairPool's backward written out, with the
// separator pooled into the code side when sep is set, and without the
// normalisation's projection when constNorm is set.
func pairPoolBackward(sep, constNorm bool) func(p nn.PairPool[float64], dx, df []float64, nq []int, valid []bool, B, Tn int, a *nn.PairPoolActs[float64]) {
	return func(p nn.PairPool[float64], dx, df []float64, nq []int, valid []bool, B, Tn int, a *nn.PairPoolActs[float64]) {
		D := p.D
		for b := range B {
			u, v := a.U[b*D:(b+1)*D], a.V[b*D:(b+1)*D]
			var n [2]int
			for t := range Tn {
				if k := pairSides(nq, valid, b, t, Tn, sep); k >= 0 {
					n[k]++
				}
			}
			var d [2][]float64
			for k, pair := range [2][3][]float64{{u, v}, {v, u}} {
				self, other := pair[0], pair[1]
				norm := a.NQ[b]
				if k == 1 {
					norm = a.NC[b]
				}
				dd := make([]float64, D)
				var dot float64
				for j := range D {
					dd[j] = df[b*D+j] * other[j]
					dot += self[j] * dd[j]
				}
				for j := range D {
					if !constNorm {
						dd[j] -= self[j] * dot
					}
					dd[j] /= norm * float64(n[k])
				}
				d[k] = dd
			}
			for t := range Tn {
				if k := pairSides(nq, valid, b, t, Tn, sep); k >= 0 {
					for j := range D {
						dx[(b*Tn+t)*D+j] += d[k][j]
					}
				}
			}
		}
	}
}
