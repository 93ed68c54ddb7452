package faults

import (
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// RMSNorm returns the faults of RMSNorm: nn.RMSNorm with a broken backward.
func RMSNorm() []Fault[checks.RMSNormImpl] {
	ref := checks.RMSNormReference
	backward := func(b func(m nn.RMSNorm[float64], dx, dw, dy, x, w, rstd []float64, n int)) checks.RMSNormImpl {
		return with(ref, func(i *checks.RMSNormImpl) { i.Backward = b })
	}
	return []Fault[checks.RMSNormImpl]{
		{Name: "rmsnorm-r-constant", Impl: backward(rmsnormRConstant),
			Breaks: "backward treats r as a constant: dx = g/r, the −x·mean(g⊙x)/r³ feedback dropped"},
		{Name: "rmsnorm-feedback-sum", Impl: backward(rmsnormFeedbackSum),
			Breaks: "the feedback term takes the sum Σ(g⊙x) where the mean belongs: dx = g/r − x·Σ(g⊙x)/r³, D times too large"},
		{Name: "rmsnorm-dw-without-rstd", Impl: backward(rmsnormDWWithoutRstd),
			Breaks: "dw = Σ dy ⊙ x, the 1/r of the normalised input dropped"},
		{Name: "rmsnorm-dw-assigned", FDBlind: true, Impl: backward(rmsnormDWAssigned),
			Breaks: "dw written with = instead of +=: gradients accumulated over micro-batches are lost"},
	}
}

func rmsnormRConstant(m nn.RMSNorm[float64], dx, dw, dy, x, w, rstd []float64, n int) {
	D := m.D
	for i := range n {
		for j := range D {
			dx[i*D+j] += dy[i*D+j] * w[j] * rstd[i] // g/r only
			dw[j] += dy[i*D+j] * x[i*D+j] * rstd[i]
		}
	}
}

func rmsnormDWAssigned(m nn.RMSNorm[float64], dx, dw, dy, x, w, rstd []float64, n int) {
	clear(dw)
	m.Backward(dx, dw, dy, x, w, rstd, n)
}

func rmsnormFeedbackSum(m nn.RMSNorm[float64], dx, dw, dy, x, w, rstd []float64, n int) {
	m.Backward(dx, dw, dy, x, w, rstd, n)
	D := m.D
	for i := range n {
		var gx float64
		for j := range D {
			gx += dy[i*D+j] * w[j] * x[i*D+j]
		}
		s := rstd[i]
		for j := range D {
			dx[i*D+j] -= x[i*D+j] * gx * (1 - 1/float64(D)) * s * s * s // the rest of Σ beyond the mean
		}
	}
}

func rmsnormDWWithoutRstd(m nn.RMSNorm[float64], dx, dw, dy, x, w, rstd []float64, n int) {
	m.Backward(dx, make([]float64, len(dw)), dy, x, w, rstd, n)
	D := m.D
	for i := range n {
		for j := range D {
			dw[j] += dy[i*D+j] * x[i*D+j] // · rstd[i] belongs here
		}
	}
}
