package checks

import (
	"strconv"

	"github.com/attnlab/attnlab/gradcheck"
)

// Sweep is the error of finite differences against their step ε, for the
// central (2-point) and the 4-point stencil, on the attention gradients of the
// cache-chunk configuration (every element of q, k, v).
type Sweep struct {
	Config  string              `json:"config"`
	Central gradcheck.SweepRows `json:"central"`
	Precise gradcheck.SweepRows `json:"precise"`
}

// EpsSweep measures how the finite-difference error of impl's gradients
// depends on ε: falling as ε shrinks while truncation dominates (∝ ε² for
// central, ε⁴ for 4-point differences), then rising as rounding takes over
// (∝ u/ε).
func EpsSweep(impl Impl, eps []float64) (Sweep, error) {
	c := cacheChunk()
	loss, p, err := Prepare(attentionCase(impl.Run, c, 10), nil, 10)
	if err != nil {
		return Sweep{}, err
	}
	return Sweep{
		Config:  describe(c) + ", after a cache of " + strconv.Itoa(c.N-c.M) + " tokens",
		Central: gradcheck.Sweep(loss, p, eps, gradcheck.Options{}),
		Precise: gradcheck.Sweep(loss, p, eps, gradcheck.Options{Precise: true}),
	}, nil
}
