package nn

import (
	"fmt"
	"testing"
)

type linearBackward = func(dx, dw, db, dy, x, w []float64, n int)

// linearFD builds a Linear check with seeded random inputs, weights and loss
// weights g (L = Σ g⊙y), differentiated by backward.
func linearFD(l Linear[float64], n int, seed uint64, backward linearBackward) fdCase {
	r := newRand(seed)
	x, w := randn(r, n*l.In, 1), randn(r, l.Out*l.In, 1)
	var b []float64
	inputs := []input{{"x", x}, {"w", w}}
	if l.Bias {
		b = randn(r, l.Out, 1)
		inputs = append(inputs, input{"b", b})
	}
	g := randn(r, n*l.Out, 1)
	y := make([]float64, n*l.Out)
	return fdCase{
		loss: func() float64 {
			l.Forward(y, x, w, b, n)
			return dot(y, g)
		},
		inputs: inputs,
		backward: func(grads [][]float64) {
			var db []float64
			if l.Bias {
				db = grads[2]
			}
			backward(grads[0], grads[1], db, g, x, w, n)
		},
	}
}

// naiveLinear computes y = x wᵀ + b by building wᵀ explicitly and
// multiplying in the textbook i-k-j order, a different loop from Forward's.
func naiveLinear(x, w, b []float64, n, in, out int) []float64 {
	wt := make([]float64, in*out)
	for o := range out {
		for k := range in {
			wt[k*out+o] = w[o*in+k]
		}
	}
	y := make([]float64, n*out)
	for i := range n {
		if b != nil {
			copy(y[i*out:(i+1)*out], b)
		}
		for k := range in {
			for o := range out {
				y[i*out+o] += x[i*in+k] * wt[k*out+o]
			}
		}
	}
	return y
}

// TestLinearForward checks a case by hand and random odd and prime shapes
// against naiveLinear.
func TestLinearForward(t *testing.T) {
	// x = (1, 2), w = [[1, 0], [0, 1], [1, 1]], b = (0.5, −1, 0):
	// y = (1 + 0.5, 2 − 1, 1 + 2) = (1.5, 1, 3).
	y := make([]float64, 3)
	Linear[float64]{In: 2, Out: 3, Bias: true}.Forward(y, []float64{1, 2}, []float64{1, 0, 0, 1, 1, 1}, []float64{0.5, -1, 0}, 1)
	near(t, "hand y", y, []float64{1.5, 1, 3}, 0)

	r := newRand(1)
	for _, s := range []struct {
		n, in, out int
		bias       bool
	}{{1, 1, 1, true}, {1, 13, 2, false}, {3, 5, 7, true}, {7, 2, 11, true}, {11, 17, 3, false}} {
		l := Linear[float64]{In: s.in, Out: s.out, Bias: s.bias}
		x, w := randn(r, s.n*s.in, 1), randn(r, s.out*s.in, 1)
		var b []float64
		if s.bias {
			b = randn(r, s.out, 1)
		}
		y := make([]float64, s.n*s.out)
		l.Forward(y, x, w, b, s.n)
		near(t, fmt.Sprintf("n=%d/In=%d/Out=%d", s.n, s.in, s.out), y, naiveLinear(x, w, b, s.n, s.in, s.out), 1e-13)
	}
}

// TestLinearGrad checks every element of dx, dw and db against the 4-point
// stencil on small shapes, and random directions on a larger one.
func TestLinearGrad(t *testing.T) {
	for _, s := range []struct {
		n, in, out int
		bias       bool
	}{{1, 1, 1, true}, {3, 5, 7, true}, {2, 4, 3, false}, {5, 2, 11, true}} {
		t.Run(fmt.Sprintf("n=%d/In=%d/Out=%d/Bias=%v", s.n, s.in, s.out, s.bias), func(t *testing.T) {
			l := Linear[float64]{In: s.in, Out: s.out, Bias: s.bias}
			r := linearFD(l, s.n, 2, l.Backward).check()
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d elements, max rel %.2e, max abs %.2e (eps %g)", r.Checked, r.MaxRel, r.MaxAbs, r.Eps)
		})
	}
	t.Run("directional/n=17/In=31/Out=29", func(t *testing.T) {
		l := Linear[float64]{In: 31, Out: 29, Bias: true}
		r := linearFD(l, 17, 3, l.Backward).directional(16)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d directions, max rel %.2e", r.Checked, r.MaxRel)
	})
}

func TestLinearAccumulates(t *testing.T) {
	for _, bias := range []bool{true, false} {
		l := Linear[float64]{In: 4, Out: 5, Bias: bias}
		if err := linearFD(l, 3, 4, l.Backward).accumulates(); err != nil {
			t.Errorf("Bias=%v: %v", bias, err)
		}
	}
}

// TestLinearGradRejectsMutants runs broken backwards through the checks. The
// layer is square (In = Out) so that the transposition mutants are
// well-shaped and so are only visible in the values.
func TestLinearGradRejectsMutants(t *testing.T) {
	l := Linear[float64]{In: 4, Out: 4, Bias: true}
	const d = 4
	rejectMutants(t, l.Backward, []mutant[linearBackward]{
		{name: "dw = xᵀ dy (x and dy swapped)", backward: func(dx, dw, db, dy, x, w []float64, n int) {
			l.Backward(dx, make([]float64, len(dw)), db, dy, x, w, n)
			for i := range n {
				for o := range d {
					for k := range d {
						dw[o*d+k] += x[i*d+o] * dy[i*d+k]
					}
				}
			}
		}},
		{name: "dx = dy wᵀ (weight transposed)", backward: func(dx, dw, db, dy, x, w []float64, n int) {
			l.Backward(make([]float64, len(dx)), dw, db, dy, x, w, n)
			for i := range n {
				for o := range d {
					for k := range d {
						dx[i*d+k] += dy[i*d+o] * w[k*d+o]
					}
				}
			}
		}},
		{name: "missing bias gradient", backward: func(dx, dw, db, dy, x, w []float64, n int) {
			l.Backward(dx, dw, make([]float64, len(db)), dy, x, w, n)
		}},
		{name: "= instead of +=", byAccumulate: true, backward: func(dx, dw, db, dy, x, w []float64, n int) {
			clear(dx)
			clear(dw)
			clear(db)
			l.Backward(dx, dw, db, dy, x, w, n)
		}},
	}, func(b linearBackward) fdCase { return linearFD(l, 3, 5, b) })
}

func TestLinearFloat32(t *testing.T) {
	const n, in, out = 7, 13, 5
	l64 := Linear[float64]{In: in, Out: out, Bias: true}
	l32 := Linear[float32]{In: in, Out: out, Bias: true}
	r := newRand(6)
	x, w, b, dy := randn(r, n*in, 1), randn(r, out*in, 1), randn(r, out, 1), randn(r, n*out, 1)
	y, dx, dw, db := make([]float64, n*out), make([]float64, n*in), make([]float64, out*in), make([]float64, out)
	l64.Forward(y, x, w, b, n)
	l64.Backward(dx, dw, db, dy, x, w, n)
	y32, dx32, dw32, db32 := make([]float32, n*out), make([]float32, n*in), make([]float32, out*in), make([]float32, out)
	l32.Forward(y32, to32(x), to32(w), to32(b), n)
	l32.Backward(dx32, dw32, db32, to32(dy), to32(x), to32(w), n)
	agree(t, "y", y, y32, 1e-5)
	agree(t, "dx", dx, dx32, 1e-5)
	agree(t, "dw", dw, dw32, 1e-5)
	agree(t, "db", db, db32, 1e-5)
}

func TestLinearPanics(t *testing.T) {
	l := Linear[float64]{In: 2, Out: 3, Bias: true}
	panics(t, "nn: Linear.Forward: len(x) = 5, want n*In = 6", func() {
		l.Forward(make([]float64, 9), make([]float64, 5), make([]float64, 6), make([]float64, 3), 3)
	})
	panics(t, "nn: Linear.Backward: len(dw) = 5, want Out*In = 6", func() {
		l.Backward(make([]float64, 2), make([]float64, 5), make([]float64, 3), make([]float64, 3), make([]float64, 2), make([]float64, 6), 1)
	})
	panics(t, "nn: Linear.Forward: Bias is false but len(b) = 3", func() {
		Linear[float64]{In: 2, Out: 3}.Forward(make([]float64, 3), make([]float64, 2), make([]float64, 6), make([]float64, 3), 1)
	})
	panics(t, "nn: Linear.Forward: In = 0, want >= 1", func() {
		Linear[float64]{Out: 3}.Forward(nil, nil, nil, nil, 0)
	})
}
