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
		{Name: "swiglu-silu-derivative-sigma-only", Impl: backward(swigluBackward(siluMulBackwardWithSigma)),
			Breaks: "gate gradient da = dh ⊙ u ⊙ σ(a): the factor 1 + a(1 − σ(a)) of silu'(a) dropped"},
		{Name: "swiglu-du-uses-a", Impl: backward(swigluBackward(siluMulBackwardUpWithA)),
			Breaks: "up gradient du = dh ⊙ a: the gate's input where its output silu(a) belongs"},
		{Name: "swiglu-gate-up-swapped", Impl: backward(swigluBackward(siluMulBackwardSwapped)),
			Breaks: "the gate's and the up branch's gradients exchanged: da gets dh ⊙ silu(a), du gets dh ⊙ u ⊙ silu'(a)"},
		{Name: "swiglu-up-path-dropped", Impl: backward(swigluUpPathDropped),
			Breaks: "dx gets only the gate path da·wGate: the up path du·wUp is dropped (x feeds both branches)"},
		{Name: "swiglu-dwdown-assigned", FDBlind: true, Impl: backward(swigluDWDownAssigned),
			Breaks: "dwDown written with = instead of +=: gradients accumulated over micro-batches are lost"},
		{Name: "swiglu-f32-exp-ln2-rounded", FDBlind: true,
			Impl:   with(ref, func(i *checks.SwiGLUImpl) { i.F32 = swiglu32(sigmoidLn2Rounded) }),
			Breaks: "the float32 path's sigmoid takes e^x as 2ⁿ·e^(x − n·0.69), ln 2 rounded to two digits: e^x off by a factor e^(3.1e-3·n)",
			Note: "Only the float32 path is wrong, and only by a few parts in 1e3: every float64 check, finite differences included, runs the correct path, " +
				"while float32 rounding is some thousand times smaller. The float32 check, which compares the float32 path with the float64 reference, is the one that sees it."},
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

// swiglu32 is nn.SwiGLU's float32 path with σ computed by sigmoid: the
// forward and backward of the gate written out around nn.Linear.
func swiglu32(sigmoid func(float32) float32) checks.SwiGLUOps[float32] {
	layers := func(s nn.SwiGLU[float32]) (expand, contract nn.Linear[float32]) {
		return nn.Linear[float32]{In: s.D, Out: s.F}, nn.Linear[float32]{In: s.F, Out: s.D}
	}
	return checks.SwiGLUOps[float32]{
		Forward: func(s nn.SwiGLU[float32], y, a, u, h, x, wGate, wUp, wDown []float32, n int) {
			expand, contract := layers(s)
			expand.Forward(a, x, wGate, nil, n)
			expand.Forward(u, x, wUp, nil, n)
			for j := range h {
				h[j] = a[j] * sigmoid(a[j]) * u[j]
			}
			contract.Forward(y, h, wDown, nil, n)
		},
		Backward: func(s nn.SwiGLU[float32], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float32, n int) {
			expand, contract := layers(s)
			dh, da, du := make([]float32, n*s.F), make([]float32, n*s.F), make([]float32, n*s.F)
			contract.Backward(dh, dwDown, nil, dy, h, wDown, n)
			for j, g := range dh {
				sg := sigmoid(a[j])
				da[j] = g * u[j] * sg * (1 + a[j]*(1-sg)) // silu'(a) = σ(a)(1 + a(1 − σ(a)))
				du[j] = g * a[j] * sg
			}
			expand.Backward(dx, dwUp, nil, du, x, wUp, n)
			expand.Backward(dx, dwGate, nil, da, x, wGate, n)
		},
	}
}

// sigmoidLn2Rounded is 1/(1 + e^(−a)) with e^x reduced to 2ⁿ·e^r,
// n = round(x/ln 2), r = x − n·0.69: the reduction's constant ln 2 =
// 0.693147… cut to two digits.
func sigmoidLn2Rounded(a float32) float32 {
	x := -float64(a)
	n := math.Round(x / math.Ln2)
	e := math.Ldexp(math.Exp(x-n*0.69), int(n)) // 0.69 where ln 2 belongs
	return float32(1 / (1 + e))
}

func swigluDWDownAssigned(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
	clear(dwDown)
	s.Backward(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h, n)
}

func siluMulBackwardWithSigma(da, du, dh, a, u []float64) {
	for j, g := range dh {
		sig := 1 / (1 + math.Exp(-a[j]))
		da[j] += g * u[j] * sig // · (1 + a(1 − σ)) belongs here
		du[j] += g * a[j] * sig
	}
}

func siluMulBackwardUpWithA(da, du, dh, a, u []float64) {
	nn.SiLUMul[float64]{}.Backward(da, make([]float64, len(du)), dh, a, u)
	for j, g := range dh {
		du[j] += g * a[j] // silu(a) belongs here
	}
}

func siluMulBackwardSwapped(da, du, dh, a, u []float64) {
	nn.SiLUMul[float64]{}.Backward(du, da, dh, a, u)
}

func swigluUpPathDropped(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
	expand, contract := nn.Linear[float64]{In: s.D, Out: s.F}, nn.Linear[float64]{In: s.F, Out: s.D}
	dh, da, du := make([]float64, n*s.F), make([]float64, n*s.F), make([]float64, n*s.F)
	contract.Backward(dh, dwDown, nil, dy, h, wDown, n)
	nn.SiLUMul[float64]{}.Backward(da, du, dh, a, u)
	expand.Backward(make([]float64, len(dx)), dwUp, nil, du, x, wUp, n) // the up path's share of dx is discarded
	expand.Backward(dx, dwGate, nil, da, x, wGate, n)
}
