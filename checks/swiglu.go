package checks

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/nn"
)

// SwiGLUOps is a SwiGLU MLP forward and backward in precision T, with the
// signatures of nn.SwiGLU's methods taken as method expressions.
type SwiGLUOps[T nn.Float] struct {
	Forward  func(s nn.SwiGLU[T], y, a, u, h, x, wGate, wUp, wDown []T, n int)
	Backward func(s nn.SwiGLU[T], dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []T, n int)
}

// SwiGLUImpl is a SwiGLU MLP: its float64 path and its float32 path (which
// runs the vectorised sigmoid and GEMM).
type SwiGLUImpl struct {
	SwiGLUOps[float64]
	F32 SwiGLUOps[float32]
}

func swigluOps[T nn.Float]() SwiGLUOps[T] {
	return SwiGLUOps[T]{Forward: nn.SwiGLU[T].Forward, Backward: nn.SwiGLU[T].Backward}
}

// SwiGLUReference is nn.SwiGLU.
var SwiGLUReference = SwiGLUImpl{swigluOps[float64](), swigluOps[float32]()}

// swigluCase differentiates y with respect to x and the three weights; the
// inputs are scaled by xs so that the gate a = x wGateᵀ reaches both the
// linear and the saturated parts of SiLU.
func swigluCase[T nn.Float](ops SwiGLUOps[T], n, D, F int, xs float64, seed uint64) Case[T] {
	s := nn.SwiGLU[T]{D: D, F: F}
	x := randT[T](seed, n*D, xs)
	wGate, wUp, wDown := randT[T](seed+1, F*D, 1), randT[T](seed+2, F*D, 1), randT[T](seed+3, D*F, 1)
	a, u, h := make([]T, n*F), make([]T, n*F), make([]T, n*F)
	return Case[T]{
		Name:    shape("n", n, "D", D, "F", F, "|x|", xs),
		Inputs:  []Input[T]{{"x", x}, {"wGate", wGate}, {"wUp", wUp}, {"wDown", wDown}},
		Out:     n * D,
		Forward: func(y []T) error { ops.Forward(s, y, a, u, h, x, wGate, wUp, wDown, n); return nil },
		Backward: func(g [][]T, dy []T) error {
			ops.Forward(s, make([]T, n*D), a, u, h, x, wGate, wUp, wDown, n) // activations at the current point
			ops.Backward(s, g[0], g[1], g[2], g[3], dy, x, wGate, wUp, wDown, a, u, h, n)
			return nil
		},
	}
}

func swigluCases[T nn.Float](ops SwiGLUOps[T], big bool) []Case[T] {
	if big {
		return []Case[T]{swigluCase(ops, 16, 32, 48, 1, 13)}
	}
	return []Case[T]{swigluCase(ops, 1, 1, 1, 1, 1), swigluCase(ops, 3, 4, 5, 1, 5), swigluCase(ops, 2, 3, 7, 2, 9)}
}

// swigluDefinitionShapes are the (n, D, F) of forward-definition.
var swigluDefinitionShapes = [][3]int{{1, 1, 1}, {1, 3, 7}, {5, 4, 11}, {3, 13, 2}}

// SwiGLU returns the suite of the SwiGLU MLP.
func SwiGLU() Suite[SwiGLUImpl] {
	spec := gradSpec[SwiGLUImpl]{op: "SwiGLU", ref: SwiGLUReference, dirs: 4,
		cases:   func(i SwiGLUImpl, big bool) []Case[float64] { return swigluCases(i.SwiGLUOps, big) },
		cases32: func(i SwiGLUImpl, big bool) []Case[float32] { return swigluCases(i.F32, big) }}
	var defShapes []string
	for _, s := range swigluDefinitionShapes {
		defShapes = append(defShapes, shape("n", s[0], "D", s[1], "F", s[2]))
	}
	return Suite[SwiGLUImpl]{
		Guide: OpGuide{
			What: "Llama's gated MLP: gate and up projections to width F, SiLU gate, down projection back to D.",
			Forward: []Step{
				{Eq: "a = x wGateᵀ,  u = x wUpᵀ", Shape: "x [n,D], wGate, wUp [F,D] → a, u [n,F]", Why: "two projections of the same input"},
				{Eq: "h = silu(a) ⊙ u,  silu(a) = a·σ(a)", Shape: "h [n,F]", Why: "multiplicative gate"},
				{Eq: "y = h wDownᵀ", Shape: "wDown [D,F] → y [n,D]", Why: "back to the model width"},
			},
			Backward: []Step{
				{Eq: "dh = dy wDown,  dwDown = dyᵀ h", Shape: "dh [n,F], dwDown [D,F]", Why: "a linear layer"},
				{Eq: "da = dh ⊙ u ⊙ silu'(a),  du = dh ⊙ silu(a),  silu'(a) = σ(a)(1 + a(1 − σ(a)))", Shape: "[n,F]",
					Why: "each branch of the product gets the other branch times the upstream gradient; the gate also needs SiLU's own derivative"},
				{Eq: "dx = da wGate + du wUp,  dwGate = daᵀ x,  dwUp = duᵀ x", Shape: "dx [n,D], dwGate, dwUp [F,D]",
					Why: "x feeds both branches, so dx is the sum of the two paths"},
			},
		},
		Checks: append(spec.checks(),
			Check[SwiGLUImpl]{Name: "forward-definition", Kind: Semantic, Run: swigluDefinition,
				Claim: "y[i,o] = Σⱼ wDown[o,j]·silu(aᵢⱼ)·uᵢⱼ with a = x wGateᵀ, u = x wUpᵀ, one expression per output element, recomputed here",
				Limit: "the forward only; finite differences tie the backward to it",
				Long: Long{
					Tests:  "every output element recomputed as one expression, Σⱼ wDown[o,j]·aᵢⱼ/(1 + e^(−aᵢⱼ))·uᵢⱼ with aᵢⱼ = Σₖ x[i,k]·wGate[j,k] and uᵢⱼ = Σₖ x[i,k]·wUp[j,k], loops in another order than the implementation's",
					Shapes: list(defShapes),
					Proves: "the forward is Llama's MLP: SiLU on the gate branch, not the up branch, weights stored (out, in)",
					Cannot: "the backward: finite differences tie it to this forward",
				}},
			Check[SwiGLUImpl]{Name: "silu-derivative-table", Kind: Semantic, Run: swigluSiLUTable,
				Claim: fmt.Sprintf("with D = 2, F = 1 and weights selecting each branch, dx = (silu'(a), silu(a)): silu'(0) = 0.5, and at a = %s the quotient-rule form ((1 + e⁻ᵃ) + a·e⁻ᵃ)/(1 + e⁻ᵃ)²", list(swigluSiLUPoints[1:])),
				Limit: fmt.Sprintf("the derivative at %d points, through the whole MLP; finite differences check the rest", len(swigluSiLUPoints)),
				Long: Long{
					Tests:  fmt.Sprintf("with D = 2, F = 1 and weights selecting each branch, dx = (silu'(a), silu(a)): silu'(0) = 0.5 exactly, and the quotient-rule form at a = %s", list(swigluSiLUPoints[1:])),
					Shapes: fmt.Sprintf("a one-unit MLP, n = %d rows, one per gate value", len(swigluSiLUPoints)),
					Proves: "SiLU's derivative σ(a)(1 + a(1 − σ(a))) is used for the gate",
					Cannot: "other points; finite differences cover the rest",
				}},
		),
		At: func(impl SwiGLUImpl, s Sizes, seed uint64) Case[float64] {
			return swigluCase(impl.SwiGLUOps, s.B*s.T, s.Dim, s.F, 1, seed)
		},
		At32: func(impl SwiGLUImpl, s Sizes, seed uint64) Case[float32] {
			return swigluCase(impl.F32, s.B*s.T, s.Dim, s.F, 1, seed)
		},
		Reads: "B·T rows of width Dim, hidden width F",
	}
}

func swigluDefinition(impl SwiGLUImpl) Result {
	var worst float64
	for x, sh := range swigluDefinitionShapes {
		n, D, F := sh[0], sh[1], sh[2]
		in, wg, wu, wd := randn(uint64(190+x), n*D, 1), randn(uint64(200+x), F*D, 1), randn(uint64(210+x), F*D, 1), randn(uint64(220+x), D*F, 1)
		y, a, u, h := make([]float64, n*D), make([]float64, n*F), make([]float64, n*F), make([]float64, n*F)
		if err := protect(func() error { impl.Forward(nn.SwiGLU[float64]{D: D, F: F}, y, a, u, h, in, wg, wu, wd, n); return nil }); err != nil {
			return errored(err, "%v")
		}
		want := make([]float64, n*D)
		for i := range n {
			for o := range D {
				for j := range F {
					var av, uv float64
					for k := range D {
						av += in[i*D+k] * wg[j*D+k]
						uv += in[i*D+k] * wu[j*D+k]
					}
					want[i*D+o] += wd[o*F+j] * av / (1 + math.Exp(-av)) * uv
				}
			}
		}
		d, msg := compare(1e-13, pair{"y", y, want})
		worst = max(worst, d)
		if msg != "" {
			return measured(fail("n=%d, D=%d, F=%d: %s", n, D, F, msg), d)
		}
	}
	return measured(pass("every output element on %d shapes matches the one-expression definition, max error %.1e", len(swigluDefinitionShapes), worst), worst)
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
		return measured(fail("%s, a = %v", msg, swigluSiLUPoints), d)
	}
	return measured(pass("silu'(0) = 0.5 exactly; silu and silu' match at a = %s, max error %.1e", list(swigluSiLUPoints[1:]), d), d)
}
