package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLinearGemmMatchesLoops: the SIMD path of Linear equals its plain loops
// (up to summation order), forward and backward, float32 and float64.
func TestLinearGemmMatchesLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 0x6e6e))
	randn := func(r *rand.Rand, n int, scale float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = scale * r.NormFloat64()
		}
		return x
	}
	for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 96, 128}} {
		n, in, out := sh[0], sh[1], sh[2]
		x, w, b, dy := randn(r, n*in, 1), randn(r, out*in, 1), randn(r, out, 1), randn(r, n*out, 1)
		run := func(gemmOn bool) [][]float64 {
			useGemm = gemmOn
			defer func() { useGemm = true }()
			l := Linear[float64]{In: in, Out: out, Bias: true}
			y, dx, dw, db := make([]float64, n*out), make([]float64, n*in), make([]float64, out*in), make([]float64, out)
			l.Forward(y, x, w, b, n)
			l.Backward(dx, dw, db, dy, x, w, n)
			return [][]float64{y, dx, dw, db}
		}
		fast, plain := run(true), run(false)
		for i := range fast {
			for j := range fast[i] {
				if d := math.Abs(fast[i][j] - plain[i][j]); d > 1e-12*(1+math.Abs(plain[i][j])) {
					t.Fatalf("shape %v, output %d[%d]: gemm %v, loops %v", sh, i, j, fast[i][j], plain[i][j])
				}
			}
		}
	}
}
