package gradcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
)

// Default steps and tolerances used when the corresponding Options field is zero.
const (
	DefaultEps        = 1e-6  // step of the central difference
	DefaultPreciseEps = 1e-3  // step of the 4-point stencil
	DefaultAbs        = 1e-10 // absolute tolerance
	DefaultRel        = 1e-7  // relative tolerance
)

// MaxFailures is the largest number of failing elements listed in
// Report.Failures.
const MaxFailures = 16

// relFloor is the magnitude below which an element does not contribute
// to the elementwise relative error.
const relFloor = 1e-12

// Methods reported in Report.Method.
const (
	MethodCentral   = "central"   // element by element, central difference
	MethodCentral4  = "central-4" // element by element, 4-point stencil
	MethodDirection = "direction" // random directional derivatives
)

// PCG stream constants, so that the element sample and the random
// directions drawn from the same Seed are independent.
const (
	streamSample    = 0x9e3779b97f4a7c15
	streamDirection = 0xbf58476d1ce4e5b9
	streamNoise     = 0x94d049bb133111eb
)

// Param is one input tensor of the loss. X is perturbed in place during a
// check and always restored bit for bit; Grad is the analytic gradient
// dLoss/dX computed by the caller beforehand and must have the same length
// as X.
type Param struct {
	Name    string
	X, Grad []float64
}

// Options configures a check. The zero value gives the central difference
// with the default step and tolerances, checking every element.
type Options struct {
	// Eps is the finite-difference step. Zero means DefaultEps,
	// or DefaultPreciseEps when Precise is set.
	Eps float64

	// Precise selects the 4-point stencil
	// (f(x-2h) - 8f(x-h) + 8f(x+h) - f(x+2h)) / 12h, whose truncation
	// error is O(h⁴), instead of the central difference, O(h²).
	Precise bool

	// Abs and Rel are the tolerances: an element passes when
	// |a-n| <= Abs + Rel*max(|a|,|n|) + 2(T + R), where T and R estimate
	// the truncation and rounding error of the finite difference itself
	// (see the package documentation). A zero field takes its default,
	// DefaultAbs or DefaultRel.
	Abs, Rel float64

	// Fixed drops the estimate 2(T + R) from the tolerance, which is then
	// Abs + Rel*max(|a|,|n|) alone, and saves the evaluations it costs: a
	// caller that has measured its error regime (with Sweep) and chosen
	// Abs and Rel from it.
	Fixed bool

	// MaxPerParam limits the number of elements checked in each Param.
	// Zero means every element. Otherwise a sample of MaxPerParam
	// distinct indices, drawn with Seed, is checked; the sample always
	// includes the first and last index and every index listed in
	// Always, even when that makes it larger than MaxPerParam.
	MaxPerParam int

	// Always lists, by Param name, indices that are always checked,
	// such as the boundary between masked and unmasked elements.
	Always map[string][]int

	// Seed seeds the element sample and the random directions.
	Seed uint64
}

// withDefaults returns opt with zero step and tolerances replaced by
// their defaults.
func (opt Options) withDefaults() Options {
	if opt.Eps == 0 {
		opt.Eps = DefaultEps
		if opt.Precise {
			opt.Eps = DefaultPreciseEps
		}
	}
	if opt.Abs == 0 {
		opt.Abs = DefaultAbs
	}
	if opt.Rel == 0 {
		opt.Rel = DefaultRel
	}
	if !(opt.Eps > 0) || math.IsInf(opt.Eps, 0) {
		panic(fmt.Sprintf("gradcheck: invalid step %v", opt.Eps))
	}
	if !(opt.Abs >= 0) || !(opt.Rel >= 0) {
		panic(fmt.Sprintf("gradcheck: invalid tolerance Abs=%v Rel=%v", opt.Abs, opt.Rel))
	}
	if opt.MaxPerParam < 0 {
		panic(fmt.Sprintf("gradcheck: negative MaxPerParam %d", opt.MaxPerParam))
	}
	return opt
}

// Element is the comparison of one analytic and one numeric derivative.
type Element struct {
	Param    string  // name of the Param, or "direction" for Directional
	Index    int     // index into Param.X, or the direction number
	Analytic float64 // the caller's gradient
	Numeric  float64 // the finite-difference estimate
	Diff     float64 // |Analytic - Numeric|
	Tol      float64 // Abs + Rel*max(|Analytic|, |Numeric|) + 2(Trunc + Round)
	Trunc    float64 // estimated truncation error of Numeric (0 when Options.Fixed)
	Round    float64 // estimated rounding error of Numeric (0 when Options.Fixed)
	Pass     bool    // both values finite and Diff <= Tol
}

// excess returns how far e is beyond its tolerance; non-finite values are
// infinitely far.
func (e Element) excess() float64 {
	if !finite(e.Analytic) || !finite(e.Numeric) || math.IsNaN(e.Diff) {
		return math.Inf(1)
	}
	return e.Diff - e.Tol
}

// ParamReport summarises the elements checked in one Param.
type ParamReport struct {
	Name    string
	Checked int

	// MaxAbs is the largest |a-n|.
	MaxAbs float64
	// MaxRel is the largest |a-n| / max(|a|,|n|) over the elements
	// where max(|a|,|n|) > 1e-12; other elements count as 0.
	MaxRel float64
	// NormRel is the norm-wise relative error max|a-n| / max|a|,
	// 0 if both are 0.
	NormRel float64

	Failed int

	// Worst is the element with the largest |a-n| - tolerance.
	Worst Element
}

// Report is the result of Check, Directional or one step of Sweep.
// In the statistics a NaN or infinite analytic or numeric value counts
// as an infinite difference.
type Report struct {
	Method string  // MethodCentral, MethodCentral4 or MethodDirection
	Eps    float64 // the step actually used
	// Noise is η, the rounding noise of one evaluation of the loss that the
	// tolerance allows for (0 when Options.Fixed).
	Noise  float64
	Params []ParamReport

	Checked, Failed         int
	MaxAbs, MaxRel, NormRel float64 // over all params, as in ParamReport
	Worst                   Element // over all params

	// Failures lists the first failing elements in the order they were
	// checked, at most MaxFailures of them.
	Failures []Element

	// Opt holds the options used, with defaults filled in.
	Opt Options
}

// Err returns nil when at least one element was checked and none failed.
// Otherwise it returns an error describing the worst element on one line.
func (r Report) Err() error {
	if r.Checked == 0 {
		return errors.New("gradcheck: no elements checked")
	}
	if r.Failed == 0 {
		return nil
	}
	w := r.Worst
	where := fmt.Sprintf("%s: param %q index %d", r.Method, w.Param, w.Index)
	if r.Method == MethodDirection {
		where = fmt.Sprintf("direction %d", w.Index)
	}
	est := ""
	if !r.Opt.Fixed {
		est = fmt.Sprintf(", truncation ≈ %.2g, rounding ≈ %.2g", w.Trunc, w.Round)
	}
	return fmt.Errorf("gradcheck: %s: analytic %.8g, numeric %.8g, |diff| %.3g > tol %.3g (eps %g%s; %d of %d failed)",
		where, w.Analytic, w.Numeric, w.Diff, w.Tol, r.Eps, est, r.Failed, r.Checked)
}

// String formats r as a small table with one row per Param.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gradcheck %s eps=%g: %d checked, %d failed\n", r.Method, r.Eps, r.Checked, r.Failed)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "param\tchecked\tmax abs\tmax rel\tnorm rel\tfailed")
	for _, p := range r.Params {
		fmt.Fprintf(tw, "%s\t%d\t%.2e\t%.2e\t%.2e\t%d\n", p.Name, p.Checked, p.MaxAbs, p.MaxRel, p.NormRel, p.Failed)
	}
	tw.Flush()
	return b.String()
}

// Check compares, element by element, the analytic gradients in params with
// finite-difference estimates of the derivatives of loss, which must read
// the current values of the X slices. It panics if a Param's X and Grad
// differ in length, if Always names an unknown Param or an index out of
// range, or if loss modifies any X.
func Check(loss func() float64, params []Param, opt Options) Report {
	r, _ := CheckContext(context.Background(), loss, params, opt)
	return r
}

// CheckContext is Check that stops when ctx is done, between two
// evaluations of loss, with the params restored and ctx's error.
func CheckContext(ctx context.Context, loss func() float64, params []Param, opt Options) (Report, error) {
	opt = opt.withDefaults()
	idx := sample(params, opt)
	snap := snapshot(params)
	noise := 0.0
	if !opt.Fixed {
		var err error
		if noise, err = measureNoise(ctx, loss, params, snap, opt); err != nil {
			return Report{}, err
		}
	}
	r, err := check(ctx, loss, params, idx, opt, noise)
	verify(params, snap)
	return r, err
}

// Directional compares, for count seeded random unit directions u over the
// concatenation of all params (Gaussian, normalised), the numeric
// directional derivative (L(x+εu)-L(x-εu))/2ε, or the 4-point stencil when
// opt.Precise is set, with the analytic Σ Grad·u. It is the fast check for
// tensors too large for element-by-element differences. The report holds
// one Element per direction, with Index the direction number and Param
// "direction"; opt.MaxPerParam and opt.Always are not used.
func Directional(loss func() float64, params []Param, count int, opt Options) Report {
	r, _ := DirectionalContext(context.Background(), loss, params, count, opt)
	return r
}

// DirectionalContext is Directional that stops when ctx is done, between
// two evaluations of loss, with the params restored and ctx's error.
func DirectionalContext(ctx context.Context, loss func() float64, params []Param, count int, opt Options) (Report, error) {
	opt = opt.withDefaults()
	if count < 0 {
		panic(fmt.Sprintf("gradcheck: negative direction count %d", count))
	}
	checkLengths(params)
	snap := snapshot(params)
	n := 0
	for _, p := range params {
		n += len(p.X)
	}
	if n == 0 {
		count = 0
	}

	// Restore every X from the snapshot however the function is left.
	defer restore(params, snap)

	noise := 0.0
	if !opt.Fixed && count > 0 {
		var err error
		if noise, err = measureNoise(ctx, loss, params, snap, opt); err != nil {
			return Report{}, err
		}
	}
	s := stencilFor(opt)
	rnd := rand.New(rand.NewPCG(opt.Seed, streamDirection))
	acc := newAccumulator(MethodDirection, opt, noise)
	pa := newParamAccumulator(MethodDirection)
	for d := range count {
		u := unitVector(rnd, n)
		var analytic float64
		k := 0
		for _, p := range params {
			for i, g := range p.Grad {
				analytic += g * u[k+i]
			}
			k += len(p.Grad)
		}
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		f := s.evaluate(func(h float64) float64 {
			moveAlong(params, snap, u, h)
			l := loss()
			if name, ok := movedAlong(params, snap, u, h); !ok {
				panic(fmt.Sprintf("gradcheck: loss modified param %q", name))
			}
			return l
		}, opt.Eps)
		restore(params, snap)
		pa.add(acc.element(MethodDirection, d, analytic, f))
	}
	acc.addParam(pa)
	r := acc.report()
	verify(params, snap)
	return r, nil
}

// unitVector returns n Gaussian values drawn from rnd, scaled to unit norm.
func unitVector(rnd *rand.Rand, n int) []float64 {
	u := make([]float64, n)
	var ss float64
	for i := range u {
		u[i] = rnd.NormFloat64()
		ss += u[i] * u[i]
	}
	norm := math.Sqrt(ss)
	for i := range u {
		u[i] /= norm
	}
	return u
}

// SweepRow is the error of Check at one step.
type SweepRow struct {
	Eps     float64 // the step
	MaxAbs  float64 // max |a-n| over the checked elements
	MaxRel  float64 // max elementwise relative error
	NormRel float64 // norm-wise relative error
	Failed  int     // elements outside the tolerance
}

// SweepRows is the result of Sweep, one row per step.
type SweepRows []SweepRow

// Best returns the row with the smallest MaxAbs, the first of equal rows.
// It returns the zero SweepRow if rows is empty.
func (rows SweepRows) Best() SweepRow {
	var best SweepRow
	for i, r := range rows {
		if i == 0 || r.MaxAbs < best.MaxAbs || (math.IsNaN(best.MaxAbs) && !math.IsNaN(r.MaxAbs)) {
			best = r
		}
	}
	return best
}

// Slopes returns, for each pair of consecutive rows, the slope
// Δlog(MaxAbs)/Δlog(Eps) of the error on a log-log scale. In the truncation
// regime it is close to the order of the stencil (2, or 4 when Precise);
// in the rounding regime it is close to -1. A slope is NaN when either
// error is zero or not finite.
func (rows SweepRows) Slopes() []float64 {
	if len(rows) < 2 {
		return nil
	}
	s := make([]float64, len(rows)-1)
	for i := range s {
		a, b := rows[i], rows[i+1]
		if !(a.MaxAbs > 0) || !(b.MaxAbs > 0) || math.IsInf(a.MaxAbs, 0) || math.IsInf(b.MaxAbs, 0) {
			s[i] = math.NaN()
			continue
		}
		s[i] = math.Log(b.MaxAbs/a.MaxAbs) / math.Log(b.Eps/a.Eps)
	}
	return s
}

// Sweep runs Check at each step in eps and returns the error at each.
// The same sample of elements is checked at every step, so the rows are
// comparable. The errors show the truncation regime, where the error falls
// with the step (as eps² for the central difference, eps⁴ for the 4-point
// stencil), and the rounding regime, where it grows as 1/eps. opt.Eps is
// ignored.
func Sweep(loss func() float64, params []Param, eps []float64, opt Options) SweepRows {
	rows, _ := SweepContext(context.Background(), loss, params, eps, opt)
	return rows
}

// SweepContext is Sweep that stops when ctx is done, between two
// evaluations of loss, with the params restored and ctx's error.
func SweepContext(ctx context.Context, loss func() float64, params []Param, eps []float64, opt Options) (SweepRows, error) {
	opt.Eps, opt.Fixed = 0, true
	opt = opt.withDefaults()
	idx := sample(params, opt)
	snap := snapshot(params)
	rows := make(SweepRows, len(eps))
	for i, h := range eps {
		if !(h > 0) || math.IsInf(h, 0) {
			panic(fmt.Sprintf("gradcheck: invalid step %v", h))
		}
		o := opt
		o.Eps = h
		r, err := check(ctx, loss, params, idx, o, 0)
		if err != nil {
			verify(params, snap)
			return nil, err
		}
		rows[i] = SweepRow{Eps: h, MaxAbs: r.MaxAbs, MaxRel: r.MaxRel, NormRel: r.NormRel, Failed: r.Failed}
	}
	verify(params, snap)
	return rows, nil
}

// Decades returns steps from from to to (in either direction), evenly
// spaced on a log scale with perDecade steps per factor of 10. Points a
// whole number of decades from from are computed exactly, so when from is a
// power of ten they are exact powers of ten:
// Decades(1e-1, 1e-12, 2) returns 1e-1, 3.16e-2, 1e-2, ..., 1e-12.
// The last point is to if to lies on the grid, otherwise the last grid
// point before to. Decades panics if from or to is not positive and finite
// or perDecade is not positive.
func Decades(from, to float64, perDecade int) []float64 {
	if !(from > 0) || !(to > 0) || math.IsInf(from, 0) || math.IsInf(to, 0) {
		panic(fmt.Sprintf("gradcheck: invalid decade range %v to %v", from, to))
	}
	if perDecade <= 0 {
		panic(fmt.Sprintf("gradcheck: invalid points per decade %d", perDecade))
	}
	l0 := math.Log10(from)
	span := (math.Log10(to) - l0) * float64(perDecade)
	dir := 1
	if span < 0 {
		dir = -1
		span = -span
	}
	n := int(math.Floor(span + 1e-9))
	e0 := int(math.Round(l0))
	pow := from == math.Pow10(e0)
	out := make([]float64, n+1)
	for k := range out {
		q, rem := k/perDecade, k%perDecade
		switch {
		case rem != 0:
			out[k] = math.Pow(10, l0+float64(dir*k)/float64(perDecade))
		case pow:
			out[k] = math.Pow10(e0 + dir*q)
		case dir > 0:
			out[k] = from * math.Pow10(q)
		default:
			out[k] = from / math.Pow10(q)
		}
	}
	return out
}

// check runs the element-by-element comparison on the given indices with
// rounding noise η = noise per evaluation. opt must have its defaults
// filled in. It stops with ctx's error, the params restored, when ctx is
// done.
func check(ctx context.Context, loss func() float64, params []Param, idx [][]int, opt Options, noise float64) (Report, error) {
	method := MethodCentral
	if opt.Precise {
		method = MethodCentral4
	}
	s := stencilFor(opt)

	// The element being perturbed, restored however the function is left.
	cur, curIdx, saved := -1, 0, 0.0
	defer func() {
		if cur >= 0 {
			params[cur].X[curIdx] = saved
		}
	}()

	acc := newAccumulator(method, opt, noise)
	for pi, p := range params {
		pa := newParamAccumulator(p.Name)
		for _, i := range idx[pi] {
			if err := ctx.Err(); err != nil {
				return Report{}, err
			}
			v := p.X[i]
			cur, curIdx, saved = pi, i, v
			f := s.evaluate(func(h float64) float64 {
				x := v + h
				p.X[i] = x
				l := loss()
				if math.Float64bits(p.X[i]) != math.Float64bits(x) {
					panic(fmt.Sprintf("gradcheck: loss modified param %q", p.Name))
				}
				return l
			}, opt.Eps)
			p.X[i] = v
			cur = -1
			pa.add(acc.element(p.Name, i, p.Grad[i], f))
		}
		acc.addParam(pa)
	}
	return acc.report(), nil
}

// A stencil is a difference formula: the derivative at x is
// Σ_k Weights[k]·L(x + Offsets[k]·h) / (Den·h).
type stencil struct {
	Offsets, Weights []float64
	Den              float64
}

// The stencils, each exact for polynomials of one degree more than the one
// before: central (error h²L‴/6), 4-point (h⁴L⁽⁵⁾/30), 6-point
// (h⁶L⁽⁷⁾/140).
var (
	central2 = stencil{[]float64{-1, 1}, []float64{-1, 1}, 2}
	central4 = stencil{[]float64{-2, -1, 1, 2}, []float64{1, -8, 8, -1}, 12}
	central6 = stencil{[]float64{-3, -2, -1, 1, 2, 3}, []float64{-1, 9, -45, 45, -9, 1}, 60}
)

// gain is Σ|Weights|/Den: rounding errors of at most η in each evaluation
// make an error of at most gain·η/h in the derivative.
func (s stencil) gain() float64 {
	var g float64
	for _, w := range s.Weights {
		g += math.Abs(w)
	}
	return g / s.Den
}

// estimate is the stencil of the check and, unless the tolerance is fixed,
// the next wider one, whose difference from it estimates its truncation
// error.
type estimate struct {
	base, wider *stencil
}

func stencilFor(opt Options) estimate {
	e := estimate{base: &central2, wider: &central4}
	if opt.Precise {
		e = estimate{base: &central4, wider: &central6}
	}
	if opt.Fixed {
		e.wider = nil
	}
	return e
}

// difference is one numeric derivative: Value from the check's stencil and,
// when estimated, Wider from the next wider stencil on the same points.
type difference struct {
	Value, Wider float64
	Gain         float64 // the base stencil's gain
	Estimated    bool
}

// evaluate evaluates at(h) at every offset the stencils need, each once,
// and returns the differences at step h.
func (e estimate) evaluate(at func(h float64) float64, h float64) difference {
	offsets := e.base.Offsets
	if e.wider != nil {
		offsets = e.wider.Offsets
	}
	var vals [7]float64 // L(x + o·h) at vals[o+3], o = −3…3
	for _, o := range offsets {
		vals[int(o)+3] = at(o * h)
	}
	apply := func(s *stencil) float64 {
		var sum float64
		for k, o := range s.Offsets {
			sum += s.Weights[k] * vals[int(o)+3]
		}
		return sum / (s.Den * h)
	}
	d := difference{Value: apply(e.base), Gain: e.base.gain()}
	if e.wider != nil {
		d.Wider, d.Estimated = apply(e.wider), true
	}
	return d
}

// Noise probe: the loss at 2·noisePoints+1 points x + k·h·v, k = −noisePoints…noisePoints, along a
// random unit direction v, h = noiseStep·ε. On so small a scale L is a
// polynomial of low degree up to its rounding, so high-order differences of
// these values are rounding alone (Moré and Wild, "Estimating computational
// noise", SIAM J. Sci. Comput. 33(3), 2011).
const (
	noisePoints = 5
	noiseStep   = 1e-3
	unitRound   = 0x1p-53 // u, the unit roundoff of float64
)

// measureNoise returns η, the rounding noise of one evaluation of loss at
// the snapshot point: max(3σ̂, u·|L(x)|), where σ̂ is the largest of the
// estimates from the 4th, 5th and 6th differences of the probe,
// σ̂_k² = γ_k·mean((Δᵏ L)²) with γ_k = (k!)²/(2k)!. The parameters are
// restored on return.
func measureNoise(ctx context.Context, loss func() float64, params []Param, snap [][]float64, opt Options) (float64, error) {
	n := 0
	for _, p := range params {
		n += len(p.X)
	}
	if n == 0 {
		return 0, nil
	}
	defer restore(params, snap)
	v := unitVector(rand.New(rand.NewPCG(opt.Seed, streamNoise)), n)
	f := make([]float64, 2*noisePoints+1)
	for k := range f {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		moveAlong(params, snap, v, float64(k-noisePoints)*noiseStep*opt.Eps)
		f[k] = loss()
		if name, ok := movedAlong(params, snap, v, float64(k-noisePoints)*noiseStep*opt.Eps); !ok {
			panic(fmt.Sprintf("gradcheck: loss modified param %q", name))
		}
	}
	floor := unitRound * math.Abs(f[noisePoints])
	for _, x := range f {
		if !finite(x) {
			return floor, nil
		}
	}
	var sigma float64
	diffs := f
	for k := 1; k <= 6; k++ {
		next := make([]float64, len(diffs)-1)
		for i := range next {
			next[i] = diffs[i+1] - diffs[i]
		}
		diffs = next
		if k < 4 {
			continue
		}
		var ss float64
		for _, d := range diffs {
			ss += d * d
		}
		fk := math.Gamma(float64(k + 1))
		gamma := fk * fk / math.Gamma(float64(2*k+1))
		sigma = max(sigma, math.Sqrt(gamma*ss/float64(len(diffs))))
	}
	return max(3*sigma, floor), nil
}

// sample returns, for each param, the sorted indices to check.
func sample(params []Param, opt Options) [][]int {
	checkLengths(params)
	names := make(map[string]bool, len(params))
	for _, p := range params {
		names[p.Name] = true
	}
	keys := make([]string, 0, len(opt.Always))
	for name := range opt.Always {
		keys = append(keys, name)
	}
	slices.Sort(keys)
	for _, name := range keys {
		if _, ok := names[name]; !ok {
			panic(fmt.Sprintf("gradcheck: Always names unknown param %q", name))
		}
	}

	idx := make([][]int, len(params))
	for pi, p := range params {
		n := len(p.X)
		for _, i := range opt.Always[p.Name] {
			if i < 0 || i >= n {
				panic(fmt.Sprintf("gradcheck: Always index %d out of range for param %q of length %d", i, p.Name, n))
			}
		}
		if n == 0 {
			continue
		}
		if opt.MaxPerParam == 0 || opt.MaxPerParam >= n {
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			idx[pi] = all
			continue
		}
		chosen := map[int]bool{0: true, n - 1: true}
		for _, i := range opt.Always[p.Name] {
			chosen[i] = true
		}
		rnd := rand.New(rand.NewPCG(opt.Seed, streamSample+uint64(pi)))
		need := opt.MaxPerParam - len(chosen)
		if need > 0 && 2*need >= n-len(chosen) {
			// Dense sample: shuffle the unchosen indices and take a prefix.
			rest := make([]int, 0, n-len(chosen))
			for i := range n {
				if !chosen[i] {
					rest = append(rest, i)
				}
			}
			rnd.Shuffle(len(rest), func(a, b int) { rest[a], rest[b] = rest[b], rest[a] })
			for _, i := range rest[:need] {
				chosen[i] = true
			}
		} else {
			// Sparse sample: draw until enough distinct indices are found.
			for ; need > 0; need-- {
				i := rnd.IntN(n)
				for chosen[i] {
					i = rnd.IntN(n)
				}
				chosen[i] = true
			}
		}
		s := make([]int, 0, len(chosen))
		for i := range chosen {
			s = append(s, i)
		}
		slices.Sort(s)
		idx[pi] = s
	}
	return idx
}

// checkLengths panics if a Param's X and Grad differ in length.
func checkLengths(params []Param) {
	for _, p := range params {
		if len(p.X) != len(p.Grad) {
			panic(fmt.Sprintf("gradcheck: param %q has len(X) = %d but len(Grad) = %d", p.Name, len(p.X), len(p.Grad)))
		}
	}
}

// snapshot returns a copy of every X.
func snapshot(params []Param) [][]float64 {
	s := make([][]float64, len(params))
	for pi, p := range params {
		s[pi] = slices.Clone(p.X)
	}
	return s
}

// restore copies the snapshot back into every X.
func restore(params []Param, snap [][]float64) {
	for pi, p := range params {
		copy(p.X, snap[pi])
	}
}

// moveAlong sets every X to its snapshot plus h times its part of u.
func moveAlong(params []Param, snap [][]float64, u []float64, h float64) {
	k := 0
	for pi, p := range params {
		for i, x := range snap[pi] {
			p.X[i] = x + h*u[k+i]
		}
		k += len(p.X)
	}
}

// movedAlong reports whether every X still holds the values set by
// moveAlong, and if not, the name of the first Param that differs.
func movedAlong(params []Param, snap [][]float64, u []float64, h float64) (string, bool) {
	k := 0
	for pi, p := range params {
		for i, x := range snap[pi] {
			if math.Float64bits(p.X[i]) != math.Float64bits(x+h*u[k+i]) {
				return p.Name, false
			}
		}
		k += len(p.X)
	}
	return "", true
}

// verify panics unless every X is bit-identical to its snapshot.
func verify(params []Param, snap [][]float64) {
	for pi, p := range params {
		for i, x := range p.X {
			if math.Float64bits(x) != math.Float64bits(snap[pi][i]) {
				panic(fmt.Sprintf("gradcheck: loss modified param %q", p.Name))
			}
		}
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// paramAccumulator gathers the statistics of one Param.
type paramAccumulator struct {
	r     ParamReport
	maxA  float64 // max |a| over finite analytic values
	worst float64 // excess of r.Worst
}

func newParamAccumulator(name string) *paramAccumulator {
	return &paramAccumulator{r: ParamReport{Name: name}}
}

func (pa *paramAccumulator) add(e Element) {
	d, rel := e.Diff, 0.0
	if !finite(e.Analytic) || !finite(e.Numeric) || math.IsNaN(d) {
		d, rel = math.Inf(1), math.Inf(1)
	} else if scale := max(math.Abs(e.Analytic), math.Abs(e.Numeric)); scale > relFloor {
		rel = d / scale
	}
	if finite(e.Analytic) {
		pa.maxA = max(pa.maxA, math.Abs(e.Analytic))
	}
	pa.r.MaxAbs = max(pa.r.MaxAbs, d)
	pa.r.MaxRel = max(pa.r.MaxRel, rel)
	if ex := e.excess(); pa.r.Checked == 0 || ex > pa.worst {
		pa.r.Worst, pa.worst = e, ex
	}
	pa.r.Checked++
	if !e.Pass {
		pa.r.Failed++
	}
}

// accumulator gathers the statistics of a Report.
type accumulator struct {
	r     Report
	maxA  float64
	worst float64
}

func newAccumulator(method string, opt Options, noise float64) *accumulator {
	return &accumulator{r: Report{Method: method, Eps: opt.Eps, Noise: noise, Opt: opt}}
}

// element compares one analytic value a with the numeric derivative d,
// with the report's tolerances and, unless they are fixed, the estimate of
// d's own error, and records it in the failure list if it fails.
func (acc *accumulator) element(param string, index int, a float64, d difference) Element {
	n := d.Value
	diff := math.Abs(a - n)
	tol := acc.r.Opt.Abs + acc.r.Opt.Rel*max(math.Abs(a), math.Abs(n))
	var trunc, round float64
	if d.Estimated {
		trunc = math.Abs(d.Value - d.Wider)
		round = d.Gain * acc.r.Noise / acc.r.Eps
		tol += 2 * (trunc + round)
	}
	e := Element{
		Param:    param,
		Index:    index,
		Analytic: a,
		Numeric:  n,
		Diff:     diff,
		Tol:      tol,
		Trunc:    trunc,
		Round:    round,
		// Written so that any NaN makes the element fail.
		Pass: finite(a) && finite(n) && diff <= tol,
	}
	if !e.Pass && len(acc.r.Failures) < MaxFailures {
		acc.r.Failures = append(acc.r.Failures, e)
	}
	return e
}

func (acc *accumulator) addParam(pa *paramAccumulator) {
	pa.r.NormRel = normRel(pa.r.MaxAbs, pa.maxA)
	if pa.r.Checked > 0 && (acc.r.Checked == 0 || pa.worst > acc.worst) {
		acc.r.Worst, acc.worst = pa.r.Worst, pa.worst
	}
	acc.r.Checked += pa.r.Checked
	acc.r.Failed += pa.r.Failed
	acc.r.MaxAbs = max(acc.r.MaxAbs, pa.r.MaxAbs)
	acc.r.MaxRel = max(acc.r.MaxRel, pa.r.MaxRel)
	acc.maxA = max(acc.maxA, pa.maxA)
	acc.r.Params = append(acc.r.Params, pa.r)
}

func (acc *accumulator) report() Report {
	acc.r.NormRel = normRel(acc.r.MaxAbs, acc.maxA)
	return acc.r
}

// normRel returns maxDiff/maxA, 0 when both are 0.
func normRel(maxDiff, maxA float64) float64 {
	if maxDiff == 0 {
		return 0
	}
	return maxDiff / maxA
}
