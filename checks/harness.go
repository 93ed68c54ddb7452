package checks

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
)

// Tolerances. Finite differences use the 4-point stencil, whose error at
// ε = 1e-3 is about ε⁴ + u/ε ≈ 1e-12 on these O(1) values (the lab's ε
// sweep measures it), so 1e-8 relative leaves a wide margin and still
// catches any wrong term: the checks use this fixed tolerance
// (gradcheck.Options.Fixed) and spare the evaluations of gradcheck's own
// error estimate. Identities that hold exactly in real arithmetic are held
// to a few hundred ulps. The float32 path is held to 2⁻¹⁶ ≈ 1.5e-5 of each
// tensor's largest value: 256 float32 ulps, room for sums of a few hundred
// rounded terms, while a wrong constant or a dropped term is far above it.
const (
	fdRel      = 1e-8
	fdAbs      = 1e-11
	identical  = 1e-12
	float32Tol = 0x1p-16
)

// Input is one differentiable input of a Case: its name and values.
type Input[T nn.Float] struct {
	Name string
	X    []T
}

// Case is one differentiable function at a fixed point, the form in which
// the generic checks (finite differences, accumulation, float32 agreement)
// see any operation. Forward reads the inputs' current X, so a checker can
// perturb them in place; Backward adds ∂L/∂input into grads (aligned with
// Inputs) given dout = ∂L/∂out, recomputing what it needs at the current
// point. A case built from an implementation's float32 path holds the same
// input values as the float64 one, rounded.
type Case[T nn.Float] struct {
	Name     string // the case's shape, for messages: "n=3, D=5"
	Inputs   []Input[T]
	Out      int // length of the output
	Forward  func(out []T) error
	Backward func(grads [][]T, dout []T) error
}

// Sizes are the dimensions of one instance of an operation built by
// Suite.At; each operation reads the ones it needs (Suite.Reads says
// which).
type Sizes struct {
	B, T    int // sequences and tokens per sequence (rows = B·T)
	M, N    int // attention: queries (the new chunk) and keys (cache included)
	Dim     int // model width
	Hq, Hkv int // query and key/value heads
	D, Dv   int // head dimension (of q and k), and of v (attention)
	F       int // SwiGLU hidden width
	Causal  bool
	Window  int
	Pairing nn.Pairing
}

// weights returns the fixed random G of the scalar loss L = Σ out ⊙ G: every
// output element matters, and G is the dout of the backward.
func weights(n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x1055))
	g := make([]float64, n)
	for i := range g {
		g[i] = r.NormFloat64()
	}
	return g
}

// lossOf returns L = Σ out ⊙ g as a function of c's inputs' current values;
// NaN when the forward fails.
func lossOf(c Case[float64], g []float64) func() float64 {
	out := make([]float64, c.Out)
	return func() float64 {
		if err := protect(func() error { return c.Forward(out) }); err != nil {
			return math.NaN()
		}
		var l float64
		for i := range out {
			l += out[i] * g[i]
		}
		return l
	}
}

// gradsOf runs c's backward with dout on buffers pre-filled with pre (nil:
// zeros).
func gradsOf[T nn.Float](c Case[T], dout []T, pre [][]T) ([][]T, error) {
	grads := make([][]T, len(c.Inputs))
	for i, in := range c.Inputs {
		grads[i] = make([]T, len(in.X))
		if pre != nil {
			copy(grads[i], pre[i])
		}
	}
	err := protect(func() error { return c.Backward(grads, dout) })
	return grads, err
}

// paramsOf pairs c's inputs with analytic gradients.
func paramsOf(c Case[float64], grads [][]float64) []gradcheck.Param {
	ps := make([]gradcheck.Param, len(c.Inputs))
	for i, in := range c.Inputs {
		ps[i] = gradcheck.Param{Name: in.Name, X: in.X, Grad: grads[i]}
	}
	return ps
}

// Prepare returns the scalar loss L = Σ out ⊙ G of c, with G fixed and random
// (drawn from seed), and c's inputs paired with their analytic gradients,
// ready for package gradcheck. With analytic set, the gradients are those of
// its float32 path on the same inputs, converted; the loss stays float64.
func Prepare(c Case[float64], analytic *Case[float32], seed uint64) (func() float64, []gradcheck.Param, error) {
	g := weights(c.Out, seed)
	var grads [][]float64
	if analytic == nil {
		var err error
		if grads, err = gradsOf(c, g, nil); err != nil {
			return nil, nil, err
		}
	} else {
		g32, err := gradsOf(*analytic, vec.Convert[float32](g), nil)
		if err != nil {
			return nil, nil, err
		}
		for _, x := range g32 {
			grads = append(grads, vec.Convert[float64](x))
		}
	}
	loss := lossOf(c, g)
	if l := loss(); math.IsNaN(l) {
		return nil, nil, protect(func() error { return c.Forward(make([]float64, c.Out)) })
	}
	return loss, paramsOf(c, grads), nil
}

// GradNorm returns ‖∇L‖ over all params: the scale against which a
// directional derivative's error is measured.
func GradNorm(params []gradcheck.Param) float64 {
	var norm float64
	for _, p := range params {
		for _, v := range p.Grad {
			norm += v * v
		}
	}
	return math.Sqrt(norm)
}

// gradSpec describes the generic checks of one operation: finite
// differences element by element on small cases and along random
// directions on large ones, the accumulation contract, and the agreement of
// the float32 path with the float64 reference on all of them. cases and
// cases32 build the same cases on an implementation's float64 and float32
// paths (big selects the large ones).
type gradSpec[I any] struct {
	op      string // the operation, as the claims name it
	ref     I      // the reference, from whose cases the shapes are rendered
	cases   func(impl I, big bool) []Case[float64]
	cases32 func(impl I, big bool) []Case[float32]
	eps     float64 // the 4-point step; 0: gradcheck.DefaultPreciseEps
	dirs    int     // random directions per large case; 0: no fd-directions
}

func (s gradSpec[I]) step() float64 {
	if s.eps != 0 {
		return s.eps
	}
	return gradcheck.DefaultPreciseEps
}

// shapes renders the names of cases and what they differentiate.
func shapes[T nn.Float](cs []Case[T]) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	var inputs []string
	if len(cs) > 0 {
		for _, in := range cs[0].Inputs {
			inputs = append(inputs, in.Name)
		}
	}
	return fmt.Sprintf("%d case(s): %s; inputs %s", len(cs), strings.Join(names, "; "), strings.Join(inputs, ", "))
}

// checks returns the generic checks, in the lab's order: fd-elements,
// fd-directions (when s.dirs > 0), accumulates, float32.
func (s gradSpec[I]) checks() []Check[I] {
	small, big := s.cases(s.ref, false), s.cases(s.ref, true)
	cs := []Check[I]{{
		Name: "fd-elements", Kind: Gradient, Run: s.fdElements,
		Claim: "every element of every input gradient of " + s.op + " equals the 4-point difference of L = Σ out ⊙ G",
		Limit: "agreement with the forward as written, not that the forward is right",
		Long: Long{
			Tests: fmt.Sprintf("for every element x of every input: ∂L/∂x from the backward equals the 4-point central difference "+
				"(8L(x+ε) − 8L(x−ε) − L(x+2ε) + L(x−2ε)) / 12ε of the scalar loss L = Σ out ⊙ G, with G a fixed random tensor; "+
				"|analytic − numeric| ≤ %g + %g·max(|analytic|, |numeric|), in float64, ε = %g", fdAbs, fdRel, s.step()),
			Shapes: shapes(small) + "; G has the output's shape and becomes dout",
			Proves: "the backward is the derivative of the forward, element by element, on these shapes and inputs: a dropped term, a wrong factor, a transposed product or a wrong index shows up as a mismatch",
			Cannot: "it compares the backward with the forward as written. A forward with a wrong mask, head mapping, position or target has a backward that matches it, equally wrong; " +
				"and a point where the function is not smooth, or a bug that only shows at other shapes, can pass",
		},
	}}
	if s.dirs > 0 {
		n := 0
		for _, c := range big {
			for _, in := range c.Inputs {
				n += len(in.X)
			}
		}
		cs = append(cs, Check[I]{
			Name: "fd-directions", Kind: Gradient, Run: s.fdDirections,
			Claim: "uᵀ∇L equals the directional difference for random directions on a larger " + s.op,
			Limit: "a few directions: an error confined to a few elements may hide",
			Long: Long{
				Tests: fmt.Sprintf("for %d random unit directions u over all inputs at once: uᵀ∇L equals the 4-point difference of L along u, ε = %g, "+
					"the error measured against ‖∇L‖ and held to %g of it", s.dirs, s.step(), fdRel),
				Shapes: fmt.Sprintf("%s; %d inputs in all, where perturbing every element would be slow", shapes(big), n),
				Proves: "the gradient is right in aggregate at realistic sizes: tiling, strides and loops that only run at larger shapes are exercised",
				Cannot: "a handful of directions: an error confined to a few elements moves uᵀ∇L very little and may hide; the element check covers that on small shapes",
			},
		})
	}
	cs = append(cs, Check[I]{
		Name: "accumulates", Kind: Contract, Run: s.accumulates,
		Claim: "backward adds into its gradient buffers: pre-filled, after − before equals a fresh run",
		Limit: "the contract of the buffers, not the values",
		Long: Long{
			Tests:  "the backward adds into its gradient buffers: run once on zeroed buffers and once on buffers pre-filled with random sentinels; after − before must equal the fresh result",
			Shapes: "the cases of fd-elements: " + shapes(small),
			Proves: "the += contract that residuals, weight tying, GQA's shared heads and gradient accumulation over micro-batches rely on",
			Cannot: "the values themselves (finite differences check those): an = instead of += passes finite differences on zeroed buffers and is caught only here",
		},
	}, Check[I]{
		Name: "float32", Kind: Precision, Run: s.float32,
		Claim: fmt.Sprintf("the float32 path's output and every input gradient equal the float64 reference's within %.1e of each tensor's largest value", float32Tol),
		Limit: "agreement within float32 rounding: the float64 path is judged by the other checks",
		Long: Long{
			Tests: fmt.Sprintf("the same inputs, rounded to float32, through the implementation's float32 path (the one training and inference run, "+
				"with its SIMD kernels: vectorised exp and sigmoid, GEMM, fused attention tiles) and through the float64 reference: "+
				"for the output and every input gradient, max|float32 − float64| / max|float64| ≤ %.1e (2⁻¹⁶, 256 float32 ulps)", float32Tol),
			Shapes: float32Shapes(small, big),
			Proves: "the float32 path computes what the proven float64 path computes, up to float32 rounding: a wrong constant, a dropped term or a wrong index in a float32-only kernel shows",
			Cannot: "errors below float32 rounding, and inputs unlike these (a kernel's special case for huge arguments, say)",
		},
	})
	return cs
}

func (s gradSpec[I]) fdElements(impl I) Result {
	var worst, worstAbs float64
	n := 0
	for x, c := range s.cases(impl, false) {
		g := weights(c.Out, uint64(x))
		grads, err := gradsOf(c, g, nil)
		if err != nil {
			return errored(err, c.Name+": %v")
		}
		var r gradcheck.Report
		if err := protect(func() error {
			r = gradcheck.Check(lossOf(c, g), paramsOf(c, grads), gradcheck.Options{Precise: true, Eps: s.eps, Abs: fdAbs, Rel: fdRel, Fixed: true})
			return nil
		}); err != nil {
			return errored(err, c.Name+": %v")
		}
		n += r.Checked
		if err := r.Err(); err != nil {
			return measured(fail("%s: %v", c.Name, err), r.MaxRel)
		}
		worst, worstAbs = max(worst, r.MaxRel), max(worstAbs, r.MaxAbs)
	}
	return measured(pass("%d elements, max rel %.1e, max abs %.1e, ε = %g (4-point)", n, worst, worstAbs, s.step()), worst)
}

// fdDirections compares random directional derivatives. A directional
// derivative uᵀ∇L sums thousands of terms that partly cancel, so its error
// is measured against ‖∇L‖ (|uᵀ∇L| <= ‖∇L‖ for a unit u), not against its
// own, possibly tiny, value.
func (s gradSpec[I]) fdDirections(impl I) Result {
	var worst float64
	n, size := 0, 0
	for x, c := range s.cases(impl, true) {
		g := weights(c.Out, uint64(x))
		grads, err := gradsOf(c, g, nil)
		if err != nil {
			return errored(err, c.Name+": %v")
		}
		ps := paramsOf(c, grads)
		norm := GradNorm(ps)
		var r gradcheck.Report
		if err := protect(func() error {
			r = gradcheck.Directional(lossOf(c, g), ps, s.dirs, gradcheck.Options{Precise: true, Eps: s.eps, Abs: fdRel * norm, Rel: fdRel, Seed: 7, Fixed: true})
			return nil
		}); err != nil {
			return errored(err, c.Name+": %v")
		}
		rel := r.MaxAbs / norm
		if err := r.Err(); err != nil {
			return measured(fail("%s: %v", c.Name, err), rel)
		}
		worst = max(worst, rel)
		n += r.Checked
		for _, in := range c.Inputs {
			size += len(in.X)
		}
	}
	return measured(pass("%d directions over %d inputs, max |error| / ‖∇L‖ = %.1e, ε = %g (4-point)", n, size, worst, s.step()), worst)
}

// accumulates runs every backward on gradient buffers pre-filled with random
// sentinels: after − before must equal a fresh backward.
func (s gradSpec[I]) accumulates(impl I) Result {
	var worst float64
	for x, c := range s.cases(impl, false) {
		g := weights(c.Out, uint64(x))
		fresh, err := gradsOf(c, g, nil)
		if err != nil {
			return errored(err, c.Name+": %v")
		}
		r := rand.New(rand.NewPCG(uint64(x), 0xacc))
		pre := make([][]float64, len(fresh))
		for i := range pre {
			pre[i] = make([]float64, len(fresh[i]))
			for j := range pre[i] {
				pre[i][j] = r.NormFloat64()
			}
		}
		got, err := gradsOf(c, g, pre)
		if err != nil {
			return errored(err, c.Name+": %v")
		}
		var ps []pair
		for i, in := range c.Inputs {
			delta := clone(got[i])
			for j := range delta {
				delta[j] -= pre[i][j]
			}
			ps = append(ps, pair{"d" + in.Name, delta, fresh[i]})
		}
		e, msg := compare(identical, ps...)
		worst = max(worst, e)
		if msg != "" {
			return measured(fail("%s: %s (pre-filled buffer overwritten?)", c.Name, msg), e)
		}
	}
	return measured(pass("after − before equals a fresh backward for every gradient, max error %.1e", worst), worst)
}

// float32Shapes renders the cases of the float32 check: the large ones, of
// realistic sizes, where the SIMD kernels run their vector loops; the small
// ones when there are no large ones. (Tiny cases such as a row of width 1
// compute gradients by cancellation, where float32 keeps no digits: that
// is the input's condition, not the kernel's error.)
func float32Shapes(small, big []Case[float64]) string {
	if len(big) > 0 {
		return "the cases of fd-directions: " + shapes(big)
	}
	return "the cases of fd-elements: " + shapes(small)
}

// float32 runs every case through impl's float32 path and the reference's
// float64 path on the same inputs and compares output and gradients, each
// tensor by its largest float64 value.
func (s gradSpec[I]) float32(impl I) Result {
	var worst float64
	worstAt := ""
	big := len(s.cases(s.ref, true)) > 0
	{
		want, got := s.cases(s.ref, big), s.cases32(impl, big)
		for x := range want {
			c64, c32 := want[x], got[x]
			g := weights(c64.Out, uint64(x))
			out64, out32 := make([]float64, c64.Out), make([]float32, c32.Out)
			if err := protect(func() error { return c64.Forward(out64) }); err != nil {
				return errored(err, c64.Name+": float64 reference: %v")
			}
			if err := protect(func() error { return c32.Forward(out32) }); err != nil {
				return errored(err, c32.Name+": float32: %v")
			}
			tensors := []struct {
				name      string
				got, want []float64
			}{{"out", vec.Convert[float64](out32), out64}}
			// an implementation without gradients: the forward alone
			if fo, ok := any(impl).(interface{ ForwardOnly() bool }); !ok || !fo.ForwardOnly() {
				g64, err := gradsOf(c64, g, nil)
				if err != nil {
					return errored(err, c64.Name+": float64 reference: %v")
				}
				g32, err := gradsOf(c32, vec.Convert[float32](g), nil)
				if err != nil {
					return errored(err, c32.Name+": float32: %v")
				}
				for i, in := range c64.Inputs {
					tensors = append(tensors, struct {
						name      string
						got, want []float64
					}{"d" + in.Name, vec.Convert[float64](g32[i]), g64[i]})
				}
			}
			for _, t := range tensors {
				e, at := normwise(t.got, t.want)
				if e > worst {
					worst, worstAt = e, t.name
				}
				if !(e <= float32Tol) {
					return measured(fail("%s: %s[%d] = %.7g in float32, %.7g in float64: error %.2g of the largest |%s| > %.1e",
						c64.Name, t.name, at, val(t.got, at), val(t.want, at), e, t.name, float32Tol), e)
				}
			}
		}
	}
	return measured(pass("output and gradients within %.1e of float64 (worst %s), tolerance %.1e", worst, worstAt, float32Tol), worst)
}

// normwise returns max|got − want| / max|want| (the absolute error when want
// is all zero) and the index of the worst element; NaN counts as infinite.
func normwise(got, want []float64) (float64, int) {
	var scale, worst float64
	at := 0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	if scale == 0 {
		scale = 1
	}
	for i := range want {
		d := math.Abs(got[i]-want[i]) / scale
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst, at
}

// randn returns n seeded standard normal values times scale, in float64: a
// case builder draws its inputs here and casts them, so that the float32
// and float64 cases of one seed hold the same values.
func randn(seed uint64, n int, scale float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x7a11))
	x := make([]float64, n)
	for i := range x {
		x[i] = scale * r.NormFloat64()
	}
	return x
}

// randT is randn cast to T.
func randT[T nn.Float](seed uint64, n int, scale float64) []T {
	return vec.Convert[T](randn(seed, n, scale))
}

// shape names a case by its dimensions: shape("n", 3, "D", 5) = "n=3, D=5".
func shape(kv ...any) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, fmt.Sprintf("%v=%v", kv[i], kv[i+1]))
	}
	return strings.Join(parts, ", ")
}
