package checks

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
)

// RMSNormOps is an RMSNorm forward and backward in precision T, with the
// signatures of nn.RMSNorm's methods taken as method expressions.
type RMSNormOps[T nn.Float] struct {
	Forward  func(m nn.RMSNorm[T], y, rstd, x, w []T, n int)
	Backward func(m nn.RMSNorm[T], dx, dw, dy, x, w, rstd []T, n int)
}

// RMSNormImpl is an RMSNorm: its float64 path, which the checks
// differentiate, and its float32 path.
type RMSNormImpl struct {
	RMSNormOps[float64]
	F32 RMSNormOps[float32]
}

func rmsnormOps[T nn.Float]() RMSNormOps[T] {
	return RMSNormOps[T]{Forward: nn.RMSNorm[T].Forward, Backward: nn.RMSNorm[T].Backward}
}

// RMSNormReference is nn.RMSNorm.
var RMSNormReference = RMSNormImpl{rmsnormOps[float64](), rmsnormOps[float32]()}

func rmsnormCase[T nn.Float](ops RMSNormOps[T], n, D int, eps float64, seed uint64) Case[T] {
	m := nn.RMSNorm[T]{D: D, Eps: T(eps)}
	x, w := randT[T](seed, n*D, 1), randn(seed+1, D, 1)
	for i := range w {
		w[i] += 1 // weights near one, as trained norms are
	}
	wt := vec.Convert[T](w)
	rstd := make([]T, n)
	return Case[T]{
		Name:    shape("n", n, "D", D, "ε", eps),
		Inputs:  []Input[T]{{"x", x}, {"w", wt}},
		Out:     n * D,
		Forward: func(y []T) error { ops.Forward(m, y, rstd, x, wt, n); return nil },
		Backward: func(g [][]T, dy []T) error {
			ops.Forward(m, make([]T, n*D), rstd, x, wt, n) // rstd at the current point
			ops.Backward(m, g[0], g[1], dy, x, wt, rstd, n)
			return nil
		},
	}
}

func rmsnormCases[T nn.Float](ops RMSNormOps[T], big bool) []Case[T] {
	if big {
		return []Case[T]{rmsnormCase(ops, 64, 96, 1e-6, 4)}
	}
	return []Case[T]{rmsnormCase(ops, 1, 1, 1e-5, 1), rmsnormCase(ops, 3, 5, 1e-5, 2), rmsnormCase(ops, 4, 7, 0.3, 3)}
}

// The shapes and factors of scale-invariance and dx-orthogonal-x.
const (
	rmsnormScaleN, rmsnormScaleD = 4, 6
	rmsnormOrthoN, rmsnormOrthoD = 5, 8
)

var (
	rmsnormScales = []float64{1e-3, 0.5, 7, 1e4}
	rmsnormEps    = []float64{0, 1e-5, 0.3}
)

// RMSNorm returns the suite of RMSNorm.
func RMSNorm() Suite[RMSNormImpl] {
	spec := gradSpec[RMSNormImpl]{op: "RMSNorm", ref: RMSNormReference, dirs: 4,
		cases:   func(i RMSNormImpl, big bool) []Case[float64] { return rmsnormCases(i.RMSNormOps, big) },
		cases32: func(i RMSNormImpl, big bool) []Case[float32] { return rmsnormCases(i.F32, big) }}
	return Suite[RMSNormImpl]{
		Guide: OpGuide{
			What: "RMSNorm of each row of width D, scaled by a learned weight w, as Llama's input_layernorm.",
			Forward: []Step{
				{Eq: "r = sqrt(mean(x²) + ε),  y = w ⊙ x / r", Shape: "x, y [n,D], w [D], r [n] (1/r saved)",
					Why: "the row is divided by its root mean square; ε under the root makes an all-zero row give 0, not 0/0"},
			},
			Backward: []Step{
				{Eq: "g = dy ⊙ w;  dx = g/r − x · mean(g ⊙ x)/r³", Shape: "dx [n,D]",
					Why: "the direct term g/r minus the feedback through r, which depends on every element of the row. Treating r as a constant drops the second term: the forward still looks right"},
				{Eq: "dw = Σᵢ dyᵢ ⊙ xᵢ / rᵢ", Shape: "dw [D]", Why: "w scales every row, so its gradient sums over rows"},
			},
			Notes: []string{"At ε = 0 the output ignores the scale of x, so dx is orthogonal to x row by row: the dx-orthogonal-x check."},
		},
		Checks: append(spec.checks(),
			Check[RMSNormImpl]{Name: "forward-definition", Kind: Semantic, Run: rmsnormDefinition,
				Claim: "y = w ⊙ x / sqrt(mean(x²) + ε), recomputed here row by row, and an all-zero row gives 0, not NaN",
				Limit: "the forward only; finite differences tie the backward to it",
				Long: Long{
					Tests:  "y[i,j] = w[j]·x[i,j] / sqrt(Σⱼ x[i,j]²/D + ε), recomputed here one row at a time, and an all-zero row with ε > 0 gives y = 0",
					Shapes: rmsnormDefinitionShapes(),
					Proves: "the forward is RMSNorm as Llama defines it: the mean (not the sum) of squares, ε under the root, the weight applied after",
					Cannot: "the backward: finite differences tie it to this forward",
				}},
			Check[RMSNormImpl]{Name: "scale-invariance", Kind: Semantic, Run: rmsnormScaleInvariance,
				Claim: "with ε = 0, y(c·x) = y(x) for c > 0: the norm removes the scale of each row",
				Limit: "a property of the forward",
				Long: Long{
					Tests:  fmt.Sprintf("with ε = 0, y(c·x) = y(x) for c = %s", list(rmsnormScales)),
					Shapes: fmt.Sprintf("x [%d,%d]", rmsnormScaleN, rmsnormScaleD),
					Proves: "the forward divides by the root mean square of each row",
					Cannot: "anything about the backward",
				}},
			Check[RMSNormImpl]{Name: "dx-orthogonal-x", Kind: Semantic, Run: rmsnormOrthogonal,
				Claim: "Σ x ⊙ dx = D·mean(g ⊙ x)·ε/r³ per row (zero at ε = 0): the scale direction gets no gradient",
				Limit: "one direction of dx; finite differences check the rest",
				Long: Long{
					Tests:  "per row, Σ x ⊙ dx = D·mean(g ⊙ x)·ε/r³ (zero at ε = 0): moving x along itself changes nothing the norm sees",
					Shapes: fmt.Sprintf("x, dx [%d,%d] at ε = %s", rmsnormOrthoN, rmsnormOrthoD, list(rmsnormEps)),
					Proves: "the feedback term −x·mean(g⊙x)/r³ is present with the right coefficient",
					Cannot: "the other D−1 directions of dx; finite differences check them",
				}},
		),
		At: func(impl RMSNormImpl, s Sizes, seed uint64) Case[float64] {
			return rmsnormCase(impl.RMSNormOps, s.B*s.T, s.Dim, 1e-5, seed)
		},
		At32: func(impl RMSNormImpl, s Sizes, seed uint64) Case[float32] {
			return rmsnormCase(impl.F32, s.B*s.T, s.Dim, 1e-5, seed)
		},
		Reads: "B·T rows of width Dim, ε = 1e-5",
	}
}

// rmsnormDefinitionRows are the (n, D, ε) of forward-definition.
var rmsnormDefinitionRows = [][3]float64{{1, 1, 1e-5}, {1, 7, 0}, {3, 13, 1e-6}, {5, 2, 1e-5}}

func rmsnormDefinitionShapes() string {
	s := ""
	for _, r := range rmsnormDefinitionRows {
		s += shape("n", r[0], "D", r[1], "ε", r[2]) + "; "
	}
	return s + "one all-zero row, D = 3, ε = 1e-6"
}

func rmsnormDefinition(impl RMSNormImpl) Result {
	var worst float64
	for x, r := range rmsnormDefinitionRows {
		n, D, eps := int(r[0]), int(r[1]), r[2]
		m := nn.RMSNorm[float64]{D: D, Eps: eps}
		in, w := randn(uint64(170+x), n*D, 1), randn(uint64(180+x), D, 1)
		y, rstd := make([]float64, n*D), make([]float64, n)
		if err := protect(func() error { impl.Forward(m, y, rstd, in, w, n); return nil }); err != nil {
			return errored(err, "%v")
		}
		want := make([]float64, n*D)
		for i := range n {
			var ms float64
			for j := range D {
				ms += in[i*D+j] * in[i*D+j] / float64(D)
			}
			rr := math.Sqrt(ms + eps)
			for j := range D {
				want[i*D+j] = w[j] * in[i*D+j] / rr
			}
		}
		d, msg := compare(identical, pair{"y", y, want})
		worst = max(worst, d)
		if msg != "" {
			return measured(fail("n=%d, D=%d, ε=%g: %s", n, D, eps, msg), d)
		}
	}
	y, rstd := []float64{-1, -1, -1}, make([]float64, 1)
	if err := protect(func() error {
		impl.Forward(nn.RMSNorm[float64]{D: 3, Eps: 1e-6}, y, rstd, make([]float64, 3), []float64{1, 1, 1}, 1)
		return nil
	}); err != nil {
		return errored(err, "%v")
	}
	if _, msg := compare(0, pair{"zero row y", y, []float64{0, 0, 0}}); msg != "" {
		return fail("%s", msg)
	}
	return measured(pass("y = w ⊙ x / sqrt(mean(x²) + ε) on %d shapes, max error %.1e; an all-zero row gives 0", len(rmsnormDefinitionRows), worst), worst)
}

func rmsnormScaleInvariance(impl RMSNormImpl) Result {
	const n, D = rmsnormScaleN, rmsnormScaleD
	m := nn.RMSNorm[float64]{D: D}
	x, w := randn(10, n*D, 1), randn(11, D, 1)
	y, y2 := make([]float64, n*D), make([]float64, n*D)
	rstd := make([]float64, n)
	if err := protect(func() error { impl.Forward(m, y, rstd, x, w, n); return nil }); err != nil {
		return errored(err, "%v")
	}
	for _, c := range rmsnormScales {
		cx := clone(x)
		for i := range cx {
			cx[i] *= c
		}
		impl.Forward(m, y2, rstd, cx, w, n)
		if d, msg := compare(identical, pair{"y(c·x)", y2, y}); msg != "" {
			return measured(fail("c = %g: %s", c, msg), d)
		}
	}
	return pass("y(c·x) = y(x) for c = %s", list(rmsnormScales))
}

func rmsnormOrthogonal(impl RMSNormImpl) Result {
	const n, D = rmsnormOrthoN, rmsnormOrthoD
	var worst float64
	for _, eps := range rmsnormEps {
		m := nn.RMSNorm[float64]{D: D, Eps: eps}
		x, w, dy := randn(20, n*D, 1), randn(21, D, 1), randn(22, n*D, 1)
		y, rstd := make([]float64, n*D), make([]float64, n)
		dx, dw := make([]float64, n*D), make([]float64, D)
		if err := protect(func() error {
			impl.Forward(m, y, rstd, x, w, n)
			impl.Backward(m, dx, dw, dy, x, w, rstd, n)
			return nil
		}); err != nil {
			return errored(err, "%v")
		}
		for i := range n {
			var xdx, gx, ss float64
			for j := range D {
				xdx += x[i*D+j] * dx[i*D+j]
				gx += dy[i*D+j] * w[j] * x[i*D+j]
				ss += x[i*D+j] * x[i*D+j]
			}
			r := math.Sqrt(ss/D + eps)
			want := gx * eps / (r * r * r) // D·mean(g⊙x)·ε/r³ with mean = gx/D
			d, _ := diff([]float64{xdx}, []float64{want})
			worst = max(worst, d)
			if d > identical {
				return measured(fail("ε = %g, row %d: Σ x ⊙ dx = %.6g, want %.6g", eps, i, xdx, want), d)
			}
		}
	}
	return measured(pass("Σ x ⊙ dx matches D·mean(g⊙x)·ε/r³ at ε = %s, max error %.1e", list(rmsnormEps), worst), worst)
}
