package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/gradcheck"
)

// precise are the options of every element-by-element check: the 4-point
// stencil, whose truncation error is O(h⁴), and a relative tolerance of 1e-8.
var precise = gradcheck.Options{Precise: true, Rel: 1e-8}

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

// dot returns Σ a⊙b in float64: the scalar loss L = Σ r⊙y of the checks,
// whose gradient with respect to y is the fixed random r.
func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// input is one differentiable input of an op under check.
type input struct {
	name string
	x    []float64
}

// fdCase is one op instance under check: the scalar loss as a function of
// the inputs' current values, and a backward that adds dL/dx of each input
// into grads (aligned with inputs).
type fdCase struct {
	loss     func() float64
	inputs   []input
	backward func(grads [][]float64)
}

// params runs the backward into zeroed buffers and pairs them with the inputs.
func (c fdCase) params() []gradcheck.Param {
	grads := make([][]float64, len(c.inputs))
	for i, in := range c.inputs {
		grads[i] = make([]float64, len(in.x))
	}
	c.backward(grads)
	ps := make([]gradcheck.Param, len(c.inputs))
	for i, in := range c.inputs {
		ps[i] = gradcheck.Param{Name: in.name, X: in.x, Grad: grads[i]}
	}
	return ps
}

// check compares every element of every input with finite differences.
func (c fdCase) check() gradcheck.Report { return gradcheck.Check(c.loss, c.params(), precise) }

// directional compares count random directional derivatives. The tolerance
// is looser than precise's: on large shapes the loss is a sum of many terms,
// and its rounding, divided by the step, is of order 1e-9 of a directional
// derivative.
func (c fdCase) directional(count int) gradcheck.Report {
	return gradcheck.Directional(c.loss, c.params(), count, gradcheck.Options{Precise: true, Rel: 1e-7, Seed: 7})
}

// accumulates runs the backward once into zeroed buffers and once into
// buffers pre-filled with a sentinel, and returns an error unless
// after − sentinel equals the fresh result in every element (up to the
// rounding of one addition).
func (c fdCase) accumulates() error {
	fresh := make([][]float64, len(c.inputs))
	filled := make([][]float64, len(c.inputs))
	for i, in := range c.inputs {
		fresh[i] = make([]float64, len(in.x))
		filled[i] = make([]float64, len(in.x))
		for k := range filled[i] {
			filled[i][k] = sentinel(k)
		}
	}
	c.backward(fresh)
	c.backward(filled)
	for i, in := range c.inputs {
		for k, got := range filled[i] {
			want := fresh[i][k]
			if d := math.Abs(got - sentinel(k) - want); !(d <= 1e-12*(1+math.Abs(want))) {
				return fmt.Errorf("%s[%d]: after − sentinel = %.17g, fresh backward = %.17g", in.name, k, got-sentinel(k), want)
			}
		}
	}
	return nil
}

// sentinel is the value a gradient buffer holds before an accumulate check.
func sentinel(k int) float64 { return 0.75 + 0.125*float64(k%5) }

// mutant is a broken backward. byAccumulate marks a defect that finite
// differences cannot see (overwriting instead of adding: the gradient is
// right, only its contract is broken); the sentinel check must catch it.
type mutant[F any] struct {
	name         string
	backward     F
	byAccumulate bool
}

// rejectMutants asserts that the real backward passes both checks and that
// every mutant fails the check that is meant to catch it.
func rejectMutants[F any](t *testing.T, real F, mutants []mutant[F], build func(F) fdCase) {
	t.Helper()
	c := build(real)
	if err := c.check().Err(); err != nil {
		t.Fatalf("real backward fails finite differences: %v", err)
	}
	if err := c.accumulates(); err != nil {
		t.Fatalf("real backward does not accumulate: %v", err)
	}
	for _, m := range mutants {
		c := build(m.backward)
		fd := c.check().Err()
		if m.byAccumulate {
			if fd != nil {
				t.Errorf("%s: finite differences were expected to pass (the gradient values are right), got %v", m.name, fd)
			}
			if err := c.accumulates(); err == nil {
				t.Errorf("%s: not caught by the accumulate check", m.name)
			} else {
				t.Logf("%s: caught by the accumulate check: %v", m.name, err)
			}
			continue
		}
		if fd == nil {
			t.Errorf("%s: not caught by finite differences", m.name)
		} else {
			t.Logf("%s: caught: %v", m.name, fd)
		}
	}
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
