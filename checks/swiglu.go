package checks

import (
	"math"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

// SwiGLUImpl is a SwiGLU MLP forward and backward in float64, with the
// signatures of nn.SwiGLU's methods taken as method expressions.
type SwiGLUImpl struct {
	Forward  func(s nn.SwiGLU[float64], y, a, u, h, x, wGate, wUp, wDown []float64, n int)
	Backward func(s nn.SwiGLU[float64], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int)
}

// SwiGLUReference is nn.SwiGLU.
var SwiGLUReference = SwiGLUImpl{Forward: nn.SwiGLU[float64].Forward, Backward: nn.SwiGLU[float64].Backward}

// swigluDiff differentiates y with respect to x and the three weights; the
// inputs are scaled by xs so that the gate a = x wGateᵀ reaches both the
// linear and the saturated parts of SiLU.
func swigluDiff(impl SwiGLUImpl, n, D, F int, xs float64, seed uint64) Diff {
	s := nn.SwiGLU[float64]{D: D, F: F}
	x := randn(seed, n*D, xs)
	wGate, wUp, wDown := randn(seed+1, F*D, 1), randn(seed+2, F*D, 1), randn(seed+3, D*F, 1)
	a, u, h := make([]float64, n*F), make([]float64, n*F), make([]float64, n*F)
	return Diff{
		Name:    shape("n", n, "D", D, "F", F, "|x|", xs),
		Inputs:  []gradcheck.Param{{Name: "x", X: x}, {Name: "wGate", X: wGate}, {Name: "wUp", X: wUp}, {Name: "wDown", X: wDown}},
		Out:     n * D,
		Forward: func(y []float64) { impl.Forward(s, y, a, u, h, x, wGate, wUp, wDown, n) },
		Backward: func(g [][]float64, dy []float64) {
			impl.Forward(s, make([]float64, n*D), a, u, h, x, wGate, wUp, wDown, n) // activations at the current point
			impl.Backward(s, g[0], g[1], g[2], g[3], dy, x, wGate, wUp, wDown, a, u, h, n)
		},
	}
}

// SwiGLU returns the checks of the SwiGLU MLP.
func SwiGLU() []Check[SwiGLUImpl] {
	small := func(impl SwiGLUImpl) []Diff {
		return []Diff{swigluDiff(impl, 1, 1, 1, 1, 1), swigluDiff(impl, 3, 4, 5, 1, 5), swigluDiff(impl, 2, 3, 7, 2, 9)}
	}
	big := func(impl SwiGLUImpl) []Diff { return []Diff{swigluDiff(impl, 16, 32, 48, 1, 13)} }
	return append(gradientChecks("SwiGLU", small, big),
		Check[SwiGLUImpl]{Name: "silu-derivative-table", Kind: Semantic, Run: swigluSiLUTable,
			Claim: "with D = 2, F = 1 and weights selecting each branch, dx = (silu'(a), silu(a)): silu'(0) = 0.5, and at a = ±1, 2.5, −3, 6, −12 the quotient-rule form ((1 + e⁻ᵃ) + a·e⁻ᵃ)/(1 + e⁻ᵃ)²",
			Limit: "the derivative at seven points, through the whole MLP; finite differences check the rest"},
	)
}

// swigluSiLUPoints are the gate values of silu-derivative-table.
var swigluSiLUPoints = []float64{0, 1, -1, 2.5, -3, 6, -12}

func swigluSiLUTable(impl SwiGLUImpl) Result {
	// D = 2, F = 1: row i is x = (a_i, 1); wGate = (1, 0) and wUp = (0, 1)
	// make the gate a_i and the up branch 1; wDown = (1, 0)ᵀ sends h to
	// y[i,0]. With dy = (1, 0): dh = 1, da = silu'(a), du = silu(a), and
	// dx = da·wGate + du·wUp = (silu'(a), silu(a)).
	const D, F = 2, 1
	n := len(swigluSiLUPoints)
	s := nn.SwiGLU[float64]{D: D, F: F}
	x, dy := make([]float64, n*D), make([]float64, n*D)
	for i, a := range swigluSiLUPoints {
		x[i*D], x[i*D+1] = a, 1
		dy[i*D] = 1
	}
	wGate, wUp, wDown := []float64{1, 0}, []float64{0, 1}, []float64{1, 0}
	y, a, u, h := make([]float64, n*D), make([]float64, n*F), make([]float64, n*F), make([]float64, n*F)
	dx, dwGate, dwUp, dwDown := make([]float64, n*D), make([]float64, F*D), make([]float64, F*D), make([]float64, D*F)
	if err := protect(func() error {
		impl.Forward(s, y, a, u, h, x, wGate, wUp, wDown, n)
		impl.Backward(s, dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h, n)
		return nil
	}); err != nil {
		return errored(err, "%v")
	}
	got, want := make([]float64, 3*n), make([]float64, 3*n)
	for i, a := range swigluSiLUPoints {
		e := math.Exp(-a)
		want[i] = a / (1 + e)                             // silu(a) = a·σ(a) = a/(1 + e⁻ᵃ), the forward
		want[n+i] = ((1 + e) + a*e) / ((1 + e) * (1 + e)) // d/da of a/(1 + e⁻ᵃ) by the quotient rule
		want[2*n+i] = want[i]                             // du = silu(a)
		got[i], got[n+i], got[2*n+i] = y[i*D], dx[i*D], dx[i*D+1]
	}
	if dx[0] != 0.5 { // silu'(0) = σ(0)(1 + 0) = 1/2, exactly representable
		return fail("silu'(0) = %.17g, want 0.5 exactly", dx[0])
	}
	d, msg := compare(identical, pair{"silu(a)", got[:n], want[:n]}, pair{"silu'(a)", got[n : 2*n], want[n : 2*n]}, pair{"dx up path", got[2*n:], want[2*n:]})
	if msg != "" {
		res := fail("%s, a = %v", msg, swigluSiLUPoints)
		res.Error = d
		return res
	}
	res := pass("silu'(0) = 0.5 exactly; silu and silu' match at a = %v, max error %.1e", swigluSiLUPoints[1:], d)
	res.Error = d
	return res
}
