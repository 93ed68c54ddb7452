package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// gemmSizes are the values of m, n and k the tests combine: empty, smaller
// than every tile, around the tile sizes (2, 4, 6, 8, 14, 16, 32) and around the
// cache blocks.
var gemmSizes = []int{0, 1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 64, 65, 100, 129, 257}

// gemmScalars are the values of alpha and beta; beta = 0 must ignore C.
var gemmScalars = [][2]float64{
	{0, 0}, {0, 1}, {0, -0.5},
	{1, 0}, {1, 1}, {1, -0.5},
	{-0.5, 0}, {-0.5, 1}, {-0.5, -0.5},
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float64
	pad            int // extra elements per row beyond the minimum ld
}

func (c gemmCase) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s/m=%d/n=%d/k=%d/alpha=%v/beta=%v/pad=%d", t(c.transA), t(c.transB), c.m, c.n, c.k, c.alpha, c.beta, c.pad)
}

// gemmCases samples the combinations of gemmSizes for the four transpose
// cases, cycling through the scalars and the padding, plus every scalar pair
// on two fixed shapes. Products above 2²² are rare, to keep the naive
// reference fast.
func gemmCases() []gemmCase {
	rng := rand.New(rand.NewPCG(13, 14))
	var cs []gemmCase
	i := 0
	for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		big := 0
		for len(cs) < (1+boolInt(tr[0])*2+boolInt(tr[1]))*60 {
			m := gemmSizes[rng.IntN(len(gemmSizes))]
			n := gemmSizes[rng.IntN(len(gemmSizes))]
			k := gemmSizes[rng.IntN(len(gemmSizes))]
			if m*n*k > 1<<22 {
				if big > 1 {
					continue
				}
				big++
			}
			s := gemmScalars[i%len(gemmScalars)]
			cs = append(cs, gemmCase{tr[0], tr[1], m, n, k, s[0], s[1], []int{0, 3, 1}[i%3]})
			i++
		}
		for _, s := range gemmScalars {
			cs = append(cs, gemmCase{tr[0], tr[1], 17, 33, 31, s[0], s[1], 2})
			cs = append(cs, gemmCase{tr[0], tr[1], 65, 100, 129, s[0], s[1], 0})
		}
	}
	return cs
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gemmOperands holds the matrices of one case. The padding of A and B is
// NaN (reading it poisons C); the padding of C is sentinel.
type gemmOperands[T Float] struct {
	a, b, c       []T
	lda, ldb, ldc int
}

func newGemmOperands[T Float](rng *rand.Rand, c gemmCase) gemmOperands[T] {
	ra, ca := c.m, c.k
	if c.transA {
		ra, ca = c.k, c.m
	}
	rb, cb := c.k, c.n
	if c.transB {
		rb, cb = c.n, c.k
	}
	var o gemmOperands[T]
	o.lda, o.ldb, o.ldc = max(1, ca+c.pad), max(1, cb+c.pad), max(1, c.n+c.pad)
	mat := func(r, cols, ld int, pad T, fill func() T) []T {
		s := make([]T, r*ld)
		for i := range s {
			if i%ld < cols {
				s[i] = fill()
			} else {
				s[i] = pad
			}
		}
		return s
	}
	nan := T(math.NaN())
	o.a = mat(ra, ca, o.lda, nan, func() T { return randVal[T](rng) })
	o.b = mat(rb, cb, o.ldb, nan, func() T { return randVal[T](rng) })
	o.c = mat(c.m, c.n, o.ldc, sentinel, func() T {
		if c.beta == 0 {
			return nan // must be ignored
		}
		return randVal[T](rng)
	})
	return o
}

// naiveGemm returns alpha·op(A)·op(B) + beta·C in float64, and for each
// element the sum of the magnitudes of its terms, which bounds the rounding
// error of any summation order.
func naiveGemm[T Float](c gemmCase, o gemmOperands[T]) (want, mag []float64) {
	want = make([]float64, c.m*c.n)
	mag = make([]float64, c.m*c.n)
	for i := 0; i < c.m; i++ {
		for j := 0; j < c.n; j++ {
			var s, sm float64
			for p := 0; p < c.k && c.alpha != 0; p++ {
				ia, ib := i*o.lda+p, p*o.ldb+j
				if c.transA {
					ia = p*o.lda + i
				}
				if c.transB {
					ib = j*o.ldb + p
				}
				av, bv := o.a[ia], o.b[ib]
				s += float64(av) * float64(bv)
				sm += math.Abs(float64(av) * float64(bv))
			}
			w, wm := c.alpha*s, math.Abs(c.alpha)*sm
			if c.beta != 0 {
				cv := float64(o.c[i*o.ldc+j])
				w += c.beta * cv
				wm += math.Abs(c.beta * cv)
			}
			want[i*c.n+j], mag[i*c.n+j] = w, wm
		}
	}
	return want, mag
}

type gemmFunc[T Float] func(transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)

func testGemm[T Float](t *testing.T, gemm gemmFunc[T]) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, c := range gemmCases() {
		o := newGemmOperands[T](rng, c)
		want, mag := naiveGemm(c, o)
		a0, b0 := append([]T(nil), o.a...), append([]T(nil), o.b...)
		gemm(c.transA, c.transB, c.m, c.n, c.k, T(c.alpha), o.a, o.lda, o.b, o.ldb, T(c.beta), o.c, o.ldc)
		bad := 0
		for i := 0; i < c.m; i++ {
			for j := 0; j < o.ldc; j++ {
				got := o.c[i*o.ldc+j]
				if j >= c.n {
					if got != sentinel {
						t.Errorf("%v: padding c[%d*ldc+%d] changed to %v", c, i, j, got)
					}
					continue
				}
				w, m := want[i*c.n+j], mag[i*c.n+j]
				tol := float64(c.k+4)*eps[T]()*m + tiny[T]()
				if d := math.Abs(float64(got) - w); !(d <= tol) && bad < 5 {
					bad++
					t.Errorf("%v: c[%d,%d] = %v, want %v (tolerance %g)", c, i, j, got, w, tol)
				}
			}
		}
		for i := range a0 {
			if !sameBits(o.a[i], a0[i]) {
				t.Fatalf("%v: a changed", c)
			}
		}
		for i := range b0 {
			if !sameBits(o.b[i], b0[i]) {
				t.Fatalf("%v: b changed", c)
			}
		}
	}
}

func TestGemm32(t *testing.T) {
	forEachPath(t, func(t *testing.T) { testGemm(t, Gemm32) })
}

func TestGemm64(t *testing.T) {
	forEachPath(t, func(t *testing.T) { testGemm(t, Gemm64) })
}

// testGemmDeterministic checks that the result does not depend on the
// number of goroutines: the split moves whole tiles, and every element is
// summed in the same order, so the bits agree.
func testGemmDeterministic[T Float](t *testing.T, gemm gemmFunc[T]) {
	rng := rand.New(rand.NewPCG(17, 18))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []gemmCase{
		{false, false, 300, 257, 129, 1, 0, 0},  // split along M
		{false, true, 129, 700, 65, -0.5, 1, 1}, // split along N
		{true, false, 513, 513, 700, 1, -0.5, 0},
		{true, true, 37, 1500, 33, 1, 1, 0},
		{false, true, 1, 4100, 192, 1, 0, 0},     // skinny, dot form, split along N
		{false, true, 3000, 5, 200, 0.5, 1, 2},   // skinny, dot form, split along M
		{false, false, 8, 2100, 300, 1, -0.5, 1}, // skinny, axpy form
		{true, false, 3, 1030, 900, -1, 0, 0},    // skinny, axpy form, A transposed
	} {
		o := newGemmOperands[T](rng, c)
		c0 := append([]T(nil), o.c...)
		var ref []T
		for _, procs := range []int{1, 2, 3} {
			runtime.GOMAXPROCS(procs)
			copy(o.c, c0)
			gemm(c.transA, c.transB, c.m, c.n, c.k, T(c.alpha), o.a, o.lda, o.b, o.ldb, T(c.beta), o.c, o.ldc)
			if ref == nil {
				ref = append([]T(nil), o.c...)
				continue
			}
			for i := range ref {
				if !sameBits(o.c[i], ref[i]) {
					t.Fatalf("%v: GOMAXPROCS=%d: c[%d] = %v, GOMAXPROCS=1 gave %v", c, procs, i, o.c[i], ref[i])
				}
			}
		}
	}
}

func TestGemm32Deterministic(t *testing.T) {
	forEachPath(t, func(t *testing.T) { testGemmDeterministic(t, Gemm32) })
}

func TestGemm64Deterministic(t *testing.T) {
	forEachPath(t, func(t *testing.T) { testGemmDeterministic(t, Gemm64) })
}

// TestGemmAlphaZero checks that A and B are not read when alpha is 0.
func TestGemmAlphaZero(t *testing.T) {
	nan := float32(math.NaN())
	a := []float32{nan, nan, nan, nan}
	c := []float32{1, 2, 3, 4}
	Gemm32(false, false, 2, 2, 2, 0, a, 2, a, 2, -0.5, c, 2)
	for i, want := range []float32{-0.5, -1, -1.5, -2} {
		if c[i] != want {
			t.Errorf("c[%d] = %v, want %v", i, c[i], want)
		}
	}
}

func TestGemmPanics(t *testing.T) {
	s := make([]float32, 100)
	for _, tc := range []struct {
		name string
		call func()
		want string
	}{
		{"negative m", func() { Gemm32(false, false, -1, 2, 2, 1, s, 2, s, 2, 0, s, 2) }, "vec: negative size m=-1 n=2 k=2"},
		{"short lda", func() { Gemm32(false, false, 3, 4, 5, 1, s, 4, s, 4, 0, s, 4) }, "vec: lda=4 < max(1, 5) for a 3×5 matrix"},
		{"short ldb transB", func() { Gemm32(false, true, 3, 4, 5, 1, s, 5, s, 4, 0, s, 4) }, "vec: ldb=4 < max(1, 5) for a 4×5 matrix"},
		{"short c", func() { Gemm32(false, false, 3, 40, 2, 1, s, 2, s, 40, 0, s[:90], 40) }, "vec: len(c)=90 < 120 for a 3×40 matrix with ldc=40"},
		{"short a transA", func() {
			Gemm64(true, false, 30, 2, 4, 1, make([]float64, 100), 30, make([]float64, 8), 2, 0, make([]float64, 60), 2)
		}, "vec: len(a)=100 < 120 for a 4×30 matrix with lda=30"},
		{"zero ldc", func() { Gemm32(false, false, 0, 0, 0, 1, nil, 1, nil, 1, 0, nil, 0) }, "vec: ldc=0 < max(1, 0) for a 0×0 matrix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, tc.want) {
					t.Errorf("panic %q, want %q", r, tc.want)
				}
			}()
			tc.call()
		})
	}
}

func ExampleGemm32() {
	// C = A·Bᵀ for a 2×3 A and a 2×3 B.
	a := []float32{
		1, 2, 3,
		4, 5, 6,
	}
	b := []float32{
		1, 0, -1,
		0.5, 0.5, 0.5,
	}
	c := make([]float32, 4)
	Gemm32(false, true, 2, 2, 3, 1, a, 3, b, 3, 0, c, 2)
	fmt.Printf("%.4f\n", c)
	// Output: [-2.0000 3.0000 -2.0000 7.5000]
}

// testPack compares the packing routines of the current path with the
// portable ones on every panel shape a kernel can meet, with guard bands
// around the packed panel.
func testPack[T Float](t *testing.T, kr *gemmKernel[T]) {
	rng := rand.New(rand.NewPCG(23, 24))
	nan := T(math.NaN())
	for _, w := range []int{kr.mr, kr.nr} {
		for r := 0; r <= w; r++ {
			for _, kb := range []int{0, 1, 2, 5, 8, 15, 16, 17, 33, 40} {
				ld := max(kb, w) + rng.IntN(3)
				// packTrans: r rows of kb, into kb rows of w.
				src, _ := guarded(max(r*ld, 1), 0, nan, func(int) T { return randVal[T](rng) })
				got, gb := guarded(kb*w, 1, sentinel, func(int) T { return nan })
				want := make([]T, kb*w)
				kr.packTrans(got, src, ld, r, kb, w)
				packTransGeneric(want, src, ld, r, kb, w)
				for i := range want {
					if !sameBits(got[i], want[i]) {
						t.Fatalf("packTrans w=%d r=%d kb=%d: dst[%d] = %v, want %v", w, r, kb, i, got[i], want[i])
					}
				}
				checkGuards(t, "packTrans dst", gb, got, sentinel)
				// packCopy: kb rows of cols, into micro-panels of w.
				cols := r + rng.IntN(3)*w
				ld = cols + rng.IntN(3)
				src, _ = guarded(max(kb*ld, 1), 0, nan, func(int) T { return randVal[T](rng) })
				got, gb = guarded(kb*ceilDiv(cols, w)*w, 2, sentinel, func(int) T { return nan })
				want = make([]T, len(got))
				kr.packCopy(got, src, ld, kb, cols, w)
				packCopyGeneric(want, src, ld, kb, cols, w)
				for i := range want {
					if !sameBits(got[i], want[i]) {
						t.Fatalf("packCopy w=%d cols=%d kb=%d: dst[%d] = %v, want %v", w, cols, kb, i, got[i], want[i])
					}
				}
				checkGuards(t, "packCopy dst", gb, got, sentinel)
			}
		}
	}
}

func TestPack(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testPack(t, kernel32()) })
		t.Run("f64", func(t *testing.T) { testPack(t, kernel64()) })
	})
}

// TestGemmRowA: the row-A kernels, which read A in place, give the bits of
// the packed path on every product they take (A not transposed, at most
// rowAMaxN columns), edge rows and columns, leading dimensions past the
// rows and every beta form included: they run the same multiply-adds in
// the same order.
func TestGemmRowA(t *testing.T) {
	if kernel32().fnRowA == nil {
		t.Skip("no row-A kernel on this path")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	defer func(n int) { rowAMaxN = n }(rowAMaxN)
	for _, c := range []gemmCase{
		{false, false, 64, 64, 64, 1, 1, 0},
		{false, true, 128, 128, 64, 0.125, 0, 3},
		{false, false, 100, 37, 300, -0.5, -0.5, 1}, // two k blocks, edge rows and columns
		{false, true, 7, 512, 129, 1, 0, 0},
		{false, false, 6, 16, 1, 1, 1, 0},
		{false, true, 200, 96, 128, 1, 0, 5},
	} {
		o := newGemmOperands[float32](rng, c)
		c0 := append([]float32(nil), o.c...)
		var got [2][]float32
		for x, limit := range []int{512, -1} {
			rowAMaxN = limit
			copy(o.c, c0)
			Gemm32(c.transA, c.transB, c.m, c.n, c.k, float32(c.alpha), o.a, o.lda, o.b, o.ldb, float32(c.beta), o.c, o.ldc)
			got[x] = append([]float32(nil), o.c...)
		}
		for i := range got[0] {
			if !sameBits(got[0][i], got[1][i]) {
				t.Fatalf("%v: c[%d] = %v read in place, %v packed", c, i, got[0][i], got[1][i])
			}
		}
		o64 := newGemmOperands[float64](rng, c)
		c64 := append([]float64(nil), o64.c...)
		var got64 [2][]float64
		for x, limit := range []int{512, -1} {
			rowAMaxN = limit
			copy(o64.c, c64)
			Gemm64(c.transA, c.transB, c.m, c.n, c.k, c.alpha, o64.a, o64.lda, o64.b, o64.ldb, c.beta, o64.c, o64.ldc)
			got64[x] = append([]float64(nil), o64.c...)
		}
		for i := range got64[0] {
			if !sameBits(got64[0][i], got64[1][i]) {
				t.Fatalf("%v float64: c[%d] = %v read in place, %v packed", c, i, got64[0][i], got64[1][i])
			}
		}
	}
}

// TestGemmSerial: GemmSerial gives Gemm's bits at every thread count, on
// products large enough that Gemm splits them, and panics on the bad
// arguments Gemm panics on.
func TestGemmSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(3)
	for _, c := range []gemmCase{
		{false, false, 300, 257, 129, 1, 0, 0},
		{false, true, 129, 700, 65, -0.5, 1, 1},
		{true, false, 3, 1030, 900, -1, 0, 0}, // skinny
	} {
		o := newGemmOperands[float32](rng, c)
		c0 := append([]float32(nil), o.c...)
		Gemm(c.transA, c.transB, c.m, c.n, c.k, float32(c.alpha), o.a, o.lda, o.b, o.ldb, float32(c.beta), o.c, o.ldc)
		want := append([]float32(nil), o.c...)
		copy(o.c, c0)
		GemmSerial(c.transA, c.transB, c.m, c.n, c.k, float32(c.alpha), o.a, o.lda, o.b, o.ldb, float32(c.beta), o.c, o.ldc)
		for i := range want {
			if !sameBits(o.c[i], want[i]) {
				t.Fatalf("%v: c[%d] = %v, Gemm gave %v", c, i, o.c[i], want[i])
			}
		}
		o64 := newGemmOperands[float64](rng, c)
		c64 := append([]float64(nil), o64.c...)
		Gemm(c.transA, c.transB, c.m, c.n, c.k, c.alpha, o64.a, o64.lda, o64.b, o64.ldb, c.beta, o64.c, o64.ldc)
		want64 := append([]float64(nil), o64.c...)
		copy(o64.c, c64)
		GemmSerial(c.transA, c.transB, c.m, c.n, c.k, c.alpha, o64.a, o64.lda, o64.b, o64.ldb, c.beta, o64.c, o64.ldc)
		for i := range want64 {
			if !sameBits(o64.c[i], want64[i]) {
				t.Fatalf("%v float64: c[%d] = %v, Gemm gave %v", c, i, o64.c[i], want64[i])
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("GemmSerial with a short C did not panic")
		}
	}()
	GemmSerial(false, false, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 2, 0, make([]float32, 3), 2)
}
