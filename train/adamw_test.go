package train

import (
	"math"
	"testing"
)

// TestAdamWByHand follows one parameter through two steps computed by hand
// from the update rule (β₁ = 0.9, β₂ = 0.999, ε = 1e-8, wd = 0.1, lr = 0.01).
func TestAdamWByHand(t *testing.T) {
	o := NewAdamW[float64](0.9, 0.999, 1e-8, 0.1)
	x := []float64{1}
	for step, g := range []float64{0.5, -0.25} {
		o.Update([]Param[float64]{{Name: "w", X: x, Grad: []float64{g}, Decay: true}}, 0.01)
		_ = step
	}
	// step 1: x = 1·(1 − 0.001) = 0.999; m = 0.05; v = 0.00025;
	//   m̂ = 0.05/0.1 = 0.5; v̂ = 0.00025/0.001 = 0.25; x −= 0.01·0.5/(0.5 + 1e-8)
	x1 := 0.999 - 0.01*0.5/(0.5+1e-8)
	// step 2: x = x1·0.999; m = 0.045 − 0.025 = 0.02; v = 0.00025·0.999 + 0.001·0.0625
	m2, v2 := 0.9*0.05+0.1*-0.25, 0.999*0.00025+0.001*0.0625
	bc1, bc2 := 1-0.9*0.9, 1-0.999*0.999
	x2 := x1*0.999 - 0.01/bc1*m2/(math.Sqrt(v2)/math.Sqrt(bc2)+1e-8)
	if math.Abs(x[0]-x2) > 1e-15 {
		t.Errorf("x = %.17g, want %.17g", x[0], x2)
	}
}

func TestAdamWNoDecay(t *testing.T) {
	o := NewAdamW[float64](0.9, 0.999, 1e-8, 0.5)
	x := []float64{2}
	o.Update([]Param[float64]{{Name: "norm", X: x, Grad: []float64{0}}}, 0.1)
	if x[0] != 2 {
		t.Errorf("a zero gradient without decay moved x to %v", x[0])
	}
}

func TestClipGradNorm(t *testing.T) {
	g1, g2 := []float64{3, 0}, []float64{0, 4} // ‖g‖ = 5
	ps := []Param[float64]{{Name: "a", Grad: g1, X: make([]float64, 2)}, {Name: "b", Grad: g2, X: make([]float64, 2)}}
	if n := ClipGradNorm(ps, 10); n != 5 || g1[0] != 3 {
		t.Errorf("norm %v, g %v: clipping below the norm changed nothing? want 5 and unchanged", n, g1)
	}
	if n := ClipGradNorm(ps, 1); n != 5 {
		t.Errorf("norm %v, want 5", n)
	}
	want := 3 * 1 / (5 + 1e-6)
	if math.Abs(g1[0]-want) > 1e-15 || math.Abs(math.Hypot(g1[0], g2[1])-5/(5+1e-6)) > 1e-15 {
		t.Errorf("clipped to %v %v", g1, g2)
	}
	nan := []Param[float64]{{Name: "a", Grad: []float64{math.NaN()}, X: []float64{0}}}
	if n := ClipGradNorm(nan, 1); !math.IsNaN(n) {
		t.Errorf("NaN gradient gave norm %v", n)
	}
}

func TestSchedule(t *testing.T) {
	s := Schedule{Peak: 1e-3, Min: 1e-4, Warmup: 10, Total: 110}
	for _, tc := range []struct {
		step int
		want float64
	}{{0, 1e-4}, {9, 1e-3}, {10, 1e-3}, {60, 5.5e-4}, {110, 1e-4}, {500, 1e-4}} {
		if got := s.At(tc.step); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("At(%d) = %v, want %v", tc.step, got, tc.want)
		}
	}
}
