package faults

import (
	"math"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// InfoNCE returns the faults of the contrastive head: nn.Head with one of
// its stages (the loss's forward or backward, the normalisation's
// backward) or the mask builder replaced.
func InfoNCE() []Fault[checks.InfoNCEImpl] {
	ref := checks.InfoNCEReference
	return []Fault[checks.InfoNCEImpl]{
		{Name: "infonce-positive-not-in-denominator", FDBlind: true,
			Impl:   with(ref, func(i *checks.InfoNCEImpl) { i.Forward = headForward(infoncePositiveOutside) }),
			Breaks: "the softmax denominator sums over the negatives only: loss = log Σ_{j≠i} exp S[i,j] − S[i,i], unbounded below (backward consistent)"},
		{Name: "l2norm-constant-in-backward",
			Impl:   with(ref, func(i *checks.InfoNCEImpl) { i.Backward = headBackward(nn.InfoNCE[float64].Backward, l2NormConstant) }),
			Breaks: "the forward normalises, the backward treats ‖x‖ as a constant: dx = dy/‖x‖, the −y(y·dy)/‖x‖ projection dropped"},
		{Name: "infonce-dtau-sign",
			Impl: with(ref, func(i *checks.InfoNCEImpl) {
				i.Backward = headBackward(infonceDTauFlipped, nn.L2Norm[float64].Backward)
			}),
			Breaks: "the temperature's gradient has the wrong sign: +(1/τ) Σ ∂L/∂S ⊙ S"},
		{Name: "infonce-column-max-from-masked", Note: "Subtracting any constant leaves a log-sum-exp unchanged in exact arithmetic, so every check at moderate scores passes, finite differences included. Only a masked score far above the rest shows it: the exps of the unmasked entries underflow to 0 and log 0 = −∞. That is the large-masked-scores check.", FDBlind: true,
			Impl:   with(ref, func(i *checks.InfoNCEImpl) { i.Forward = headForward(infonceColumnMaxFromRow0) }),
			Breaks: "the document→query log-sum-exp starts its maximum from S[0,j], masked or not, instead of the positive S[j,j]: the same value until a masked score far above the rest makes every exp underflow and the loss −∞"},
		{Name: "false-negative-mask-covers-positive", FDBlind: true,
			Impl:   with(ref, func(i *checks.InfoNCEImpl) { i.Mask = maskWithPositive }),
			Breaks: "the false-negative mask marks every document with the positive's key, the positive included"},
	}
}

// headForward is nn.Head's forward with the loss's forward replaced by
// loss: the pooling and the normalisation as nn.Head does them.
func headForward(loss func(c nn.InfoNCE[float64], a *nn.InfoNCEActs[float64], q, d []float64, tau float64, mask []bool) float64) func(nn.Head[float64], *nn.HeadActs[float64], []float64, []bool, []float64, []bool, float64, []bool) float64 {
	return func(h nn.Head[float64], a *nn.HeadActs[float64], xq []float64, validQ []bool, xd []float64, validD []bool, tau float64, mask []bool) float64 {
		B, N, D := h.Loss.B, h.Loss.N, h.Loss.D
		pool, norm := nn.MeanPool[float64]{D: D}, nn.L2Norm[float64]{D: D, Eps: h.Eps}
		pool.Forward(a.PQ, xq, validQ, B, h.Tq)
		pool.Forward(a.PD, xd, validD, N, h.Td)
		norm.Forward(a.Q, a.NQ, a.PQ, B)
		norm.Forward(a.D, a.ND, a.PD, N)
		return loss(h.Loss, a.Loss, a.Q, a.D, tau, mask)
	}
}

// headBackward is nn.Head's backward with the loss's backward replaced by
// loss and the normalisation's by norm.
func headBackward(loss func(c nn.InfoNCE[float64], dq, dd []float64, dtau *float64, dloss float64, q, d []float64, tau float64, mask []bool, a *nn.InfoNCEActs[float64]),
	norm func(l nn.L2Norm[float64], dx, dy, y, norm []float64, n int)) func(nn.Head[float64], []float64, []float64, *float64, float64, *nn.HeadActs[float64], []bool, []bool, float64, []bool) {
	return func(h nn.Head[float64], dxq, dxd []float64, dtau *float64, dloss float64, a *nn.HeadActs[float64], validQ, validD []bool, tau float64, mask []bool) {
		B, N, D := h.Loss.B, h.Loss.N, h.Loss.D
		dq, dd, dpq, dpd := make([]float64, B*D), make([]float64, N*D), make([]float64, B*D), make([]float64, N*D)
		loss(h.Loss, dq, dd, dtau, dloss, a.Q, a.D, tau, mask, a.Loss)
		l2 := nn.L2Norm[float64]{D: D, Eps: h.Eps}
		norm(l2, dpq, dq, a.Q, a.NQ, B)
		norm(l2, dpd, dd, a.D, a.ND, N)
		pool := nn.MeanPool[float64]{D: D}
		pool.Backward(dxq, dpq, validQ, B, h.Tq)
		pool.Backward(dxd, dpd, validD, N, h.Td)
	}
}

// infoncePositiveOutside is the forward with the positive taken out of each
// denominator. It runs the correct forward, then renormalises the saved
// softmaxes without the positive: P'[i,j] = P[i,j]/(1 − P[i,i]) for j ≠ i,
// P'[i,i] = 0, and log Σ_{j≠i} e^S = log Σ_j e^S + log(1 − P[i,i]). The
// correct backward, which reads P, then differentiates this loss exactly.
func infoncePositiveOutside(c nn.InfoNCE[float64], a *nn.InfoNCEActs[float64], q, d []float64, tau float64, mask []bool) float64 {
	loss := c.Forward(a, q, d, tau, mask)
	B, N := c.B, c.N
	var lq, ld float64
	for i := range B {
		rest := 1 - a.P[i*N+i]
		lq += math.Log(rest)
		for j := range N {
			a.P[i*N+j] /= rest
		}
		a.P[i*N+i] = 0
	}
	if !c.Symmetric {
		return loss + lq/float64(B)
	}
	for j := range B {
		rest := 1 - a.PC[j*B+j]
		ld += math.Log(rest)
		for i := range B {
			a.PC[i*B+j] /= rest
		}
		a.PC[j*B+j] = 0
	}
	return loss + (lq+ld)/float64(B)/2
}

// infonceColumnMaxFromRow0 is the forward with the column pass's maximum
// started from S[0,j] whatever the mask says. It runs the correct forward,
// then redoes the column softmaxes and L_d with that start; the correct
// backward reads PC, so forward and backward stay consistent.
func infonceColumnMaxFromRow0(c nn.InfoNCE[float64], a *nn.InfoNCEActs[float64], q, d []float64, tau float64, mask []bool) float64 {
	loss := c.Forward(a, q, d, tau, mask)
	if !c.Symmetric {
		return loss
	}
	B, N := c.B, c.N
	masked := func(i, j int) bool { return mask != nil && mask[i*N+j] }
	var lq, ld float64
	for i := range B { // L_q again, to take the correct L_d out of loss
		lq -= math.Log(a.P[i*N+i])
	}
	for j := range B {
		mx := a.S[j] // S[0,j]: a masked entry when mask[0,j] is set
		for i := range B {
			if !masked(i, j) {
				mx = max(mx, a.S[i*N+j])
			}
		}
		var z float64
		for i := range B {
			a.PC[i*B+j] = 0
			if !masked(i, j) {
				a.PC[i*B+j] = math.Exp(a.S[i*N+j] - mx)
				z += a.PC[i*B+j]
			}
		}
		for i := range B {
			a.PC[i*B+j] /= z
		}
		ld += math.Log(z) - (a.S[j*N+j] - mx)
	}
	return (lq + ld) / float64(B) / 2
}

func l2NormConstant(l nn.L2Norm[float64], dx, dy, y, norm []float64, n int) {
	D := l.D
	for i := range n {
		for j := range D {
			dx[i*D+j] += dy[i*D+j] / max(norm[i], l.Eps)
		}
	}
}

func infonceDTauFlipped(c nn.InfoNCE[float64], dq, dd []float64, dtau *float64, dloss float64, q, d []float64, tau float64, mask []bool, a *nn.InfoNCEActs[float64]) {
	var t float64
	c.Backward(dq, dd, &t, dloss, q, d, tau, mask, a)
	if dtau != nil {
		*dtau -= t
	}
}

func maskWithPositive(dst []bool, keys []string, B int) {
	N := len(keys)
	for i := range B {
		for j, k := range keys {
			dst[i*N+j] = k == keys[i]
		}
	}
}
