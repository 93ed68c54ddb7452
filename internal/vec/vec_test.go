package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// testPath is one implementation of the kernels: use switches to it and
// returns a function that switches back.
type testPath struct {
	name string
	use  func() (restore func())
}

// forEachPath runs f once per implementation available here. The subtests
// change package state and must not run in parallel.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	for _, p := range testPaths() {
		t.Run("path="+p.name, func(t *testing.T) {
			defer p.use()()
			f(t)
		})
	}
}

// maxLen is the longest vector of the level-1 tests: four AVX-512 float32
// vectors and a tail of 3, so every loop and tail of every path runs.
const maxLen = 4*16 + 3

// guard is the length of the guard bands around test vectors.
const guard = 16

// sentinel fills the guard bands of outputs; a kernel that writes out of
// bounds changes it.
const sentinel = 1234.5

// guarded returns a slice of n elements starting off elements into a larger
// buffer, and the buffer. The slice is filled with values from fill and the
// guard bands around it with g: NaN for inputs (reading them poisons the
// result), sentinel for outputs (writing them is detected by checkGuards).
func guarded[T Float](n, off int, g T, fill func(i int) T) (v, buf []T) {
	buf = make([]T, guard+off+n+guard)
	for i := range buf {
		buf[i] = g
	}
	v = buf[guard+off : guard+off+n : guard+off+n]
	for i := range v {
		v[i] = fill(i)
	}
	return v, buf
}

// checkGuards reports elements of buf outside v that no longer hold g.
func checkGuards[T Float](t *testing.T, name string, buf, v []T, g T) {
	t.Helper()
	start := int((uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(&buf[0]))) / unsafe.Sizeof(g))
	for i, x := range buf {
		if i >= start && i < start+len(v) {
			continue
		}
		if !sameBits(x, g) {
			t.Errorf("%s: guard element %d (offset %d from the slice) changed from %v to %v", name, i, i-start, g, x)
		}
	}
}

// sameBits reports whether x and y are the same value, treating all NaNs as
// equal.
func sameBits[T Float](x, y T) bool {
	if x != x || y != y {
		return x != x && y != y
	}
	return x == y && math.Signbit(float64(x)) == math.Signbit(float64(y))
}

// eps is the unit roundoff of T.
func eps[T Float]() float64 {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return 0x1p-24
	}
	return 0x1p-53
}

// tiny is twice the smallest denormal of T: rounding a denormal result
// errs by up to half of the smallest denormal in absolute terms, whatever
// its relative error.
func tiny[T Float]() float64 {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return 0x1p-148
	}
	return 0x1p-1073
}

// randVal returns a value in [-1, 1), with a small share of denormals and
// exact zeros, which the kernels must treat as ordinary numbers.
func randVal[T Float](rng *rand.Rand) T {
	switch rng.IntN(32) {
	case 0:
		return 0
	case 1:
		var z T
		if unsafe.Sizeof(z) == 4 {
			return T(math.Float32frombits(uint32(1 + rng.IntN(1<<20))))
		}
		return T(math.Float64frombits(uint64(1 + rng.Int64N(1<<40))))
	}
	return T(2*rng.Float64() - 1)
}

func testDot[T Float](t *testing.T, dot func(x, y []T) T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nan := T(math.NaN())
	for n := 0; n <= maxLen; n++ {
		for off := 0; off < 4; off++ {
			x, xb := guarded(n, off, nan, func(int) T { return randVal[T](rng) })
			y, yb := guarded(n, (off+1)%4, nan, func(int) T { return randVal[T](rng) })
			got := dot(x, y)
			var want, mag float64
			for i := range x {
				want += float64(x[i]) * float64(y[i])
				mag += math.Abs(float64(x[i]) * float64(y[i]))
			}
			if d := math.Abs(float64(got) - want); !(d <= float64(n+2)*eps[T]()*mag+tiny[T]()) {
				t.Errorf("n=%d off=%d: got %v, want %v (|diff| %g, Σ|xy| %g)", n, off, got, want, d, mag)
			}
			checkGuards(t, "x", xb, x, nan)
			checkGuards(t, "y", yb, y, nan)
			if n == 0 {
				continue
			}
			// A NaN or an Inf anywhere reaches the sum.
			i := rng.IntN(n)
			x[i] = nan
			if got := dot(x, y); got == got {
				t.Errorf("n=%d off=%d: NaN at %d gave %v", n, off, i, got)
			}
			x[i], y[i] = T(math.Inf(1)), 1
			if got := dot(x, y); !math.IsInf(float64(got), 1) {
				t.Errorf("n=%d off=%d: +Inf at %d gave %v", n, off, i, got)
			}
		}
	}
}

func TestDot32(t *testing.T) { forEachPath(t, func(t *testing.T) { testDot(t, Dot32) }) }
func TestDot64(t *testing.T) { forEachPath(t, func(t *testing.T) { testDot(t, Dot64) }) }

func testAxpy[T Float](t *testing.T, axpy func(alpha T, x, y []T)) {
	rng := rand.New(rand.NewPCG(3, 4))
	nan := T(math.NaN())
	for _, alpha := range []T{0, 1, -0.5, 3.25} {
		for n := 0; n <= maxLen; n++ {
			for off := 0; off < 4; off++ {
				x, xb := guarded(n, off, nan, func(int) T { return randVal[T](rng) })
				y, yb := guarded(n, (off+3)%4, sentinel, func(int) T { return randVal[T](rng) })
				y0 := append([]T(nil), y...)
				axpy(alpha, x, y)
				for i := range y {
					want := float64(y0[i]) + float64(alpha)*float64(x[i])
					tol := 2*eps[T]()*(math.Abs(float64(y0[i]))+math.Abs(float64(alpha)*float64(x[i]))) + tiny[T]()
					if d := math.Abs(float64(y[i]) - want); !(d <= tol) {
						t.Errorf("alpha=%v n=%d off=%d: y[%d] = %v, want %v", alpha, n, off, i, y[i], want)
					}
				}
				checkGuards(t, "x", xb, x, nan)
				checkGuards(t, "y", yb, y, sentinel)
				if n == 0 || alpha == 0 {
					continue
				}
				// A NaN in x reaches only its own element of y.
				i := rng.IntN(n)
				x[i] = nan
				copy(y, y0)
				axpy(alpha, x, y)
				for j := range y {
					if (y[j] != y[j]) != (j == i) {
						t.Errorf("alpha=%v n=%d: NaN at x[%d] gave y[%d] = %v", alpha, n, i, j, y[j])
					}
				}
			}
		}
	}
}

func TestAxpy32(t *testing.T) { forEachPath(t, func(t *testing.T) { testAxpy(t, Axpy32) }) }
func TestAxpy64(t *testing.T) { forEachPath(t, func(t *testing.T) { testAxpy(t, Axpy64) }) }

func testScale[T Float](t *testing.T, scale func(alpha T, x []T)) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, alpha := range []T{0, 1, -0.5, 3.25, T(math.Inf(1))} {
		for n := 0; n <= maxLen; n++ {
			for off := 0; off < 4; off++ {
				x, xb := guarded(n, off, sentinel, func(int) T { return randVal[T](rng) })
				if n > 0 {
					x[rng.IntN(n)] = T(math.NaN())
				}
				x0 := append([]T(nil), x...)
				scale(alpha, x)
				for i := range x {
					// One correctly rounded product: exact agreement.
					if want := alpha * x0[i]; !sameBits(x[i], want) {
						t.Errorf("alpha=%v n=%d off=%d: x[%d] = %v, want %v", alpha, n, off, i, x[i], want)
					}
				}
				checkGuards(t, "x", xb, x, sentinel)
			}
		}
	}
}

func TestScale32(t *testing.T) { forEachPath(t, func(t *testing.T) { testScale(t, Scale32) }) }
func TestScale64(t *testing.T) { forEachPath(t, func(t *testing.T) { testScale(t, Scale64) }) }

// TestGenericPath switches every CPU feature off and checks that the
// exported kernels then return exactly what the portable versions return.
func TestGenericPath(t *testing.T) {
	ps := testPaths()
	defer ps[len(ps)-1].use()()
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 100)
	y := make([]float32, 100)
	for i := range x {
		x[i], y[i] = randVal[float32](rng), 20*randVal[float32](rng)
	}
	if got, want := Dot32(x, y), dotGeneric(x, y); got != want {
		t.Errorf("Dot32 = %v, dotGeneric = %v", got, want)
	}
	got, want := make([]float32, 100), make([]float32, 100)
	Exp32(got, y)
	exp32Generic(want, y)
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("Exp32(%v) = %v, exp32Generic = %v", y[i], got[i], want[i])
		}
	}
	c1, c2 := make([]float32, 100), make([]float32, 100)
	Gemm32(false, true, 10, 10, 10, 1, x, 10, y, 10, 0, c1, 10)
	gemm32Generic(false, true, 10, 10, 10, 1, x, 10, y, 10, 0, c2, 10)
	for i := range c1 {
		if c1[i] != c2[i] {
			t.Fatalf("Gemm32: c[%d] = %v, gemm32Generic = %v", i, c1[i], c2[i])
		}
	}
}

func ExampleDot32() {
	x := []float32{1, 2, 3}
	y := []float32{4, 5, 6}
	fmt.Printf("%.4f\n", Dot32(x, y))
	// Output: 32.0000
}

func ExampleAxpy64() {
	x := []float64{1, 2, 3}
	y := []float64{10, 20, 30}
	Axpy64(0.5, x, y)
	fmt.Printf("%.4f\n", y)
	// Output: [10.5000 21.0000 31.5000]
}
