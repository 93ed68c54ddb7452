package vec

import (
	"math"
	"slices"
	"testing"
)

// myFloat is a named float type: the generic entry points take it.
type myFloat float32

// TestGenericEntryPoints: Gemm, Dot, Axpy, Exp and ExpShift on float32,
// float64 and a named type give what the sized kernels give, and ExpShift
// is math.Exp itself in float64.
func TestGenericEntryPoints(t *testing.T) {
	a := []myFloat{1, 2, 3, 4, 5, 6}
	b := []myFloat{1, 0, 0, 1, 1, 1}
	c := make([]myFloat, 4)
	Gemm(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2) // [[1 2 3][4 5 6]] · [[1 0][0 1][1 1]]
	if want := []myFloat{4, 5, 10, 11}; c[0] != want[0] || c[1] != want[1] || c[2] != want[2] || c[3] != want[3] {
		t.Errorf("Gemm on a named type: %v, want %v", c, want)
	}
	if d := Dot(a, a); d != 91 {
		t.Errorf("Dot = %v, want 91", d)
	}
	y := []float64{1, 1, 1}
	Axpy(2, []float64{1, 2, 3}, y)
	if y[2] != 7 {
		t.Errorf("Axpy: %v", y)
	}
	x64 := []float64{0.5, -3, math.Inf(-1), 2}
	p64 := make([]float64, 4)
	sum := ExpShift(p64, x64, 1)
	var want float64
	for i, v := range x64 {
		e := math.Exp(v - 1)
		if p64[i] != e {
			t.Errorf("ExpShift float64[%d] = %v, math.Exp gives %v", i, p64[i], e)
		}
		want += e
	}
	if sum != want {
		t.Errorf("ExpShift float64 sum %v, want %v", sum, want)
	}
	x32 := []myFloat{0.5, -3, myFloat(math.Inf(-1)), 2}
	p32 := make([]myFloat, 4)
	ExpShift(p32, x32, 1)
	for i, v := range x32 {
		e := math.Exp(float64(v) - 1)
		if d := math.Abs(float64(p32[i]) - e); d > 3e-7*e {
			t.Errorf("ExpShift float32[%d] = %v, want %v", i, p32[i], e)
		}
	}
	if p32[2] != 0 {
		t.Errorf("exp(−Inf − shift) = %v, want 0", p32[2])
	}
	if !Is32[myFloat]() || Is32[float64]() {
		t.Error("Is32")
	}
}

// TestMaxAndSum: Max finds the largest element wherever it lies, -Inf for
// nothing and NaN when there is one; sum32's eight partial sums add up to
// the sum within float32 rounding, for every length around its blocks.
func TestMaxAndSum(t *testing.T) {
	if m := Max([]float32{}); !math.IsInf(float64(m), -1) {
		t.Errorf("Max of nothing = %v, want -Inf", m)
	}
	for n := 1; n <= 21; n++ {
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(i%5) - 10
		}
		for at := range n {
			y := slices.Clone(x)
			y[at] = 3
			if m := Max(y); m != 3 {
				t.Errorf("Max, n %d, largest at %d: %v", n, at, m)
			}
		}
		y := slices.Clone(x)
		y[n/2] = math.NaN()
		if m := Max(y); !math.IsNaN(m) {
			t.Errorf("Max with a NaN at %d of %d = %v", n/2, n, m)
		}
		x32 := make([]float32, n)
		var want float64
		for i := range x32 {
			x32[i] = float32(i+1) / 7
			want += float64(x32[i])
		}
		if got := float64(sum32(x32)); math.Abs(got-want) > 1e-6*want {
			t.Errorf("sum32 of %d = %v, want %v", n, got, want)
		}
	}
}
