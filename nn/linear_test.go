package nn_test

import (
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// TestLinearChecks runs the lab's checks on nn.Linear: finite differences, the
// accumulation contract, float32 agreement and the semantic checks (package
// lab proves each of them can fail, on the faults).
func TestLinearChecks(t *testing.T) { runChecks(t, checks.Linear(), checks.LinearReference) }

// TestLinearForward checks a case by hand: x = (1, 2),
// w = [[1, 0], [0, 1], [1, 1]], b = (0.5, −1, 0) give
// y = (1 + 0.5, 2 − 1, 1 + 2) = (1.5, 1, 3).
func TestLinearForward(t *testing.T) {
	y := make([]float64, 3)
	nn.Linear[float64]{In: 2, Out: 3, Bias: true}.Forward(y, []float64{1, 2}, []float64{1, 0, 0, 1, 1, 1}, []float64{0.5, -1, 0}, 1)
	near(t, "hand y", y, []float64{1.5, 1, 3}, 0)
}

func TestLinearFloat32(t *testing.T) {
	const n, in, out = 7, 13, 5
	l64 := nn.Linear[float64]{In: in, Out: out, Bias: true}
	l32 := nn.Linear[float32]{In: in, Out: out, Bias: true}
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
	l := nn.Linear[float64]{In: 2, Out: 3, Bias: true}
	panics(t, "nn: Linear.Forward: len(x) = 5, want n*In = 6", func() {
		l.Forward(make([]float64, 9), make([]float64, 5), make([]float64, 6), make([]float64, 3), 3)
	})
	panics(t, "nn: Linear.Backward: len(dw) = 5, want Out*In = 6", func() {
		l.Backward(make([]float64, 2), make([]float64, 5), make([]float64, 3), make([]float64, 3), make([]float64, 2), make([]float64, 6), 1)
	})
	panics(t, "nn: Linear.Forward: Bias is false but len(b) = 3", func() {
		nn.Linear[float64]{In: 2, Out: 3}.Forward(make([]float64, 3), make([]float64, 2), make([]float64, 6), make([]float64, 3), 1)
	})
	panics(t, "nn: Linear.Forward: In = 0, want >= 1", func() {
		nn.Linear[float64]{Out: 3}.Forward(nil, nil, nil, nil, 0)
	})
}
