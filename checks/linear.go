package checks

import (
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

// LinearImpl is a Linear forward and backward in float64, with the
// signatures of nn.Linear's methods taken as method expressions.
type LinearImpl struct {
	Forward  func(l nn.Linear[float64], y, x, w, b []float64, n int)
	Backward func(l nn.Linear[float64], dx, dw, db, dy, x, w []float64, n int)
}

// LinearReference is nn.Linear.
var LinearReference = LinearImpl{Forward: nn.Linear[float64].Forward, Backward: nn.Linear[float64].Backward}

// linearDiff differentiates y with respect to x, w and, with a bias, b.
func linearDiff(impl LinearImpl, n, In, Out int, bias bool, seed uint64) Diff {
	l := nn.Linear[float64]{In: In, Out: Out, Bias: bias}
	x, w := randn(seed, n*In, 1), randn(seed+1, Out*In, 1)
	inputs := []gradcheck.Param{{Name: "x", X: x}, {Name: "w", X: w}}
	var b []float64
	if bias {
		b = randn(seed+2, Out, 1)
		inputs = append(inputs, gradcheck.Param{Name: "b", X: b})
	}
	return Diff{
		Name:    shape("n", n, "In", In, "Out", Out, "bias", bias),
		Inputs:  inputs,
		Out:     n * Out,
		Forward: func(y []float64) { impl.Forward(l, y, x, w, b, n) },
		Backward: func(g [][]float64, dy []float64) {
			var db []float64
			if bias {
				db = g[2]
			}
			impl.Backward(l, g[0], g[1], db, dy, x, w, n)
		},
	}
}

// Linear returns the checks of Linear. The element cases include square
// layers, where a transposed weight has the right shape.
func Linear() []Check[LinearImpl] {
	small := func(impl LinearImpl) []Diff {
		return []Diff{
			linearDiff(impl, 1, 1, 1, true, 1),
			linearDiff(impl, 3, 4, 4, true, 4),
			linearDiff(impl, 2, 3, 5, false, 7),
			linearDiff(impl, 3, 5, 5, false, 10),
		}
	}
	big := func(impl LinearImpl) []Diff {
		return []Diff{linearDiff(impl, 16, 48, 40, true, 13), linearDiff(impl, 8, 32, 32, false, 16)}
	}
	return append(gradientChecks("Linear", small, big),
		Check[LinearImpl]{Name: "forward-definition", Kind: Semantic, Run: linearDefinition,
			Claim: "y[i,o] = Σ_k x[i,k]·w[o,k] + b[o] with w (Out, In) as nn.Linear stores it, recomputed here, with and without bias",
			Limit: "the forward only; finite differences tie the backward to it"},
	)
}

func linearDefinition(impl LinearImpl) Result {
	var worst float64
	for x, bias := range []bool{true, false} {
		const n, In, Out = 3, 4, 6
		l := nn.Linear[float64]{In: In, Out: Out, Bias: bias}
		in, w := randn(uint64(130+x), n*In, 1), randn(uint64(140+x), Out*In, 1)
		var b []float64
		if bias {
			b = randn(uint64(150+x), Out, 1)
		}
		y := make([]float64, n*Out)
		if err := protect(func() error { impl.Forward(l, y, in, w, b, n); return nil }); err != nil {
			return errored(err, "%v")
		}
		want := make([]float64, n*Out)
		for i := range n {
			for o := range Out {
				for k := range In {
					want[i*Out+o] += in[i*In+k] * w[o*In+k]
				}
				if bias {
					want[i*Out+o] += b[o]
				}
			}
		}
		d, msg := compare(identical, pair{"y", y, want})
		if msg != "" {
			res := fail("bias %v: %s", bias, msg)
			res.Error = d
			return res
		}
		worst = max(worst, d)
	}
	res := pass("y = x wᵀ (+ b) at n=3, In=4, Out=6, with and without bias, max error %.1e", worst)
	res.Error = worst
	return res
}
