package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// testDots checks dots against float64 sums for row lengths on and off the
// vector widths and row counts around the group of four, with padded rows,
// and that a row's result does not depend on the rows around it.
func testDots[T Float](t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, k := range []int{0, 1, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 200} {
		for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 13} {
			ldb := k + rng.IntN(3)
			x := make([]T, k)
			b := make([]T, max(0, (n-1)*ldb+k))
			for i := range x {
				x[i] = randVal[T](rng)
			}
			for i := range b {
				b[i] = randVal[T](rng)
			}
			for j := 0; j+1 < n; j++ { // padding is NaN: reading it poisons a row
				for p := k; p < ldb; p++ {
					b[j*ldb+p] = T(math.NaN())
				}
			}
			out := make([]T, n)
			dots(x, b, ldb, out)
			for j := range n {
				var want, mag float64
				for p := range k {
					want += float64(x[p]) * float64(b[j*ldb+p])
					mag += math.Abs(float64(x[p]) * float64(b[j*ldb+p]))
				}
				if d := math.Abs(float64(out[j]) - want); !(d <= float64(k+2)*eps[T]()*mag+tiny[T]()) {
					t.Fatalf("k=%d n=%d ldb=%d: out[%d] = %v, want %v", k, n, ldb, j, out[j], want)
				}
				one := make([]T, 1)
				dots(x, b[j*ldb:j*ldb+k], ldb, one)
				if !sameBits(one[0], out[j]) {
					t.Fatalf("k=%d n=%d: row %d alone gives %v, among others %v", k, n, j, one[0], out[j])
				}
			}
		}
	}
}

func TestDots32(t *testing.T) { forEachPath(t, testDots[float32]) }
func TestDots64(t *testing.T) { forEachPath(t, testDots[float64]) }

// testAxpys checks axpys against float64 sums, and that any split of y
// gives the same bits.
func testAxpys[T Float](t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, k := range []int{0, 1, 2, 5, 16, 64} {
		for _, n := range []int{0, 1, 3, 4, 8, 15, 16, 17, 33, 64, 65, 100, 256} {
			ldb := n + rng.IntN(3)
			alpha := make([]T, k)
			b := make([]T, max(0, (k-1)*ldb+n))
			y0 := make([]T, n)
			for i := range alpha {
				alpha[i] = randVal[T](rng)
			}
			for i := range b {
				b[i] = randVal[T](rng)
			}
			for i := range y0 {
				y0[i] = randVal[T](rng)
			}
			y := append([]T(nil), y0...)
			axpys(alpha, b, ldb, y)
			for x := range n {
				want, mag := float64(y0[x]), math.Abs(float64(y0[x]))
				for p := range k {
					want += float64(alpha[p]) * float64(b[p*ldb+x])
					mag += math.Abs(float64(alpha[p]) * float64(b[p*ldb+x]))
				}
				if d := math.Abs(float64(y[x]) - want); !(d <= float64(k+2)*eps[T]()*mag+tiny[T]()) {
					t.Fatalf("k=%d n=%d: y[%d] = %v, want %v", k, n, x, y[x], want)
				}
			}
			for _, cut := range []int{16, 64} { // the splits of parallel skinny products fall on vector widths
				if cut >= n || k == 0 {
					continue
				}
				z := append([]T(nil), y0...)
				axpys(alpha, b, ldb, z[:cut])
				axpys(alpha, b[cut:], ldb, z[cut:])
				for x := range z {
					if !sameBits(z[x], y[x]) {
						t.Fatalf("k=%d n=%d split at %d: y[%d] = %v, unsplit %v", k, n, cut, x, z[x], y[x])
					}
				}
			}
		}
	}
}

func TestAxpys32(t *testing.T) { forEachPath(t, testAxpys[float32]) }
func TestAxpys64(t *testing.T) { forEachPath(t, testAxpys[float64]) }

func BenchmarkDots(b *testing.B) {
	for _, k := range []int{64, 192} {
		x, m := make([]float32, k), make([]float32, 1024*k)
		out := make([]float32, 1024)
		b.Run(fmt.Sprintf("k=%d/rows=1024", k), func(b *testing.B) {
			b.SetBytes(int64(4 * len(m)))
			for b.Loop() {
				dots(x, m, k, out)
			}
		})
	}
}

func BenchmarkAxpys(b *testing.B) {
	alpha, m, y := make([]float32, 1024), make([]float32, 1024*64), make([]float32, 64)
	b.SetBytes(int64(4 * len(m)))
	for b.Loop() {
		axpys(alpha, m, 64, y)
	}
}
