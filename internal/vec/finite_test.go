package vec

import (
	"math"
	"testing"
)

func TestNonFinite(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for n := 0; n <= 35; n++ {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i) - 7.5 // finite, with zeros and negatives
		}
		x = append(x, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32)
		if got := NonFinite(x); got != -1 {
			t.Fatalf("n=%d: all finite, got index %d", n, got)
		}
		for at := range x {
			for _, b := range bad {
				y := append([]float32(nil), x...)
				y[at] = float32(b)
				if at+1 < len(y) {
					y[len(y)-1] = float32(math.NaN()) // a later bad value must not win
				}
				want := at
				if got := NonFinite(y); got != want {
					t.Fatalf("n=%d: %v at %d, got index %d", n, b, at, got)
				}
				z := make([]float64, len(y))
				for i, v := range y {
					z[i] = float64(v)
				}
				if got := NonFinite(z); got != want {
					t.Fatalf("float64 n=%d: %v at %d, got index %d", n, b, at, got)
				}
			}
		}
	}
}
