package nn

import (
	"fmt"
	"math"
	"testing"
)

type rmsnormBackward = func(dx, dw, dy, x, w, rstd []float64, n int)

// rmsnormFD builds an RMSNorm check over x and w; the rstd passed to the
// backward is the one the forward saved at the unperturbed point.
func rmsnormFD(m RMSNorm[float64], n int, seed uint64, backward rmsnormBackward) fdCase {
	r := newRand(seed)
	x, w, g := randn(r, n*m.D, 1), randn(r, m.D, 1), randn(r, n*m.D, 1)
	y, rstd := make([]float64, n*m.D), make([]float64, n)
	return fdCase{
		loss: func() float64 {
			m.Forward(y, rstd, x, w, n)
			return dot(y, g)
		},
		inputs: []input{{"x", x}, {"w", w}},
		backward: func(grads [][]float64) {
			y, rstd := make([]float64, n*m.D), make([]float64, n)
			m.Forward(y, rstd, x, w, n)
			backward(grads[0], grads[1], g, x, w, rstd, n)
		},
	}
}

// naiveRMSNorm follows the definition in float64, one row at a time.
func naiveRMSNorm(x, w []float64, n, d int, eps float64) []float64 {
	y := make([]float64, n*d)
	for i := range n {
		var ms float64
		for j := range d {
			ms += x[i*d+j] * x[i*d+j] / float64(d)
		}
		r := math.Sqrt(ms + eps)
		for j := range d {
			y[i*d+j] = w[j] * x[i*d+j] / r
		}
	}
	return y
}

// TestRMSNormByHand checks forward and backward on x = (3, 4, 0, 0),
// w = (1, 2, 3, 4), ε = 0:
// mean(x²) = 25/4, r = 5/2, rstd = 0.4, y = w ⊙ x / r = (1.2, 3.2, 0, 0).
// With dy = (1, 0, 0, 0): g = dy ⊙ w = (1, 0, 0, 0), mean(g ⊙ x) = 3/4,
// r³ = 15.625, so dx = g/r − x·(3/4)/r³ = (0.4, 0, 0, 0) − 0.048·(3, 4, 0, 0)
// = (0.256, −0.192, 0, 0) and dw = dy ⊙ x / r = (1.2, 0, 0, 0).
func TestRMSNormByHand(t *testing.T) {
	m := RMSNorm[float64]{D: 4}
	x, w := []float64{3, 4, 0, 0}, []float64{1, 2, 3, 4}
	y, rstd := make([]float64, 4), make([]float64, 1)
	m.Forward(y, rstd, x, w, 1)
	near(t, "rstd", rstd, []float64{0.4}, 1e-16)
	near(t, "y", y, []float64{1.2, 3.2, 0, 0}, 1e-15)
	dx, dw := make([]float64, 4), make([]float64, 4)
	m.Backward(dx, dw, []float64{1, 0, 0, 0}, x, w, rstd, 1)
	near(t, "dx", dx, []float64{0.256, -0.192, 0, 0}, 1e-15)
	near(t, "dw", dw, []float64{1.2, 0, 0, 0}, 1e-15)
}

func TestRMSNormForward(t *testing.T) {
	r := newRand(1)
	for _, s := range []struct {
		n, d int
		eps  float64
	}{{1, 1, 1e-5}, {1, 7, 0}, {3, 13, 1e-6}, {5, 2, 1e-5}} {
		m := RMSNorm[float64]{D: s.d, Eps: s.eps}
		x, w := randn(r, s.n*s.d, 1), randn(r, s.d, 1)
		y, rstd := make([]float64, s.n*s.d), make([]float64, s.n)
		m.Forward(y, rstd, x, w, s.n)
		near(t, fmt.Sprintf("n=%d/D=%d", s.n, s.d), y, naiveRMSNorm(x, w, s.n, s.d, s.eps), 1e-14)
	}
	// An all-zero row with ε > 0 gives y = 0, not NaN.
	y, rstd := make([]float64, 3), make([]float64, 1)
	RMSNorm[float64]{D: 3, Eps: 1e-6}.Forward(y, rstd, make([]float64, 3), []float64{1, 1, 1}, 1)
	near(t, "zero row", y, []float64{0, 0, 0}, 0)
	// y may be x itself.
	x := []float64{3, 4, 0, 0}
	RMSNorm[float64]{D: 4}.Forward(x, rstd, x, []float64{1, 1, 1, 1}, 1)
	near(t, "in place", x, []float64{1.2, 1.6, 0, 0}, 1e-15)
}

// TestRMSNormScaleInvariant checks y(c·x) = y(x) for c > 0 with ε = 0:
// r scales by c, so x/r does not change.
func TestRMSNormScaleInvariant(t *testing.T) {
	const n, d = 3, 7
	r := newRand(2)
	m := RMSNorm[float64]{D: d}
	x, w := randn(r, n*d, 1), randn(r, d, 1)
	y, rstd := make([]float64, n*d), make([]float64, n)
	m.Forward(y, rstd, x, w, n)
	for _, c := range []float64{1e-3, 0.37, 5, 1e4} {
		cx := make([]float64, len(x))
		for i := range x {
			cx[i] = c * x[i]
		}
		cy := make([]float64, n*d)
		m.Forward(cy, rstd, cx, w, n)
		near(t, fmt.Sprintf("c=%g", c), cy, y, 1e-12)
	}
}

// TestRMSNormGradOrthogonal checks the consequence of scale invariance for
// the gradient. Σ_j x_j·dx_j = D·mean(g⊙x)/r − D·mean(x²)·mean(g⊙x)/r³
// = D·mean(g⊙x)·ε/r³, since r² = mean(x²) + ε. With ε = 0 the input gradient
// is orthogonal to x (whatever w and dy are); with ε > 0 the projection is
// exactly the ε term.
func TestRMSNormGradOrthogonal(t *testing.T) {
	const d = 9
	r := newRand(3)
	x, w, dy := randn(r, d, 1), randn(r, d, 1), randn(r, d, 1)
	for _, eps := range []float64{0, 1e-5, 0.3} {
		m := RMSNorm[float64]{D: d, Eps: eps}
		y, rstd := make([]float64, d), make([]float64, 1)
		m.Forward(y, rstd, x, w, 1)
		dx, dw := make([]float64, d), make([]float64, d)
		m.Backward(dx, dw, dy, x, w, rstd, 1)
		var gx, xx, dd float64
		for j := range d {
			gx += dy[j] * w[j] * x[j] / d
			xx += x[j] * x[j]
			dd += dx[j] * dx[j]
		}
		rr := 1 / rstd[0]
		want := d * gx * eps / (rr * rr * rr)
		got := dot(x, dx)
		if math.Abs(got-want) > 1e-14*math.Sqrt(xx*dd) {
			t.Errorf("ε=%g: x·dx = %.3g, want %.3g", eps, got, want)
		}
	}
}

func TestRMSNormGrad(t *testing.T) {
	for _, s := range []struct {
		n, d int
		eps  float64
	}{{1, 1, 1e-5}, {1, 2, 0}, {3, 5, 1e-5}, {4, 7, 0.1}, {2, 13, 0}} {
		t.Run(fmt.Sprintf("n=%d/D=%d/eps=%g", s.n, s.d, s.eps), func(t *testing.T) {
			m := RMSNorm[float64]{D: s.d, Eps: s.eps}
			r := rmsnormFD(m, s.n, 4, m.Backward).check()
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d elements, max rel %.2e, max abs %.2e (eps %g)", r.Checked, r.MaxRel, r.MaxAbs, r.Eps)
		})
	}
	t.Run("directional/n=19/D=64", func(t *testing.T) {
		m := RMSNorm[float64]{D: 64, Eps: 1e-5}
		r := rmsnormFD(m, 19, 5, m.Backward).directional(16)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d directions, max rel %.2e", r.Checked, r.MaxRel)
	})
}

func TestRMSNormAccumulates(t *testing.T) {
	m := RMSNorm[float64]{D: 5, Eps: 1e-5}
	if err := rmsnormFD(m, 3, 6, m.Backward).accumulates(); err != nil {
		t.Error(err)
	}
}

func TestRMSNormGradRejectsMutants(t *testing.T) {
	m := RMSNorm[float64]{D: 5, Eps: 1e-5}
	const d = 5
	rejectMutants(t, m.Backward, []mutant[rmsnormBackward]{
		{name: "r treated as a constant (no −x·mean(g⊙x)/r³ term)", backward: func(dx, dw, dy, x, w, rstd []float64, n int) {
			for i := range n {
				for j := range d {
					dx[i*d+j] += dy[i*d+j] * w[j] * rstd[i]
					dw[j] += dy[i*d+j] * x[i*d+j] * rstd[i]
				}
			}
		}},
		{name: "sum instead of mean in the feedback term", backward: func(dx, dw, dy, x, w, rstd []float64, n int) {
			m.Backward(dx, dw, dy, x, w, rstd, n)
			for i := range n {
				var gx float64
				for j := range d {
					gx += dy[i*d+j] * w[j] * x[i*d+j]
				}
				s := rstd[i]
				for j := range d {
					dx[i*d+j] -= x[i*d+j] * gx * (1 - 1.0/d) * s * s * s
				}
			}
		}},
		{name: "dw without the 1/r", backward: func(dx, dw, dy, x, w, rstd []float64, n int) {
			m.Backward(dx, make([]float64, d), dy, x, w, rstd, n)
			for i := range n {
				for j := range d {
					dw[j] += dy[i*d+j] * x[i*d+j]
				}
			}
		}},
		{name: "= instead of +=", byAccumulate: true, backward: func(dx, dw, dy, x, w, rstd []float64, n int) {
			clear(dx)
			clear(dw)
			m.Backward(dx, dw, dy, x, w, rstd, n)
		}},
	}, func(b rmsnormBackward) fdCase { return rmsnormFD(m, 3, 7, b) })
}

func TestRMSNormFloat32(t *testing.T) {
	const n, d = 5, 31
	r := newRand(8)
	x, w, dy := randn(r, n*d, 1), randn(r, d, 1), randn(r, n*d, 1)
	m64, m32 := RMSNorm[float64]{D: d, Eps: 1e-5}, RMSNorm[float32]{D: d, Eps: 1e-5}
	y, rstd, dx, dw := make([]float64, n*d), make([]float64, n), make([]float64, n*d), make([]float64, d)
	m64.Forward(y, rstd, x, w, n)
	m64.Backward(dx, dw, dy, x, w, rstd, n)
	y32, rstd32, dx32, dw32 := make([]float32, n*d), make([]float32, n), make([]float32, n*d), make([]float32, d)
	m32.Forward(y32, rstd32, to32(x), to32(w), n)
	m32.Backward(dx32, dw32, to32(dy), to32(x), to32(w), rstd32, n)
	agree(t, "y", y, y32, 1e-5)
	agree(t, "rstd", rstd, rstd32, 1e-5)
	agree(t, "dx", dx, dx32, 1e-5)
	agree(t, "dw", dw, dw32, 1e-5)
}

func TestRMSNormPanics(t *testing.T) {
	m := RMSNorm[float64]{D: 4}
	panics(t, "nn: RMSNorm.Forward: len(rstd) = 1, want n = 2", func() {
		m.Forward(make([]float64, 8), make([]float64, 1), make([]float64, 8), make([]float64, 4), 2)
	})
	panics(t, "nn: RMSNorm.Backward: len(dw) = 3, want D = 4", func() {
		m.Backward(make([]float64, 4), make([]float64, 3), make([]float64, 4), make([]float64, 4), make([]float64, 4), make([]float64, 1), 1)
	})
	panics(t, "nn: RMSNorm.Forward: Eps = -1, want >= 0", func() {
		RMSNorm[float64]{D: 4, Eps: -1}.Forward(nil, nil, nil, nil, 0)
	})
}
