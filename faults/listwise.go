package faults

import (
	"math"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/retrieve"
)

// Listwise returns the faults of the reranker head: package retrieve's
// listwise loss with its forward or backward replaced.
func Listwise() []Fault[checks.ListwiseImpl] {
	ref := checks.ListwiseReference
	with := func(f func(*checks.ListwiseImpl)) checks.ListwiseImpl {
		impl := ref
		f(&impl)
		return impl
	}
	return []Fault[checks.ListwiseImpl]{
		{Name: "listwise-positive-not-in-denominator",
			Impl: with(func(i *checks.ListwiseImpl) { i.Forward = listwisePositiveOutside }),
			Breaks: "each group's softmax sums over its negatives only: loss = log Σ_{k>0} exp s[g,k] − s[g,0]; the backward is consistent, " +
				"so finite differences see it only in a group without a valid negative, whose loss becomes −∞"},
		{Name: "listwise-invalid-counted", FDBlind: true,
			Impl: with(func(i *checks.ListwiseImpl) {
				i.Forward = func(l retrieve.Listwise[float64], a *retrieve.ListwiseActs[float64], p, w []float64, _ []bool) float64 {
					return l.Forward(a, p, w, nil)
				}
				i.Backward = func(l retrieve.Listwise[float64], dp, dw []float64, dloss float64, p, w []float64, _ []bool, a *retrieve.ListwiseActs[float64]) {
					l.Backward(dp, dw, dloss, p, w, nil, a)
				}
			}),
			Breaks: "the candidate validity is ignored: the padding candidates of short groups enter every softmax (forward and backward alike)"},
		{Name: "listwise-positive-last", FDBlind: true,
			Impl:   with(func(i *checks.ListwiseImpl) { i.Forward, i.Backward = listwiseLastForward, listwiseLastBackward }),
			Breaks: "the loss takes each group's last candidate as its positive instead of the first (backward consistent)"},
		{Name: "listwise-no-mean-in-backward",
			Impl:   with(func(i *checks.ListwiseImpl) { i.Backward = listwiseSumBackward }),
			Breaks: "the backward drops the 1/G of the mean over groups: gradients G times too large"},
	}
}

// listwisePositiveOutside runs the correct forward, then renormalises the
// saved softmaxes without the positive, so that the correct backward
// differentiates the faulty loss exactly.
func listwisePositiveOutside(l retrieve.Listwise[float64], a *retrieve.ListwiseActs[float64], p, w []float64, valid []bool) float64 {
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
func rotate(l retrieve.Listwise[float64], p []float64, width int, back bool) []float64 {
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

func listwiseLastForward(l retrieve.Listwise[float64], a *retrieve.ListwiseActs[float64], p, w []float64, valid []bool) float64 {
	return l.Forward(a, rotate(l, p, l.D, false), w, nil)
}

func listwiseLastBackward(l retrieve.Listwise[float64], dp, dw []float64, dloss float64, p, w []float64, valid []bool, a *retrieve.ListwiseActs[float64]) {
	dr := make([]float64, len(dp))
	l.Backward(dr, dw, dloss, rotate(l, p, l.D, false), w, nil, a)
	for i, v := range rotate(l, dr, l.D, true) {
		dp[i] += v
	}
}

func listwiseSumBackward(l retrieve.Listwise[float64], dp, dw []float64, dloss float64, p, w []float64, valid []bool, a *retrieve.ListwiseActs[float64]) {
	l.Backward(dp, dw, dloss*float64(l.G), p, w, valid, a)
}
