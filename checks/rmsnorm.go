package checks

import (
	"math"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

// RMSNormImpl is an RMSNorm forward and backward in float64, with the
// signatures of nn.RMSNorm's methods taken as method expressions.
type RMSNormImpl struct {
	Forward  func(m nn.RMSNorm[float64], y, rstd, x, w []float64, n int)
	Backward func(m nn.RMSNorm[float64], dx, dw, dy, x, w, rstd []float64, n int)
}

// RMSNormReference is nn.RMSNorm.
var RMSNormReference = RMSNormImpl{Forward: nn.RMSNorm[float64].Forward, Backward: nn.RMSNorm[float64].Backward}

func rmsnormDiff(impl RMSNormImpl, n, D int, eps float64, seed uint64) Diff {
	m := nn.RMSNorm[float64]{D: D, Eps: eps}
	x, w := randn(seed, n*D, 1), randn(seed+1, D, 1)
	for i := range w {
		w[i] += 1 // weights near one, as trained norms are
	}
	rstd := make([]float64, n)
	return Diff{
		Name:    shape("n", n, "D", D, "ε", eps),
		Inputs:  []gradcheck.Param{{Name: "x", X: x}, {Name: "w", X: w}},
		Out:     n * D,
		Forward: func(y []float64) { impl.Forward(m, y, rstd, x, w, n) },
		Backward: func(g [][]float64, dy []float64) {
			impl.Forward(m, make([]float64, n*D), rstd, x, w, n) // rstd at the current point
			impl.Backward(m, g[0], g[1], dy, x, w, rstd, n)
		},
	}
}

// RMSNorm returns the checks of RMSNorm.
func RMSNorm() []Check[RMSNormImpl] {
	small := func(impl RMSNormImpl) []Diff {
		return []Diff{rmsnormDiff(impl, 1, 1, 1e-5, 1), rmsnormDiff(impl, 3, 5, 1e-5, 2), rmsnormDiff(impl, 4, 7, 0.3, 3)}
	}
	big := func(impl RMSNormImpl) []Diff { return []Diff{rmsnormDiff(impl, 64, 96, 1e-6, 4)} }
	return append(gradientChecks("RMSNorm", small, big),
		Check[RMSNormImpl]{Name: "scale-invariance", Kind: Semantic, Run: rmsnormScaleInvariance,
			Claim: "with ε = 0, y(c·x) = y(x) for c > 0: the norm removes the scale of each row",
			Limit: "a property of the forward"},
		Check[RMSNormImpl]{Name: "dx-orthogonal-x", Kind: Semantic, Run: rmsnormOrthogonal,
			Claim: "Σ x ⊙ dx = D·mean(g ⊙ x)·ε/r³ per row (zero at ε = 0): the scale direction gets no gradient",
			Limit: "one direction of dx; finite differences check the rest"},
	)
}

func rmsnormScaleInvariance(impl RMSNormImpl) Result {
	const n, D = 4, 6
	m := nn.RMSNorm[float64]{D: D}
	x, w := randn(10, n*D, 1), randn(11, D, 1)
	y, y2 := make([]float64, n*D), make([]float64, n*D)
	rstd := make([]float64, n)
	if err := protect(func() error { impl.Forward(m, y, rstd, x, w, n); return nil }); err != nil {
		return errored(err, "%v")
	}
	for _, c := range []float64{1e-3, 0.5, 7, 1e4} {
		cx := clone(x)
		for i := range cx {
			cx[i] *= c
		}
		impl.Forward(m, y2, rstd, cx, w, n)
		if d, msg := compare(identical, pair{"y(c·x)", y2, y}); msg != "" {
			res := fail("c = %g: %s", c, msg)
			res.Error = d
			return res
		}
	}
	return pass("y(c·x) = y(x) for c = 1e-3, 0.5, 7, 1e4")
}

func rmsnormOrthogonal(impl RMSNormImpl) Result {
	const n, D = 5, 8
	var worst float64
	for _, eps := range []float64{0, 1e-5, 0.3} {
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
				res := fail("ε = %g, row %d: Σ x ⊙ dx = %.6g, want %.6g", eps, i, xdx, want)
				res.Error = d
				return res
			}
		}
	}
	res := pass("Σ x ⊙ dx matches D·mean(g⊙x)·ε/r³ at ε = 0, 1e-5, 0.3, max error %.1e", worst)
	res.Error = worst
	return res
}
