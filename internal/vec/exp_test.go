package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ulps returns the distance between x and y in units in the last place,
// counting the representable values between them (both finite, same sign).
func ulps[T Float](x, y T) float64 {
	if sizeofT[T]() == 4 {
		return math.Abs(float64(int64(math.Float32bits(float32(x))) - int64(math.Float32bits(float32(y)))))
	}
	bx, by := math.Float64bits(float64(x)), math.Float64bits(float64(y))
	if bx > by {
		return float64(bx - by)
	}
	return float64(by - bx)
}

func sizeofT[T Float]() int {
	var z T
	switch any(z).(type) {
	case float32:
		return 4
	}
	return 8
}

// expRef is exp rounded to T, and the error in ulp that the comparison with
// it must allow.
//
// The amd64 assembly of math.Exp returns +Inf above about 709.43, short of
// log(MaxFloat64) = 709.78, so there the reference is exp(x/2)², which is
// within 3 ulp (x/2 is exact; each rounding adds at most an ulp).
func expRef[T Float](x T) (T, float64) {
	if x > 709 {
		h := math.Exp(float64(x) / 2)
		return T(h * h), 3
	}
	return T(math.Exp(float64(x))), 2
}

// expRange holds the inputs whose exponential is a normal finite number, and
// the largest input whose exponential is finite at all.
func expRange[T Float]() (lo, hi, maxFinite T) {
	if sizeofT[T]() == 4 {
		// log(2⁻¹²⁶) = −87.336; log(MaxFloat32) = 88.7228.
		return -87.33, 88.72, 88.7228
	}
	// log(2⁻¹⁰²²) = −708.396; log(MaxFloat64) = 709.7827.
	return -708.39, 709.78, 709.782712893383
}

func testExpAccuracy[T Float](t *testing.T, exp func(dst, x []T)) {
	rng := rand.New(rand.NewPCG(9, 10))
	lo, hi, _ := expRange[T]()
	const n = 1 << 16
	x := make([]T, n)
	for i := range x {
		switch i % 4 {
		case 0: // anywhere in the normal range
			x[i] = lo + T(rng.Float64())*(hi-lo)
		case 1: // near zero, where r dominates
			x[i] = T(rng.NormFloat64() * 1e-3)
		case 2: // near the range-reduction boundaries, n·ln2 ± ln2/2
			x[i] = T((float64(rng.IntN(200)-100) + 0.5) * math.Ln2 * (1 + 1e-7*rng.NormFloat64()))
		default:
			x[i] = T(rng.NormFloat64() * 10)
		}
	}
	got := make([]T, n)
	exp(got, x)
	worst := 0.0
	for i, v := range x {
		want, tol := expRef(v)
		if d := ulps(got[i], want); d > worst {
			worst = d
			if d > tol {
				t.Errorf("exp(%v) = %v, want %v (%v ulp)", v, got[i], want, d)
			}
		}
	}
	t.Logf("worst error %v ulp over %d inputs", worst, n)
}

func testExpSpecial[T Float](t *testing.T, exp func(dst, x []T)) {
	_, _, maxFinite := expRange[T]()
	inf, nan := T(math.Inf(1)), T(math.NaN())
	cases := []struct{ x, want T }{
		{0, 1},
		{T(math.Copysign(0, -1)), 1},
		{inf, inf},
		{-inf, 0},
		{maxFinite * 1.0001, inf},
		{1e4, inf},
		{-1e4, 0},
		{T(math.Float32frombits(1)), 1}, // a denormal input
	}
	x := make([]T, len(cases)+1)
	for i, c := range cases {
		x[i] = c.x
	}
	x[len(cases)] = nan
	got := make([]T, len(x))
	exp(got, x)
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("exp(%v) = %v, want %v", c.x, got[i], c.want)
		}
	}
	if g := got[len(cases)]; g == g {
		t.Errorf("exp(NaN) = %v, want NaN", g)
	}
	// The largest finite result.
	x[0] = maxFinite
	exp(got[:1], x[:1])
	if want, tol := expRef(maxFinite); math.IsInf(float64(got[0]), 0) || ulps(got[0], want) > tol {
		t.Errorf("exp(%v) = %v, want %v", maxFinite, got[0], want)
	}
	// Results below the normal range: within 2 ulp of the denormal grid,
	// decreasing to 0.
	lo, _, _ := expRange[T]()
	var xs []T
	for v := lo; v > lo-30; v -= 0.0625 {
		xs = append(xs, v)
	}
	got = make([]T, len(xs))
	exp(got, xs)
	for i, v := range xs {
		if want, tol := expRef(v); ulps(got[i], want) > tol {
			t.Errorf("exp(%v) = %v, want %v (%v ulp)", v, got[i], want, ulps(got[i], want))
		}
	}
}

func testExpLengths[T Float](t *testing.T, exp func(dst, x []T)) {
	rng := rand.New(rand.NewPCG(11, 12))
	nan := T(math.NaN())
	for n := 0; n <= maxLen; n++ {
		for off := 0; off < 4; off++ {
			x, xb := guarded(n, off, nan, func(int) T { return T(rng.NormFloat64() * 20) })
			dst, db := guarded(n, (off+2)%4, sentinel, func(int) T { return 0 })
			exp(dst, x)
			for i, v := range x {
				if want, tol := expRef(v); ulps(dst[i], want) > tol {
					t.Errorf("n=%d off=%d: exp(%v) = %v, want %v", n, off, v, dst[i], want)
				}
			}
			checkGuards(t, "x", xb, x, nan)
			checkGuards(t, "dst", db, dst, sentinel)
			// In place.
			want := append([]T(nil), dst...)
			exp(x, x)
			for i := range x {
				if x[i] != want[i] {
					t.Errorf("n=%d off=%d: in place x[%d] = %v, want %v", n, off, i, x[i], want[i])
				}
			}
		}
	}
}

func TestExp32(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		t.Run("accuracy", func(t *testing.T) { testExpAccuracy(t, Exp32) })
		t.Run("special", func(t *testing.T) { testExpSpecial(t, Exp32) })
		t.Run("lengths", func(t *testing.T) { testExpLengths(t, Exp32) })
	})
}

func TestExp64(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		t.Run("accuracy", func(t *testing.T) { testExpAccuracy(t, Exp64) })
		t.Run("special", func(t *testing.T) { testExpSpecial(t, Exp64) })
		t.Run("lengths", func(t *testing.T) { testExpLengths(t, Exp64) })
	})
}
