package vec

import (
	"math"
	"math/rand/v2"
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

// TestMax32Paths: float32 Max on every path (the AVX2 kernel takes whole
// vectors of 8) finds the largest element wherever it lies, and NaN
// wherever one lies, at every length around the vector and its pairs.
func TestMax32Paths(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		for n := 1; n <= 40; n++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(i%7) - 10
			}
			for at := range n {
				y := slices.Clone(x)
				y[at] = 3
				if m := Max(y); m != 3 {
					t.Errorf("n %d, largest at %d: %v", n, at, m)
				}
				y[at] = float32(math.NaN())
				if m := Max(y); m == m {
					t.Errorf("n %d, NaN at %d: %v", n, at, m)
				}
			}
			neg := make([]float32, n)
			for i := range neg {
				neg[i] = float32(math.Inf(-1))
			}
			if m := Max(neg); !math.IsInf(float64(m), -1) {
				t.Errorf("n %d, all -Inf: %v", n, m)
			}
		}
	})
}

// TestExpShiftFloor32: every element is exp(x − shift) within Exp32's
// accuracy where x − shift ≥ floor, exactly 0 below it and for −Inf, NaN for
// NaN; the sum is the sum of the outputs; live says whether any element is
// kept; in place gives the same; on every path, at every length around the
// vector of 8.
func TestExpShiftFloor32(t *testing.T) {
	const floor = -44.361419555836 // ln 2⁻⁶⁴, attention's
	forEachPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		for n := 0; n <= 40; n++ {
			for _, shift := range []float32{0, 3.5, -20} {
				x := make([]float32, n)
				for i := range x {
					x[i] = shift - float32(rng.Float64()*60) // t in (−60, 0]
				}
				if n > 3 {
					x[1] = float32(math.Inf(-1))
					x[2] = shift + floor + 0.01 // just kept
					x[3] = shift + floor - 0.01 // just flushed
				}
				dst := make([]float32, n)
				sum, live := ExpShiftFloor[float32](dst, x, shift, floor)
				var want float64
				wantLive := false
				for i, v := range x {
					tt := float64(v - shift)
					if tt < floor {
						if dst[i] != 0 {
							t.Errorf("n %d: t %v below the floor gave %v", n, tt, dst[i])
						}
						continue
					}
					wantLive = true
					ref := math.Exp(tt)
					if math.Abs(float64(dst[i])-ref) > 3e-7*ref {
						t.Errorf("n %d: exp(%v) = %v, want %v", n, tt, dst[i], ref)
					}
					want += float64(dst[i])
				}
				if math.Abs(float64(sum)-want) > 1e-6*want || live != wantLive {
					t.Errorf("n %d shift %v: sum %v live %v, want %v %v", n, shift, sum, live, want, wantLive)
				}
				in := slices.Clone(x)
				s2, l2 := ExpShiftFloor[float32](in, in, shift, floor)
				if !slices.Equal(in, dst) || s2 != sum || l2 != live {
					t.Errorf("n %d: in place differs", n)
				}
			}
		}
		// NaN stays NaN and counts as kept
		x := []float32{0, 1, 2, float32(math.NaN()), 4, 5, 6, 7, 8}
		dst := make([]float32, len(x))
		for i := range x {
			x[i] = -100
		}
		x[3] = float32(math.NaN())
		sum, live := ExpShiftFloor[float32](dst, x, 0, floor)
		if dst[3] == dst[3] || sum == sum || !live || dst[0] != 0 {
			t.Errorf("NaN: %v, sum %v, live %v", dst, sum, live)
		}
		defer func() {
			if recover() == nil {
				t.Error("a floor below -87 did not panic")
			}
		}()
		ExpShiftFloor[float32](dst, x, 0, -100)
	})
}

// TestSoftcap: float32 Softcap, by the AVX2 kernel and by the portable
// path, is c·tanh(x/c) within a few roundings of c at every length (the
// tails of 1 to 7 included), ±c at ±Inf and far beyond c, and NaN at NaN;
// float64 is math.Tanh itself; a cap ≤ 0 is the caller's mistake.
func TestSoftcap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const c = 30
	for _, generic := range []bool{false, true} {
		for n := range 40 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 40)
			}
			if n > 4 {
				x[0], x[1], x[2], x[3], x[4] = float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e30, 0
			}
			got := make([]float32, n)
			if generic {
				softcap32Generic(got, x, c)
			} else {
				Softcap(got, x, float32(c))
			}
			for i, v := range x {
				want := c * math.Tanh(float64(v)/c)
				if d := math.Abs(float64(got[i]) - want); !(d <= 4*c*0x1p-24) {
					t.Fatalf("generic %v, n %d: Softcap(%v) = %v, want %v (off by %.2g)", generic, n, v, got[i], want, d)
				}
			}
		}
		x := []float32{float32(math.NaN()), 1, 2, 3, 4, 5, 6, 7, 8}
		got := make([]float32, len(x))
		if generic {
			softcap32Generic(got, x, c)
		} else {
			Softcap(got, x, float32(c))
		}
		if !math.IsNaN(float64(got[0])) {
			t.Errorf("generic %v: Softcap(NaN) = %v", generic, got[0])
		}
	}
	x64 := []float64{-100, -1, 0, 0.5, 29, 1e300}
	got64 := make([]float64, len(x64))
	Softcap(got64, x64, 30)
	for i, v := range x64 {
		if want := 30 * math.Tanh(v/30); got64[i] != want {
			t.Errorf("float64 Softcap(%v) = %v, want %v", v, got64[i], want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Softcap with cap 0 did not panic")
		}
	}()
	Softcap(got64, x64, 0)
}
