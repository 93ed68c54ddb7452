package nn

import (
	"fmt"
	"math"
	"testing"
)

type swigluBackward = func(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int)

// swigluFD builds a SwiGLU check over x and the three weights. The backward
// gets the activations the forward saved at the unperturbed point.
func swigluFD(s SwiGLU[float64], n int, seed uint64, backward swigluBackward) fdCase {
	r := newRand(seed)
	x := randn(r, n*s.D, 1)
	wGate, wUp, wDown := randn(r, s.F*s.D, 0.7), randn(r, s.F*s.D, 0.7), randn(r, s.D*s.F, 0.7)
	g := randn(r, n*s.D, 1)
	y, a, u, h := make([]float64, n*s.D), make([]float64, n*s.F), make([]float64, n*s.F), make([]float64, n*s.F)
	return fdCase{
		loss: func() float64 {
			s.Forward(y, a, u, h, x, wGate, wUp, wDown, n)
			return dot(y, g)
		},
		inputs: []input{{"x", x}, {"wGate", wGate}, {"wUp", wUp}, {"wDown", wDown}},
		backward: func(grads [][]float64) {
			y, a, u, h := make([]float64, n*s.D), make([]float64, n*s.F), make([]float64, n*s.F), make([]float64, n*s.F)
			s.Forward(y, a, u, h, x, wGate, wUp, wDown, n)
			backward(grads[0], grads[1], grads[2], grads[3], g, x, wGate, wUp, wDown, a, u, h, n)
		},
	}
}

// naiveSwiGLU writes the MLP as one expression per output element.
func naiveSwiGLU(x, wGate, wUp, wDown []float64, n, d, f int) []float64 {
	y := make([]float64, n*d)
	for i := range n {
		for o := range d {
			for j := range f {
				var a, u float64
				for k := range d {
					a += x[i*d+k] * wGate[j*d+k]
					u += x[i*d+k] * wUp[j*d+k]
				}
				y[i*d+o] += wDown[o*f+j] * a / (1 + math.Exp(-a)) * u
			}
		}
	}
	return y
}

// TestSwiGLUByHand takes D = F = 1, wGate = 1, wUp = 2, wDown = 3 and
// x = ln 3: a = ln 3, σ(a) = 3/4, u = 2 ln 3, h = (3/4)·ln 3 · 2 ln 3
// = 1.5·ln²3, y = 3h = 4.5·ln²3.
func TestSwiGLUByHand(t *testing.T) {
	ln3 := math.Log(3)
	y, a, u, h := make([]float64, 1), make([]float64, 1), make([]float64, 1), make([]float64, 1)
	SwiGLU[float64]{D: 1, F: 1}.Forward(y, a, u, h, []float64{ln3}, []float64{1}, []float64{2}, []float64{3}, 1)
	near(t, "a", a, []float64{ln3}, 0)
	near(t, "u", u, []float64{2 * ln3}, 0)
	near(t, "h", h, []float64{1.5 * ln3 * ln3}, 1e-15)
	near(t, "y", y, []float64{4.5 * ln3 * ln3}, 1e-15)
}

func TestSwiGLUForward(t *testing.T) {
	r := newRand(1)
	for _, s := range []struct{ n, d, f int }{{1, 1, 1}, {1, 3, 7}, {5, 4, 11}, {3, 13, 2}} {
		m := SwiGLU[float64]{D: s.d, F: s.f}
		x, wg, wu, wd := randn(r, s.n*s.d, 1), randn(r, s.f*s.d, 1), randn(r, s.f*s.d, 1), randn(r, s.d*s.f, 1)
		y, a, u, h := make([]float64, s.n*s.d), make([]float64, s.n*s.f), make([]float64, s.n*s.f), make([]float64, s.n*s.f)
		m.Forward(y, a, u, h, x, wg, wu, wd, s.n)
		near(t, fmt.Sprintf("n=%d/D=%d/F=%d", s.n, s.d, s.f), y, naiveSwiGLU(x, wg, wu, wd, s.n, s.d, s.f), 1e-13)
	}
}

func TestSwiGLUGrad(t *testing.T) {
	for _, s := range []struct{ n, d, f int }{{1, 1, 1}, {1, 2, 3}, {3, 4, 7}, {2, 5, 3}} {
		t.Run(fmt.Sprintf("n=%d/D=%d/F=%d", s.n, s.d, s.f), func(t *testing.T) {
			m := SwiGLU[float64]{D: s.d, F: s.f}
			r := swigluFD(m, s.n, 2, m.Backward).check()
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d elements, max rel %.2e, max abs %.2e (eps %g)", r.Checked, r.MaxRel, r.MaxAbs, r.Eps)
		})
	}
	t.Run("directional/n=9/D=32/F=86", func(t *testing.T) {
		m := SwiGLU[float64]{D: 32, F: 86}
		r := swigluFD(m, 9, 3, m.Backward).directional(16)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d directions, max rel %.2e", r.Checked, r.MaxRel)
	})
}

func TestSwiGLUAccumulates(t *testing.T) {
	m := SwiGLU[float64]{D: 3, F: 5}
	if err := swigluFD(m, 2, 4, m.Backward).accumulates(); err != nil {
		t.Error(err)
	}
}

// swigluWithGate is SwiGLU's backward with the gate's backward replaced, the
// way a mutant breaks one piece of the composition.
func swigluWithGate(s SwiGLU[float64], gate siluMulBackward) swigluBackward {
	return func(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
		expand, contract := Linear[float64]{In: s.D, Out: s.F}, Linear[float64]{In: s.F, Out: s.D}
		dh, da, du := make([]float64, n*s.F), make([]float64, n*s.F), make([]float64, n*s.F)
		contract.Backward(dh, dwDown, nil, dy, h, wDown, n)
		gate(da, du, dh, a, u)
		expand.Backward(dx, dwUp, nil, du, x, wUp, n)
		expand.Backward(dx, dwGate, nil, da, x, wGate, n)
	}
}

func TestSwiGLUGradRejectsMutants(t *testing.T) {
	m := SwiGLU[float64]{D: 3, F: 5}
	silu := func(a float64) float64 { return a / (1 + math.Exp(-a)) }
	rejectMutants(t, m.Backward, []mutant[swigluBackward]{
		{name: "no SiLU derivative (silu(a) in place of silu'(a))", backward: swigluWithGate(m, func(da, du, dh, a, u []float64) {
			for j := range dh {
				da[j] += dh[j] * u[j] * silu(a[j])
				du[j] += dh[j] * silu(a[j])
			}
		})},
		{name: "gate and up gradients swapped", backward: swigluWithGate(m, func(da, du, dh, a, u []float64) {
			SiLUMul[float64]{}.Backward(du, da, dh, a, u)
		})},
		{name: "dx from the gate path only", backward: func(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
			expand, contract := Linear[float64]{In: m.D, Out: m.F}, Linear[float64]{In: m.F, Out: m.D}
			dh, da, du := make([]float64, n*m.F), make([]float64, n*m.F), make([]float64, n*m.F)
			contract.Backward(dh, dwDown, nil, dy, h, wDown, n)
			SiLUMul[float64]{}.Backward(da, du, dh, a, u)
			expand.Backward(make([]float64, len(dx)), dwUp, nil, du, x, wUp, n) // the up path's share of dx is dropped
			expand.Backward(dx, dwGate, nil, da, x, wGate, n)
		}},
		{name: "= instead of +=", byAccumulate: true, backward: func(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []float64, n int) {
			for _, b := range [][]float64{dx, dwGate, dwUp, dwDown} {
				clear(b)
			}
			m.Backward(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h, n)
		}},
	}, func(b swigluBackward) fdCase { return swigluFD(m, 3, 5, b) })
}

func TestSwiGLUFloat32(t *testing.T) {
	const n, d, f = 3, 8, 21
	r := newRand(6)
	x, wg, wu, wd, dy := randn(r, n*d, 1), randn(r, f*d, 0.3), randn(r, f*d, 0.3), randn(r, d*f, 0.3), randn(r, n*d, 1)
	m64, m32 := SwiGLU[float64]{D: d, F: f}, SwiGLU[float32]{D: d, F: f}

	y, a, u, h := make([]float64, n*d), make([]float64, n*f), make([]float64, n*f), make([]float64, n*f)
	dx, dwg, dwu, dwd := make([]float64, n*d), make([]float64, f*d), make([]float64, f*d), make([]float64, d*f)
	m64.Forward(y, a, u, h, x, wg, wu, wd, n)
	m64.Backward(dx, dwg, dwu, dwd, dy, x, wg, wu, wd, a, u, h, n)

	y32, a32, u32, h32 := make([]float32, n*d), make([]float32, n*f), make([]float32, n*f), make([]float32, n*f)
	dx32, dwg32, dwu32, dwd32 := make([]float32, n*d), make([]float32, f*d), make([]float32, f*d), make([]float32, d*f)
	x32, wg32, wu32, wd32 := to32(x), to32(wg), to32(wu), to32(wd)
	m32.Forward(y32, a32, u32, h32, x32, wg32, wu32, wd32, n)
	m32.Backward(dx32, dwg32, dwu32, dwd32, to32(dy), x32, wg32, wu32, wd32, a32, u32, h32, n)

	agree(t, "y", y, y32, 1e-5)
	agree(t, "dx", dx, dx32, 1e-5)
	agree(t, "dwGate", dwg, dwg32, 1e-5)
	agree(t, "dwUp", dwu, dwu32, 1e-5)
	agree(t, "dwDown", dwd, dwd32, 1e-5)
}

func TestSwiGLUPanics(t *testing.T) {
	m := SwiGLU[float64]{D: 2, F: 3}
	panics(t, "nn: SwiGLU.Forward: len(h) = 5, want n*F = 6", func() {
		m.Forward(make([]float64, 4), make([]float64, 6), make([]float64, 6), make([]float64, 5),
			make([]float64, 4), make([]float64, 6), make([]float64, 6), make([]float64, 6), 2)
	})
	panics(t, "nn: SwiGLU.Backward: len(dwDown) = 5, want D*F = 6", func() {
		m.Backward(make([]float64, 2), make([]float64, 6), make([]float64, 6), make([]float64, 5),
			make([]float64, 2), make([]float64, 2), make([]float64, 6), make([]float64, 6), make([]float64, 6),
			make([]float64, 3), make([]float64, 3), make([]float64, 3), 1)
	})
}
