package checks

import "github.com/attnlab/attnlab/nn"

// LinearOps is a Linear forward and backward in precision T, with the
// signatures of nn.Linear's methods taken as method expressions.
type LinearOps[T nn.Float] struct {
	Forward  func(l nn.Linear[T], y, x, w, b []T, n int)
	Backward func(l nn.Linear[T], dx, dw, db, dy, x, w []T, n int)
}

// LinearImpl is a Linear layer: its float64 path and its float32 path
// (GEMM).
type LinearImpl struct {
	LinearOps[float64]
	F32 LinearOps[float32]
}

func linearOps[T nn.Float]() LinearOps[T] {
	return LinearOps[T]{Forward: nn.Linear[T].Forward, Backward: nn.Linear[T].Backward}
}

// LinearReference is nn.Linear.
var LinearReference = LinearImpl{linearOps[float64](), linearOps[float32]()}

// linearCase differentiates y with respect to x, w and, with a bias, b.
func linearCase[T nn.Float](ops LinearOps[T], n, In, Out int, bias bool, seed uint64) Case[T] {
	l := nn.Linear[T]{In: In, Out: Out, Bias: bias}
	x, w := randT[T](seed, n*In, 1), randT[T](seed+1, Out*In, 1)
	inputs := []Input[T]{{"x", x}, {"w", w}}
	var b []T
	if bias {
		b = randT[T](seed+2, Out, 1)
		inputs = append(inputs, Input[T]{"b", b})
	}
	return Case[T]{
		Name:    shape("n", n, "In", In, "Out", Out, "bias", bias),
		Inputs:  inputs,
		Out:     n * Out,
		Forward: func(y []T) error { ops.Forward(l, y, x, w, b, n); return nil },
		Backward: func(g [][]T, dy []T) error {
			var db []T
			if bias {
				db = g[2]
			}
			ops.Backward(l, g[0], g[1], db, dy, x, w, n)
			return nil
		},
	}
}

// linearCases include square layers, where a transposed weight has the
// right shape.
func linearCases[T nn.Float](ops LinearOps[T], big bool) []Case[T] {
	if big {
		return []Case[T]{linearCase(ops, 16, 48, 40, true, 13), linearCase(ops, 8, 32, 32, false, 16)}
	}
	return []Case[T]{
		linearCase(ops, 1, 1, 1, true, 1),
		linearCase(ops, 3, 4, 4, true, 4),
		linearCase(ops, 2, 3, 5, false, 7),
		linearCase(ops, 3, 5, 5, false, 10),
	}
}

// linearDefinitionShapes are the (n, In, Out, bias) of forward-definition.
var linearDefinitionShapes = []struct {
	n, in, out int
	bias       bool
}{{1, 1, 1, true}, {1, 13, 2, false}, {3, 5, 7, true}, {7, 2, 11, true}, {11, 17, 3, false}}

// Linear returns the suite of Linear.
func Linear() Suite[LinearImpl] {
	spec := gradSpec[LinearImpl]{op: "Linear", ref: LinearReference, dirs: 4,
		cases:   func(i LinearImpl, big bool) []Case[float64] { return linearCases(i.LinearOps, big) },
		cases32: func(i LinearImpl, big bool) []Case[float32] { return linearCases(i.F32, big) }}
	var defShapes []string
	for _, s := range linearDefinitionShapes {
		defShapes = append(defShapes, shape("n", s.n, "In", s.in, "Out", s.out, "bias", s.bias))
	}
	return Suite[LinearImpl]{
		Guide: OpGuide{
			What: "A linear layer y = x wᵀ + b with w stored (Out, In) as nn.Linear and Hugging Face store it.",
			Forward: []Step{
				{Eq: "y = x wᵀ + b", Shape: "x [n,In], w [Out,In], b [Out] → y [n,Out]", Why: "one dot product per output feature"},
			},
			Backward: []Step{
				{Eq: "dx = dy w", Shape: "[n,Out]·[Out,In] = [n,In]", Why: "the transpose of the forward's map"},
				{Eq: "dw = dyᵀ x,  db = Σᵢ dyᵢ", Shape: "dw [Out,In], db [Out]", Why: "every row of x meets every output feature"},
			},
		},
		Checks: append(spec.checks(),
			Check[LinearImpl]{Name: "forward-definition", Kind: Semantic, Run: linearDefinition,
				Claim: "y[i,o] = Σ_k x[i,k]·w[o,k] + b[o] with w (Out, In) as nn.Linear stores it, recomputed here, with and without bias",
				Limit: "the forward only; finite differences tie the backward to it",
				Long: Long{
					Tests:  "y[i,o] = Σ_k x[i,k]·w[o,k] + b[o], recomputed here through an explicit wᵀ in the textbook i-k-o loop order, with and without bias",
					Shapes: list(defShapes),
					Proves: "the forward uses w as (Out, In)",
					Cannot: "the backward: finite differences tie it to this forward",
				}},
		),
		At: func(impl LinearImpl, s Sizes, seed uint64) Case[float64] {
			return linearCase(impl.LinearOps, s.B*s.T, s.Dim, s.Dim, true, seed)
		},
		At32: func(impl LinearImpl, s Sizes, seed uint64) Case[float32] {
			return linearCase(impl.F32, s.B*s.T, s.Dim, s.Dim, true, seed)
		},
		Reads: "B·T rows, a square layer Dim → Dim with bias",
	}
}

func linearDefinition(impl LinearImpl) Result {
	var worst float64
	for x, s := range linearDefinitionShapes {
		n, In, Out := s.n, s.in, s.out
		l := nn.Linear[float64]{In: In, Out: Out, Bias: s.bias}
		in, w := randn(uint64(130+x), n*In, 1), randn(uint64(140+x), Out*In, 1)
		var b []float64
		if s.bias {
			b = randn(uint64(150+x), Out, 1)
		}
		y := make([]float64, n*Out)
		if err := protect(func() error { impl.Forward(l, y, in, w, b, n); return nil }); err != nil {
			return errored(err, "%v")
		}
		wt := make([]float64, In*Out)
		for o := range Out {
			for k := range In {
				wt[k*Out+o] = w[o*In+k]
			}
		}
		want := make([]float64, n*Out)
		for i := range n {
			if b != nil {
				copy(want[i*Out:(i+1)*Out], b)
			}
			for k := range In {
				for o := range Out {
					want[i*Out+o] += in[i*In+k] * wt[k*Out+o]
				}
			}
		}
		d, msg := compare(1e-13, pair{"y", y, want})
		worst = max(worst, d)
		if msg != "" {
			return measured(fail("%s: %s", shape("n", n, "In", In, "Out", Out, "bias", s.bias), msg), d)
		}
	}
	return measured(pass("y = x wᵀ (+ b) on %d shapes, with and without bias, max error %.1e", len(linearDefinitionShapes), worst), worst)
}
