package nn_test

import (
	"math"
	"testing"

	"github.com/attnlab/attnlab/nn"
)

// TestSiLUMulByHand checks the forward and backward at two gate values with
// u = dh = 1. At a = 0: σ = 1/2, silu = 0, silu' = 1/2. At a = ln 3:
// σ = 3/(3+1) = 3/4, silu = (3/4)·ln 3, silu' = (3/4)·(1 + ln 3·(1/4)).
func TestSiLUMulByHand(t *testing.T) {
	ln3 := math.Log(3)
	a, u := []float64{0, ln3}, []float64{1, 1}
	h := make([]float64, 2)
	nn.SiLUMul[float64]{}.Forward(h, a, u)
	near(t, "h", h, []float64{0, 0.75 * ln3}, 1e-16)
	da, du := make([]float64, 2), make([]float64, 2)
	nn.SiLUMul[float64]{}.Backward(da, du, []float64{1, 1}, a, u)
	near(t, "da", da, []float64{0.5, 0.75 * (1 + ln3/4)}, 1e-16)
	near(t, "du", du, []float64{0, 0.75 * ln3}, 1e-16)
	// Backward adds: on buffers holding (1, 2) and (3, 4) the same values
	// come on top. (SwiGLU's checks cannot see this: it hands SiLUMul fresh
	// buffers.)
	da, du = []float64{1, 2}, []float64{3, 4}
	nn.SiLUMul[float64]{}.Backward(da, du, []float64{1, 1}, a, u)
	near(t, "da added", da, []float64{1 + 0.5, 2 + 0.75*(1+ln3/4)}, 1e-16)
	near(t, "du added", du, []float64{3, 4 + 0.75*ln3}, 1e-16)
}

// TestSiLUMulTails checks that large gate values neither overflow nor lose
// the limits silu(a) → a for a → +∞ and silu(a) → 0 for a → −∞.
func TestSiLUMulTails(t *testing.T) {
	a, u := []float64{800, -800, 40, -40}, []float64{1, 1, 1, 1}
	h := make([]float64, 4)
	nn.SiLUMul[float64]{}.Forward(h, a, u)
	da, du := make([]float64, 4), make([]float64, 4)
	nn.SiLUMul[float64]{}.Backward(da, du, []float64{1, 1, 1, 1}, a, u)
	for i := range a {
		if math.IsNaN(h[i]) || math.IsInf(h[i], 0) || math.IsNaN(da[i]) {
			t.Fatalf("a = %g: h = %g, da = %g", a[i], h[i], da[i])
		}
	}
	near(t, "h", h, []float64{800, 0, 40, -40 / (1 + math.Exp(40))}, 1e-15)
	near(t, "da", da, []float64{1, 0, 1, 0}, 1e-15)
	h32 := make([]float32, 2)
	nn.SiLUMul[float32]{}.Forward(h32, []float32{100, -100}, []float32{1, 1})
	// silu(−100) = −100·σ(−100) ≈ −3.8e-42, a float32 subnormal
	if h32[0] != 100 || !(h32[1] <= 0 && h32[1] > -1e-40) {
		t.Errorf("float32 tails: h = %v, want [100 ≈-3.8e-42]", h32)
	}
}

func TestSiLUMulFloat32(t *testing.T) {
	const n = 101
	r := newRand(5)
	a, u, dh := randn(r, n, 3), randn(r, n, 1), randn(r, n, 1)
	h, da, du := make([]float64, n), make([]float64, n), make([]float64, n)
	nn.SiLUMul[float64]{}.Forward(h, a, u)
	nn.SiLUMul[float64]{}.Backward(da, du, dh, a, u)
	h32, da32, du32 := make([]float32, n), make([]float32, n), make([]float32, n)
	nn.SiLUMul[float32]{}.Forward(h32, to32(a), to32(u))
	nn.SiLUMul[float32]{}.Backward(da32, du32, to32(dh), to32(a), to32(u))
	agree(t, "h", h, h32, 1e-6)
	agree(t, "da", da, da32, 1e-6)
	agree(t, "du", du, du32, 1e-6)
}

func TestSiLUMulPanics(t *testing.T) {
	panics(t, "nn: SiLUMul.Forward: len(u) = 2, want len(h) = 3", func() {
		nn.SiLUMul[float64]{}.Forward(make([]float64, 3), make([]float64, 3), make([]float64, 2))
	})
	panics(t, "nn: SiLUMul.Backward: len(du) = 4, want len(dh) = 3", func() {
		nn.SiLUMul[float64]{}.Backward(make([]float64, 3), make([]float64, 4), make([]float64, 3), make([]float64, 3), make([]float64, 3))
	})
}
