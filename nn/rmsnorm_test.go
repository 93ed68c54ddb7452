package nn_test

import (
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// TestRMSNormChecks runs the lab's checks on nn.RMSNorm: finite differences, the
// accumulation contract, float32 agreement and the semantic checks (package
// lab proves each of them can fail, on the faults).
func TestRMSNormChecks(t *testing.T) { runChecks(t, checks.RMSNorm(), checks.RMSNormReference) }

// TestRMSNormByHand checks forward and backward on x = (3, 4, 0, 0),
// w = (1, 2, 3, 4), ε = 0:
// mean(x²) = 25/4, r = 5/2, rstd = 0.4, y = w ⊙ x / r = (1.2, 3.2, 0, 0).
// With dy = (1, 0, 0, 0): g = dy ⊙ w = (1, 0, 0, 0), mean(g ⊙ x) = 3/4,
// r³ = 15.625, so dx = g/r − x·(3/4)/r³ = (0.4, 0, 0, 0) − 0.048·(3, 4, 0, 0)
// = (0.256, −0.192, 0, 0) and dw = dy ⊙ x / r = (1.2, 0, 0, 0).
func TestRMSNormByHand(t *testing.T) {
	m := nn.RMSNorm[float64]{D: 4}
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

func TestRMSNormFloat32(t *testing.T) {
	const n, d = 5, 31
	r := newRand(8)
	x, w, dy := randn(r, n*d, 1), randn(r, d, 1), randn(r, n*d, 1)
	m64, m32 := nn.RMSNorm[float64]{D: d, Eps: 1e-5}, nn.RMSNorm[float32]{D: d, Eps: 1e-5}
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
	m := nn.RMSNorm[float64]{D: 4}
	panics(t, "nn: RMSNorm.Forward: len(rstd) = 1, want n = 2", func() {
		m.Forward(make([]float64, 8), make([]float64, 1), make([]float64, 8), make([]float64, 4), 2)
	})
	panics(t, "nn: RMSNorm.Backward: len(dw) = 3, want D = 4", func() {
		m.Backward(make([]float64, 4), make([]float64, 3), make([]float64, 4), make([]float64, 4), make([]float64, 4), make([]float64, 1), 1)
	})
	panics(t, "nn: RMSNorm.Forward: Eps = -1, want >= 0", func() {
		nn.RMSNorm[float64]{D: 4, Eps: -1}.Forward(nil, nil, nil, nil, 0)
	})
}
