package nn_test

import (
	"math"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// TestSwiGLUChecks runs the lab's checks on nn.SwiGLU: finite differences, the
// accumulation contract, float32 agreement and the semantic checks (package
// lab proves each of them can fail, on the faults).
func TestSwiGLUChecks(t *testing.T) { runChecks(t, checks.SwiGLU(), checks.SwiGLUReference) }

// TestSwiGLUByHand takes D = F = 1, wGate = 1, wUp = 2, wDown = 3 and
// x = ln 3: a = ln 3, σ(a) = 3/4, u = 2 ln 3, h = (3/4)·ln 3 · 2 ln 3
// = 1.5·ln²3, y = 3h = 4.5·ln²3.
func TestSwiGLUByHand(t *testing.T) {
	ln3 := math.Log(3)
	y, a, u, h := make([]float64, 1), make([]float64, 1), make([]float64, 1), make([]float64, 1)
	nn.SwiGLU[float64]{D: 1, F: 1}.Forward(y, a, u, h, []float64{ln3}, []float64{1}, []float64{2}, []float64{3}, 1)
	near(t, "a", a, []float64{ln3}, 0)
	near(t, "u", u, []float64{2 * ln3}, 0)
	near(t, "h", h, []float64{1.5 * ln3 * ln3}, 1e-15)
	near(t, "y", y, []float64{4.5 * ln3 * ln3}, 1e-15)
}

func TestSwiGLUFloat32(t *testing.T) {
	const n, d, f = 3, 8, 21
	r := newRand(6)
	x, wg, wu, wd, dy := randn(r, n*d, 1), randn(r, f*d, 0.3), randn(r, f*d, 0.3), randn(r, d*f, 0.3), randn(r, n*d, 1)
	m64, m32 := nn.SwiGLU[float64]{D: d, F: f}, nn.SwiGLU[float32]{D: d, F: f}

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
	m := nn.SwiGLU[float64]{D: 2, F: 3}
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
