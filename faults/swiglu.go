package faults

import (
	"math"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// SwiGLU returns the faults of the SwiGLU MLP: nn.SwiGLU with a broken
// backward.
func SwiGLU() []Fault[checks.SwiGLUImpl] {
	ref := checks.SwiGLUReference
	backward := func(b func(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int)) checks.SwiGLUImpl {
		return with(ref, func(i *checks.SwiGLUImpl) { i.Backward = b })
	}
	return []Fault[checks.SwiGLUImpl]{
		{Name: "swiglu-no-silu-derivative", Impl: backward(swigluBackward(siluMulBackwardWithSiLU)),
			Breaks: "gate gradient da = dh ⊙ u ⊙ silu(a): silu(a) used where silu'(a) = σ(a)(1 + a(1 − σ(a))) belongs"},
		{Name: "swiglu-gate-path-dropped", Impl: backward(swigluGatePathDropped),
			Breaks: "dx gets only the up path du·wUp: the gate path da·wGate is dropped (x feeds both branches)"},
		{Name: "swiglu-dwdown-assigned", FDBlind: true, Impl: backward(swigluDWDownAssigned),
			Breaks: "dwDown written with = instead of +=: gradients accumulated over micro-batches are lost"},
	}
}

// swigluBackward returns nn.SwiGLU.Backward with the backward of the gate,
// h = silu(a) ⊙ u, replaced by siluMul.
func swigluBackward(siluMul func(da, du, dh, a, u []float64)) func(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
	return func(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
		expand, contract := nn.Linear[float64]{In: s.D, Out: s.F}, nn.Linear[float64]{In: s.F, Out: s.D}
		dh, da, du := make([]float64, n*s.F), make([]float64, n*s.F), make([]float64, n*s.F)
		contract.Backward(dh, dwDown, nil, dy, h, wDown, n)
		siluMul(da, du, dh, a, u)
		expand.Backward(dx, dwUp, nil, du, x, wUp, n)
		expand.Backward(dx, dwGate, nil, da, x, wGate, n)
	}
}

func siluMulBackwardWithSiLU(da, du, dh, a, u []float64) {
	for j, g := range dh {
		silu := a[j] / (1 + math.Exp(-a[j]))
		da[j] += g * u[j] * silu // silu'(a) belongs here
		du[j] += g * silu
	}
}

func swigluGatePathDropped(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
	expand, contract := nn.Linear[float64]{In: s.D, Out: s.F}, nn.Linear[float64]{In: s.F, Out: s.D}
	dh, da, du := make([]float64, n*s.F), make([]float64, n*s.F), make([]float64, n*s.F)
	contract.Backward(dh, dwDown, nil, dy, h, wDown, n)
	nn.SiLUMul[float64]{}.Backward(da, du, dh, a, u)
	expand.Backward(dx, dwUp, nil, du, x, wUp, n)
	expand.Backward(make([]float64, len(dx)), dwGate, nil, da, x, wGate, n) // the gate's share of dx is discarded
}

func swigluDWDownAssigned(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
	clear(dwDown)
	s.Backward(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h, n)
}
