//go:build !purego

package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpShiftFloor32AVX2Order: the kernel's two-vector steps give the bits
// of its one-vector steps. Every element equals the kernel run on its own
// vector of 8, and the sum is the one accumulator of 8 lanes added in the
// order of x, folded (l0+l4, …), then pairwise, as the one-vector loop
// sums it. Lengths of 1 to 9 vectors take the paired steps and the single
// last one.
func TestExpShiftFloor32AVX2Order(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this machine")
	}
	const floor = -44.361419555836
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 900 {
		nv := 1 + trial%9
		x := make([]float32, 8*nv)
		for i := range x {
			x[i] = 2 - float32(rng.Float64()*50)
		}
		x[len(x)-1] = float32(math.Inf(-1))
		dst := make([]float32, len(x))
		sum, live := expShiftFloor32AVX2(dst, x, 1.5, floor)
		var acc [8]float32
		for v := range nv {
			one := make([]float32, 8)
			expShiftFloor32AVX2(one, x[8*v:8*v+8], 1.5, floor)
			for l := range 8 {
				if math.Float32bits(one[l]) != math.Float32bits(dst[8*v+l]) {
					t.Fatalf("%d vectors: element %d is %v, %v on its own", nv, 8*v+l, dst[8*v+l], one[l])
				}
				acc[l] += one[l]
			}
		}
		var h [4]float32
		for l := range 4 {
			h[l] = acc[l] + acc[l+4]
		}
		want := (h[0] + h[2]) + (h[1] + h[3])
		if math.Float32bits(sum) != math.Float32bits(want) || !live {
			t.Errorf("%d vectors: sum %v live %v, want %v true", nv, sum, live, want)
		}
	}
}
