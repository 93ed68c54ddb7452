package nn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/checks"
)

// runChecks runs every check of suite on impl: the same checks the lab runs.
func runChecks[I any](t *testing.T, suite checks.Suite[I], impl I) {
	t.Helper()
	for _, c := range suite.Checks {
		t.Run(c.Name, func(t *testing.T) {
			r := c.Run(impl)
			if !r.Pass {
				t.Fatalf("%s: %s", c.Name, r.Detail)
			}
			t.Logf("%s", r.Detail)
		})
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6e6e)) }

// randn returns n standard normal values times scale.
func randn(r *rand.Rand, n int, scale float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = scale * r.NormFloat64()
	}
	return x
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// agree checks a float32 result against the float64 one with a relative
// tolerance scaled by the largest magnitude in the float64 result.
func agree(t *testing.T, name string, want []float64, got []float32, tol float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: lengths %d and %d", name, len(want), len(got))
	}
	var scale float64
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i := range want {
		if d := math.Abs(want[i] - float64(got[i])); !(d <= tol*(scale+1e-30)) {
			t.Fatalf("%s[%d]: float64 %.9g, float32 %.9g (tolerance %.1g of %.3g)", name, i, want[i], got[i], tol, scale)
		}
	}
}

// near checks got against want element by element within tol·(1 + |want|).
func near(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", name, len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*(1+math.Abs(want[i]))) {
			t.Errorf("%s[%d] = %.17g, want %.17g", name, i, got[i], want[i])
		}
	}
}

// panics asserts that f panics with a message containing want.
func panics(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one containing %q", want)
			return
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Errorf("panic %q, want one containing %q", msg, want)
		}
	}()
	f()
}
