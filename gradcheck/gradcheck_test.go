package gradcheck_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/gradcheck"
)

func randn(rnd *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rnd.NormFloat64()
	}
	return x
}

// sinChain is L = Σ_i g_i sin(x_i) x_{i+1}, indices modulo n.
type sinChain struct{ x, g []float64 }

func newSinChain(seed uint64, n int) *sinChain {
	rnd := rand.New(rand.NewPCG(seed, 1))
	return &sinChain{x: randn(rnd, n), g: randn(rnd, n)}
}

func (f *sinChain) loss() float64 {
	n := len(f.x)
	var l float64
	for i := range n {
		l += f.g[i] * math.Sin(f.x[i]) * f.x[(i+1)%n]
	}
	return l
}

func (f *sinChain) grad() []float64 {
	n := len(f.x)
	d := make([]float64, n)
	for k := range n {
		next, prev := (k+1)%n, (k+n-1)%n
		d[k] = f.g[k]*math.Cos(f.x[k])*f.x[next] + f.g[prev]*math.Sin(f.x[prev])
	}
	return d
}

// matMul is L = Σ G ⊙ (A B) with A m×k, B k×n and G m×n, row-major.
type matMul struct {
	m, k, n int
	a, b, g []float64
}

func newMatMul(seed uint64, m, k, n int) *matMul {
	rnd := rand.New(rand.NewPCG(seed, 2))
	return &matMul{m: m, k: k, n: n, a: randn(rnd, m*k), b: randn(rnd, k*n), g: randn(rnd, m*n)}
}

func (f *matMul) loss() float64 {
	var l float64
	for i := range f.m {
		for j := range f.n {
			var o float64
			for p := range f.k {
				o += f.a[i*f.k+p] * f.b[p*f.n+j]
			}
			l += f.g[i*f.n+j] * o
		}
	}
	return l
}

// grads returns dA = G Bᵀ and dB = Aᵀ G.
func (f *matMul) grads() (da, db []float64) {
	da = make([]float64, f.m*f.k)
	db = make([]float64, f.k*f.n)
	for i := range f.m {
		for j := range f.n {
			g := f.g[i*f.n+j]
			for p := range f.k {
				da[i*f.k+p] += g * f.b[p*f.n+j]
				db[p*f.n+j] += f.a[i*f.k+p] * g
			}
		}
	}
	return da, db
}

func (f *matMul) params() []gradcheck.Param {
	da, db := f.grads()
	return []gradcheck.Param{{Name: "A", X: f.a, Grad: da}, {Name: "B", X: f.b, Grad: db}}
}

// sinSum is L = Σ_i g_i sin(x_i).
type sinSum struct{ x, g []float64 }

func newSinSum(seed uint64, n int) *sinSum {
	rnd := rand.New(rand.NewPCG(seed, 3))
	return &sinSum{x: randn(rnd, n), g: randn(rnd, n)}
}

func (f *sinSum) loss() float64 {
	var l float64
	for i, x := range f.x {
		l += f.g[i] * math.Sin(x)
	}
	return l
}

func (f *sinSum) grad() []float64 {
	d := make([]float64, len(f.x))
	for i, x := range f.x {
		d[i] = f.g[i] * math.Cos(x)
	}
	return d
}

func TestCheckPasses(t *testing.T) {
	for _, precise := range []bool{false, true} {
		opt := gradcheck.Options{Precise: precise}

		sc := newSinChain(1, 7)
		r := gradcheck.Check(sc.loss, []gradcheck.Param{{Name: "x", X: sc.x, Grad: sc.grad()}}, opt)
		if err := r.Err(); err != nil {
			t.Errorf("precise=%v sin chain: %v\n%v", precise, err, r)
		}
		if r.Checked != 7 {
			t.Errorf("precise=%v sin chain: checked %d elements, want 7", precise, r.Checked)
		}

		mm := newMatMul(2, 3, 4, 5)
		r = gradcheck.Check(mm.loss, mm.params(), opt)
		if err := r.Err(); err != nil {
			t.Errorf("precise=%v matmul: %v\n%v", precise, err, r)
		}
		if r.Checked != 3*4+4*5 || len(r.Params) != 2 || r.Params[0].Checked != 12 || r.Params[1].Checked != 20 {
			t.Errorf("precise=%v matmul: unexpected counts\n%v", precise, r)
		}
		wantMethod, wantEps := gradcheck.MethodCentral, gradcheck.DefaultEps
		if precise {
			wantMethod, wantEps = gradcheck.MethodCentral4, gradcheck.DefaultPreciseEps
		}
		if r.Method != wantMethod || r.Eps != wantEps {
			t.Errorf("precise=%v: method %q eps %g, want %q %g", precise, r.Method, r.Eps, wantMethod, wantEps)
		}
		if r.Opt.Abs != gradcheck.DefaultAbs || r.Opt.Rel != gradcheck.DefaultRel {
			t.Errorf("precise=%v: tolerances %g %g not defaulted", precise, r.Opt.Abs, r.Opt.Rel)
		}
		if !(r.NormRel < 1e-8) {
			t.Errorf("precise=%v: norm-wise relative error %g", precise, r.NormRel)
		}
	}
}

func TestSignFlipCaught(t *testing.T) {
	mm := newMatMul(3, 3, 4, 5)
	ps := mm.params()
	for i := range ps[1].Grad {
		ps[1].Grad[i] = -ps[1].Grad[i]
	}
	r := gradcheck.Check(mm.loss, ps, gradcheck.Options{})
	err := r.Err()
	if err == nil {
		t.Fatal("sign flip not caught")
	}
	if r.Worst.Param != "B" || r.Params[0].Failed != 0 || r.Params[1].Failed != len(ps[1].X) {
		t.Errorf("sign flip reported on the wrong param: %v\n%v", err, r)
	}
	if !strings.Contains(err.Error(), `param "B" index`) {
		t.Errorf("error does not name the param: %v", err)
	}
}

func TestMissingFactorCaught(t *testing.T) {
	// L = Σ g_i x_i², whose gradient is 2 g_i x_i.
	rnd := rand.New(rand.NewPCG(4, 4))
	x, g := randn(rnd, 9), randn(rnd, 9)
	loss := func() float64 {
		var l float64
		for i := range x {
			l += g[i] * x[i] * x[i]
		}
		return l
	}
	half := make([]float64, len(x))
	for i := range x {
		half[i] = g[i] * x[i]
	}
	r := gradcheck.Check(loss, []gradcheck.Param{{Name: "x", X: x, Grad: half}}, gradcheck.Options{})
	if r.Err() == nil || r.Failed != len(x) {
		t.Fatalf("missing factor 2 not caught on every element\n%v", r)
	}
	if w := r.Worst; math.Abs(w.Numeric-2*w.Analytic) > 1e-6 {
		t.Errorf("worst element analytic %g numeric %g, want numeric = 2 analytic", w.Analytic, w.Numeric)
	}

	for i := range x {
		half[i] *= 2
	}
	if err := gradcheck.Check(loss, []gradcheck.Param{{Name: "x", X: x, Grad: half}}, gradcheck.Options{}).Err(); err != nil {
		t.Errorf("correct gradient rejected: %v", err)
	}
}

func TestPermutationCaught(t *testing.T) {
	mm := newMatMul(5, 3, 4, 5)
	ps := mm.params()
	da := ps[0].Grad
	da[2], da[5] = da[5], da[2]
	r := gradcheck.Check(mm.loss, ps, gradcheck.Options{})
	err := r.Err()
	if err == nil {
		t.Fatal("gradient written to the wrong index not caught")
	}
	if r.Failed != 2 || len(r.Failures) != 2 {
		t.Fatalf("got %d failures, want 2\n%v", r.Failed, r)
	}
	for k, want := range []int{2, 5} {
		if f := r.Failures[k]; f.Param != "A" || f.Index != want {
			t.Errorf("failure %d is %s[%d], want A[%d]", k, f.Param, f.Index, want)
		}
	}
	if w := r.Worst; w.Param != "A" || (w.Index != 2 && w.Index != 5) {
		t.Errorf("worst element %s[%d], want A[2] or A[5]", w.Param, w.Index)
	}
	if want := fmt.Sprintf(`param "A" index %d`, r.Worst.Index); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

func TestSingleZeroCaughtWithAlways(t *testing.T) {
	const n, bad = 200, 137
	f := newSinSum(6, n)
	grad := f.grad()
	grad[bad] = 0
	opt := gradcheck.Options{MaxPerParam: 8, Always: map[string][]int{"x": {bad}}, Seed: 1}
	r := gradcheck.Check(f.loss, []gradcheck.Param{{Name: "x", X: f.x, Grad: grad}}, opt)
	if r.Checked != 8 {
		t.Errorf("checked %d elements, want 8", r.Checked)
	}
	if r.Err() == nil || r.Failed != 1 || r.Worst.Param != "x" || r.Worst.Index != bad {
		t.Fatalf("zero gradient at x[%d] not caught: worst %s[%d]\n%v", bad, r.Worst.Param, r.Worst.Index, r)
	}
	if !strings.Contains(r.Err().Error(), `param "x" index 137`) {
		t.Errorf("error does not name the element: %v", r.Err())
	}

	// The last index is always part of the sample.
	grad = f.grad()
	grad[n-1] = 0
	opt.Always = nil
	r = gradcheck.Check(f.loss, []gradcheck.Param{{Name: "x", X: f.x, Grad: grad}}, opt)
	if r.Err() == nil || r.Worst.Index != n-1 {
		t.Errorf("zero gradient at the last index not caught\n%v", r)
	}
}

func TestSample(t *testing.T) {
	const n = 1000
	x := make([]float64, n)
	grad := make([]float64, n)
	loss := func() float64 {
		var l float64
		for _, v := range x {
			l += v
		}
		return l
	}
	// Every analytic value is wrong, so Failures lists the sample.
	sampled := func(seed uint64, always []int) []int {
		opt := gradcheck.Options{MaxPerParam: 10, Seed: seed, Always: map[string][]int{"x": always}}
		r := gradcheck.Check(loss, []gradcheck.Param{{Name: "x", X: x, Grad: grad}}, opt)
		var idx []int
		for _, f := range r.Failures {
			idx = append(idx, f.Index)
		}
		if r.Checked != len(idx) {
			t.Fatalf("checked %d, listed %d", r.Checked, len(idx))
		}
		return idx
	}
	a := sampled(7, []int{500, 501})
	if len(a) != 10 || !slices.IsSorted(a) || a[0] != 0 || a[9] != n-1 || !slices.Contains(a, 500) || !slices.Contains(a, 501) {
		t.Errorf("sample %v: want 10 sorted indices including 0, 500, 501 and %d", a, n-1)
	}
	if b := sampled(7, []int{500, 501}); !slices.Equal(a, b) {
		t.Errorf("same seed gave samples %v and %v", a, b)
	}
	if c := sampled(8, []int{500, 501}); slices.Equal(a, c) {
		t.Errorf("different seeds gave the same sample %v", a)
	}
	// More required indices than MaxPerParam: all of them are checked.
	if d := sampled(7, []int{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}); len(d) != 12 {
		t.Errorf("sample %v: want the 10 required indices and both ends", d)
	}
}

func TestDirectional(t *testing.T) {
	mm := newMatMul(8, 6, 7, 5)
	sc := newSinChain(9, 30)
	loss := func() float64 { return mm.loss() + sc.loss() }
	ps := append(mm.params(), gradcheck.Param{Name: "x", X: sc.x, Grad: sc.grad()})

	for _, precise := range []bool{false, true} {
		r := gradcheck.Directional(loss, ps, 6, gradcheck.Options{Precise: precise, Seed: 3})
		if err := r.Err(); err != nil {
			t.Errorf("precise=%v: correct gradient rejected: %v", precise, err)
		}
		if r.Method != gradcheck.MethodDirection || r.Checked != 6 || len(r.Params) != 1 || r.Params[0].Name != "direction" {
			t.Errorf("precise=%v: unexpected report\n%v", precise, r)
		}
	}

	ps[2].Grad[17] += 0.05
	r := gradcheck.Directional(loss, ps, 4, gradcheck.Options{Seed: 3})
	err := r.Err()
	if err == nil || r.Failed != 4 {
		t.Fatalf("wrong gradient passed %d of 4 directions\n%v", 4-r.Failed, r)
	}
	if r.Worst.Param != "direction" || r.Worst.Index < 0 || r.Worst.Index >= 4 {
		t.Errorf("worst element %s[%d], want a direction", r.Worst.Param, r.Worst.Index)
	}
	if !strings.Contains(err.Error(), "direction "+fmt.Sprint(r.Worst.Index)) {
		t.Errorf("error does not name the direction: %v", err)
	}
}

// smooth is a loss of order one with non-vanishing higher derivatives.
type smooth struct{ x, g []float64 }

func newSmooth() *smooth {
	return &smooth{x: []float64{0.3, -0.7, 1.1, 0.5}, g: []float64{0.9, -1.3, 0.4, 1.7}}
}

func (f *smooth) loss() float64 {
	var l float64
	for i, x := range f.x {
		l += f.g[i] * math.Exp(math.Sin(x))
	}
	return l
}

func (f *smooth) params() []gradcheck.Param {
	d := make([]float64, len(f.x))
	for i, x := range f.x {
		d[i] = f.g[i] * math.Cos(x) * math.Exp(math.Sin(x))
	}
	return []gradcheck.Param{{Name: "x", X: f.x, Grad: d}}
}

func TestSweep(t *testing.T) {
	f := newSmooth()
	eps := gradcheck.Decades(1e-1, 1e-12, 1)
	for _, tc := range []struct {
		precise  bool
		order    float64
		min, max float64 // bounds on err(1e-1) / err(1e-2)
	}{
		{false, 2, 1e2 / 3, 1e2 * 3},
		{true, 4, 1e4 / 10, 1e4 * 10},
	} {
		rows := gradcheck.Sweep(f.loss, f.params(), eps, gradcheck.Options{Precise: tc.precise})
		if len(rows) != len(eps) {
			t.Fatalf("got %d rows, want %d", len(rows), len(eps))
		}
		for i, r := range rows {
			if r.Eps != eps[i] {
				t.Errorf("row %d has step %g, want %g", i, r.Eps, eps[i])
			}
		}
		best := rows.Best()
		if best.Eps == eps[0] || best.Eps == eps[len(eps)-1] {
			t.Errorf("precise=%v: best step %g at an end of the sweep\n%v", tc.precise, best.Eps, rows)
		}
		for _, r := range rows {
			if r.MaxAbs < best.MaxAbs {
				t.Errorf("precise=%v: Best returned %g but step %g has error %g", tc.precise, best.MaxAbs, r.Eps, r.MaxAbs)
			}
		}
		// Truncation regime: error ~ eps^order.
		if ratio := rows[0].MaxAbs / rows[1].MaxAbs; !(ratio > tc.min && ratio < tc.max) {
			t.Errorf("precise=%v: err(1e-1)/err(1e-2) = %g, want about %g", tc.precise, ratio, math.Pow(10, tc.order))
		}
		if s := rows.Slopes()[0]; !(math.Abs(s-tc.order) < 0.5) {
			t.Errorf("precise=%v: truncation slope %g, want about %g", tc.precise, s, tc.order)
		}
		// Rounding regime: the smallest step is far worse than the best.
		if last := rows[len(rows)-1]; !(last.MaxAbs > 100*best.MaxAbs) {
			t.Errorf("precise=%v: error at step %g is %g, best %g: no rounding regime", tc.precise, last.Eps, last.MaxAbs, best.MaxAbs)
		}
	}
}

func TestSweepBestEmpty(t *testing.T) {
	if b := (gradcheck.SweepRows{}).Best(); b != (gradcheck.SweepRow{}) {
		t.Errorf("Best of no rows = %v", b)
	}
	if s := (gradcheck.SweepRows{{Eps: 1}}).Slopes(); s != nil {
		t.Errorf("Slopes of one row = %v", s)
	}
}

func TestDecades(t *testing.T) {
	d := gradcheck.Decades(1e-1, 1e-12, 2)
	if len(d) != 23 {
		t.Fatalf("got %d steps, want 23: %v", len(d), d)
	}
	for k := 0; k < len(d); k += 2 {
		if want := math.Pow10(-1 - k/2); d[k] != want {
			t.Errorf("step %d = %v, want exactly %v", k, d[k], want)
		}
	}
	if math.Abs(d[1]-0.031622776601683794) > 1e-17 {
		t.Errorf("step 1 = %v, want 10^-1.5", d[1])
	}
	for k := 1; k < len(d); k++ {
		if !(d[k] < d[k-1]) {
			t.Errorf("steps not decreasing at %d: %v", k, d)
		}
	}

	up := gradcheck.Decades(1e-3, 1, 1)
	if !slices.Equal(up, []float64{1e-3, 1e-2, 1e-1, 1}) {
		t.Errorf("Decades(1e-3, 1, 1) = %v", up)
	}
	off := gradcheck.Decades(1, 0.05, 1)
	if !slices.Equal(off, []float64{1, 0.1}) {
		t.Errorf("Decades(1, 0.05, 1) = %v", off)
	}
	if one := gradcheck.Decades(2e-3, 2e-3, 3); !slices.Equal(one, []float64{2e-3}) {
		t.Errorf("Decades(2e-3, 2e-3, 3) = %v", one)
	}
	if g := gradcheck.Decades(5e-1, 5e-3, 1); !slices.Equal(g, []float64{5e-1, 5e-2, 5e-3}) {
		t.Errorf("Decades(5e-1, 5e-3, 1) = %v", g)
	}
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want %q", want)
		}
		if msg := fmt.Sprint(r); !strings.Contains(msg, want) {
			t.Fatalf("panic %q, want %q", msg, want)
		}
	}()
	f()
}

func TestMutatingLossPanics(t *testing.T) {
	x := []float64{1, 2, 3}
	y := []float64{4, 5}
	params := []gradcheck.Param{{Name: "x", X: x, Grad: make([]float64, 3)}, {Name: "y", X: y, Grad: make([]float64, 2)}}
	mutateY := func() float64 {
		y[1] += 1e-3
		return x[0]
	}
	mustPanic(t, `gradcheck: loss modified param "y"`, func() { gradcheck.Check(mutateY, params, gradcheck.Options{}) })

	// A loss that writes to the element being perturbed.
	x = []float64{1, 2, 3}
	params[0].X = x
	clamp := func() float64 {
		for i := range x {
			x[i] = math.Round(x[i])
		}
		return x[0]
	}
	mustPanic(t, `gradcheck: loss modified param "x"`, func() { gradcheck.Check(clamp, params, gradcheck.Options{}) })
	mustPanic(t, `gradcheck: loss modified param "x"`, func() { gradcheck.Directional(clamp, params, 2, gradcheck.Options{}) })
}

func TestRestoresBitForBit(t *testing.T) {
	x := []float64{0.1, math.Copysign(0, -1), 1e-310, -3.7, 1e300, 0.7}
	orig := slices.Clone(x)
	g := []float64{1.3, -0.2, 0.5, 2, -1, 0.25}
	loss := func() float64 {
		var l float64
		for i, v := range x {
			l += g[i] * math.Tanh(v)
		}
		return l
	}
	ps := []gradcheck.Param{{Name: "x", X: x, Grad: make([]float64, len(x))}}
	same := func(what string) {
		t.Helper()
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(orig[i]) {
				t.Errorf("%s: x[%d] = %v, want %v bit for bit", what, i, x[i], orig[i])
			}
		}
	}
	gradcheck.Check(loss, ps, gradcheck.Options{})
	same("Check")
	gradcheck.Check(loss, ps, gradcheck.Options{Precise: true, Eps: 0.3})
	same("Check precise")
	gradcheck.Directional(loss, ps, 3, gradcheck.Options{Eps: 0.1})
	same("Directional")
	gradcheck.Sweep(loss, ps, gradcheck.Decades(1, 1e-12, 1), gradcheck.Options{})
	same("Sweep")

	// A loss that panics part-way leaves the parameters restored.
	for _, run := range []func(func() float64){
		func(l func() float64) { gradcheck.Check(l, ps, gradcheck.Options{}) },
		func(l func() float64) { gradcheck.Directional(l, ps, 3, gradcheck.Options{}) },
	} {
		calls := 0
		boom := func() float64 {
			if calls++; calls == 4 {
				panic("boom")
			}
			return loss()
		}
		mustPanic(t, "boom", func() { run(boom) })
		same("after panic")
	}
}

func TestNaNFails(t *testing.T) {
	f := newSinSum(10, 5)
	grad := f.grad()
	grad[1] = math.NaN()
	r := gradcheck.Check(f.loss, []gradcheck.Param{{Name: "x", X: f.x, Grad: grad}}, gradcheck.Options{})
	if r.Err() == nil || r.Failed != 1 || r.Worst.Index != 1 || !math.IsInf(r.MaxAbs, 1) {
		t.Errorf("NaN gradient not reported\n%v", r)
	}

	grad = f.grad()
	grad[3] = math.Inf(1)
	r = gradcheck.Check(f.loss, []gradcheck.Param{{Name: "x", X: f.x, Grad: grad}}, gradcheck.Options{})
	if r.Err() == nil || r.Failed != 1 || r.Worst.Index != 3 {
		t.Errorf("infinite gradient not reported\n%v", r)
	}

	nan := func() float64 { return math.NaN() }
	r = gradcheck.Check(nan, []gradcheck.Param{{Name: "x", X: f.x, Grad: f.grad()}}, gradcheck.Options{})
	if r.Err() == nil || r.Failed != len(f.x) {
		t.Errorf("NaN loss not reported\n%v", r)
	}
	r = gradcheck.Directional(nan, []gradcheck.Param{{Name: "x", X: f.x, Grad: f.grad()}}, 2, gradcheck.Options{})
	if r.Err() == nil || r.Failed != 2 {
		t.Errorf("NaN loss not reported by Directional\n%v", r)
	}
}

func TestNothingChecked(t *testing.T) {
	r := gradcheck.Check(func() float64 { return 0 }, nil, gradcheck.Options{})
	if r.Err() == nil {
		t.Error("a check of no elements passed")
	}
	r = gradcheck.Directional(func() float64 { return 0 }, []gradcheck.Param{{Name: "x"}}, 3, gradcheck.Options{})
	if r.Err() == nil {
		t.Error("a directional check of no elements passed")
	}
}

func TestInvalidArgumentsPanic(t *testing.T) {
	loss := func() float64 { return 0 }
	mustPanic(t, `param "x" has len(X) = 2 but len(Grad) = 1`, func() {
		gradcheck.Check(loss, []gradcheck.Param{{Name: "x", X: make([]float64, 2), Grad: make([]float64, 1)}}, gradcheck.Options{})
	})
	ps := []gradcheck.Param{{Name: "x", X: make([]float64, 2), Grad: make([]float64, 2)}}
	mustPanic(t, `unknown param "y"`, func() {
		gradcheck.Check(loss, ps, gradcheck.Options{Always: map[string][]int{"y": {0}}})
	})
	mustPanic(t, `Always index 2 out of range for param "x"`, func() {
		gradcheck.Check(loss, ps, gradcheck.Options{Always: map[string][]int{"x": {2}}})
	})
	mustPanic(t, "invalid step", func() { gradcheck.Check(loss, ps, gradcheck.Options{Eps: -1}) })
	mustPanic(t, "invalid step", func() { gradcheck.Sweep(loss, ps, []float64{1e-3, 0}, gradcheck.Options{}) })
}

func TestDeterministic(t *testing.T) {
	mm := newMatMul(11, 8, 9, 7)
	ps := mm.params()
	ps[1].Grad[4] += 1e-3
	opt := gradcheck.Options{MaxPerParam: 10, Seed: 42}
	if a, b := gradcheck.Check(mm.loss, ps, opt), gradcheck.Check(mm.loss, ps, opt); !reflect.DeepEqual(a, b) {
		t.Errorf("Check not deterministic:\n%v\n%v", a, b)
	}
	if a, b := gradcheck.Directional(mm.loss, ps, 5, opt), gradcheck.Directional(mm.loss, ps, 5, opt); !reflect.DeepEqual(a, b) {
		t.Errorf("Directional not deterministic:\n%v\n%v", a, b)
	}
}

func TestString(t *testing.T) {
	mm := newMatMul(12, 2, 3, 2)
	s := gradcheck.Check(mm.loss, mm.params(), gradcheck.Options{}).String()
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) != 4 {
		t.Fatalf("String has %d lines, want 4:\n%s", len(lines), s)
	}
	if !strings.HasPrefix(lines[0], "gradcheck central eps=1e-06: 12 checked, 0 failed") ||
		!strings.HasPrefix(lines[1], "param") ||
		!strings.HasPrefix(lines[2], "A ") || !strings.HasPrefix(lines[3], "B ") {
		t.Errorf("unexpected String:\n%s", s)
	}
}

// A layer with output O = W x is reduced to a scalar with a fixed random
// upstream gradient G, L = Σ G⊙O, and its backward pass, dW = G xᵀ, is
// compared with finite differences. A backward pass that forgets to
// transpose is caught.
func Example() {
	const m, n = 2, 3
	rnd := rand.New(rand.NewPCG(1, 1))
	w := make([]float64, m*n)
	x := make([]float64, n)
	g := make([]float64, m) // dL/dO
	for _, s := range [][]float64{w, x, g} {
		for i := range s {
			s[i] = rnd.NormFloat64()
		}
	}
	loss := func() float64 {
		var l float64
		for i := range m {
			var o float64
			for j := range n {
				o += w[i*n+j] * x[j]
			}
			l += g[i] * o
		}
		return l
	}

	dw := make([]float64, m*n)
	for i := range m {
		for j := range n {
			dw[i*n+j] = g[i] * x[j]
		}
	}
	r := gradcheck.Check(loss, []gradcheck.Param{{Name: "W", X: w, Grad: dw}}, gradcheck.Options{})
	fmt.Printf("%s: %d checked, %d failed, ok %v\n", r.Method, r.Checked, r.Failed, r.Err() == nil)

	// Wrong: indexes W as column-major.
	for i := range m {
		for j := range n {
			dw[j*m+i] = g[i] * x[j]
		}
	}
	r = gradcheck.Check(loss, []gradcheck.Param{{Name: "W", X: w, Grad: dw}}, gradcheck.Options{})
	fmt.Printf("%s: %d checked, %d failed, ok %v\n", r.Method, r.Checked, r.Failed, r.Err() == nil)
	fmt.Printf("worst: %s[%d] analytic %.4f numeric %.4f\n", r.Worst.Param, r.Worst.Index, r.Worst.Analytic, r.Worst.Numeric)
	// Output:
	// central: 6 checked, 0 failed, ok true
	// central: 6 checked, 4 failed, ok false
	// worst: W[2] analytic -0.4135 numeric 0.3040
}

// cancelling is L = Σ g_i·x_i² + big·(Σ x_i − Σ x_i): the big terms cancel
// in value but not in rounding, so L's rounding noise is far above u·|L|.
type cancelling struct {
	x, g []float64
	big  float64
}

func newCancelling(seed uint64, n int, big float64) *cancelling {
	rnd := rand.New(rand.NewPCG(seed, 7))
	return &cancelling{x: randn(rnd, n), g: randn(rnd, n), big: big}
}

func (f *cancelling) loss() float64 {
	var l, s float64
	for i, v := range f.x {
		l += f.g[i] * v * v
		s += f.big * v
	}
	for _, v := range f.x {
		s -= f.big * v
	}
	return l + s
}

func (f *cancelling) grad() []float64 {
	d := make([]float64, len(f.x))
	for i, v := range f.x {
		d[i] = 2 * f.g[i] * v
	}
	return d
}

// TestToleranceFollowsTheError shows what the estimated tolerance is for: a
// loss whose rounding noise is far above u·|L| (terms of 1e4 cancel) fails
// a fixed tolerance on the correct gradient and passes the estimated one,
// which measures the noise; and a gradient wrong by one part in 1e4 still
// fails.
func TestToleranceFollowsTheError(t *testing.T) {
	f := newCancelling(1, 12, 1e4)
	ps := func(g []float64) []gradcheck.Param { return []gradcheck.Param{{Name: "x", X: f.x, Grad: g}} }
	if err := gradcheck.Check(f.loss, ps(f.grad()), gradcheck.Options{Fixed: true}).Err(); err == nil {
		t.Error("the fixed tolerance passed a loss whose rounding it ignores: the test shows nothing")
	}
	r := gradcheck.Check(f.loss, ps(f.grad()), gradcheck.Options{})
	if err := r.Err(); err != nil {
		t.Fatalf("correct gradient rejected by the estimated tolerance: %v", err)
	}
	if lossScale := 0x1p-53 * math.Abs(f.loss()); !(r.Noise > 100*lossScale) {
		t.Errorf("noise η = %.3g, not far above u·|L| = %.3g although the loss cancels terms of 1e4", r.Noise, lossScale)
	}
	for _, precise := range []bool{false, true} {
		wrong := f.grad()
		for i := range wrong {
			wrong[i] *= 1 + 1e-4
		}
		if err := gradcheck.Check(f.loss, ps(wrong), gradcheck.Options{Precise: precise}).Err(); err == nil {
			t.Errorf("precise=%v: a gradient wrong by 1e-4 relative passed", precise)
		}
		if err := gradcheck.Directional(f.loss, ps(wrong), 4, gradcheck.Options{Precise: precise}).Err(); err == nil {
			t.Errorf("precise=%v: Directional passed a gradient wrong by 1e-4 relative", precise)
		}
	}
}

// TestTruncationEstimate: for L = Σ sin(x_i) at a large step the central
// difference's error is h²cos(x)/6 per element; the estimate T must be
// within 10% of it, and the element passes.
func TestTruncationEstimate(t *testing.T) {
	x := []float64{0.3, -1.1, 2}
	loss := func() float64 {
		var l float64
		for _, v := range x {
			l += math.Sin(v)
		}
		return l
	}
	g := []float64{math.Cos(x[0]), math.Cos(x[1]), math.Cos(x[2])}
	const h = 1e-2
	r := gradcheck.Check(loss, []gradcheck.Param{{Name: "x", X: x, Grad: g}}, gradcheck.Options{Eps: h, Rel: 1e-15, Abs: 1e-15})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Failures {
		t.Errorf("failure %+v", e)
	}
	x2 := []float64{0.3}
	g2 := []float64{math.Cos(0.3)}
	r = gradcheck.Check(func() float64 { return math.Sin(x2[0]) }, []gradcheck.Param{{Name: "x", X: x2, Grad: g2}}, gradcheck.Options{Eps: h, Rel: 1e-15, Abs: 1e-15})
	want := h * h * math.Cos(0.3) / 6
	if got := r.Worst.Trunc; math.Abs(got-want) > 0.1*want {
		t.Errorf("truncation estimate %.4g, want h²·cos(x)/6 = %.4g", got, want)
	}
}
