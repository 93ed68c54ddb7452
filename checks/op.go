package checks

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/attnlab/attnlab/gradcheck"
)

// Diff is one differentiable function at a fixed point, the form in which
// the generic checks (finite differences, accumulation) see any operation.
// Forward reads the inputs' current X, so a checker can perturb them in
// place; Backward adds ∂L/∂input into grads (aligned with Inputs) given
// dout = ∂L/∂out.
type Diff struct {
	Name     string            // the case, for messages: "n=3, D=5"
	Inputs   []gradcheck.Param // the point: Name and X (Grad is ignored)
	Out      int               // length of the output
	Forward  func(out []float64)
	Backward func(grads [][]float64, dout []float64)
}

// loss returns L = Σ out ⊙ g, with g a fixed random vector so that every
// output element matters, and g itself (the dout of the backward).
func (d Diff) loss(seed uint64) (func() float64, []float64) {
	r := rand.New(rand.NewPCG(seed, 0x1055))
	g := make([]float64, d.Out)
	for i := range g {
		g[i] = r.NormFloat64()
	}
	out := make([]float64, d.Out)
	return func() float64 {
		d.Forward(out)
		var l float64
		for i := range out {
			l += out[i] * g[i]
		}
		return l
	}, g
}

// grads runs the backward on buffers pre-filled with pre (nil: zeros).
func (d Diff) grads(dout []float64, pre [][]float64) (grads [][]float64, err error) {
	grads = make([][]float64, len(d.Inputs))
	for i, in := range d.Inputs {
		grads[i] = make([]float64, len(in.X))
		if pre != nil {
			copy(grads[i], pre[i])
		}
	}
	err = protect(func() error { d.Backward(grads, dout); return nil })
	return grads, err
}

// params pairs the inputs with analytic gradients.
func (d Diff) params(grads [][]float64) []gradcheck.Param {
	ps := make([]gradcheck.Param, len(d.Inputs))
	for i, in := range d.Inputs {
		ps[i] = gradcheck.Param{Name: in.Name, X: in.X, Grad: grads[i]}
	}
	return ps
}

// opCases builds the cases of an implementation; each call builds them anew,
// so that checks never share state.
type opCases[I any] func(I) []Diff

// fdCheck compares every element of every input of every case with the
// 4-point finite difference, relative tolerance 1e-8.
func fdCheck[I any](cases opCases[I]) func(I) Result {
	return func(impl I) Result {
		var worst, worstAbs float64
		n := 0
		for x, d := range cases(impl) {
			loss, g := d.loss(uint64(x))
			grads, err := d.grads(g, nil)
			if err != nil {
				return errored(err, d.Name+": %v")
			}
			var r gradcheck.Report
			if err := protect(func() error {
				r = gradcheck.Check(loss, d.params(grads), gradcheck.Options{Precise: true, Abs: fdAbs, Rel: fdRel, Fixed: true})
				return nil
			}); err != nil {
				return errored(err, d.Name+": %v")
			}
			n += r.Checked
			if err := r.Err(); err != nil {
				res := fail("%s: %v", d.Name, err)
				res.Error = r.MaxRel
				return res
			}
			worst, worstAbs = max(worst, r.MaxRel), max(worstAbs, r.MaxAbs)
		}
		res := pass("%d elements, max rel %.1e, max abs %.1e, ε = %g (4-point)", n, worst, worstAbs, gradcheck.DefaultPreciseEps)
		res.Error = worst
		return res
	}
}

// dirCheck compares count random directional derivatives per case, with the
// error measured against ‖∇L‖ (see fdDirections).
func dirCheck[I any](cases opCases[I], count int) func(I) Result {
	return func(impl I) Result {
		var worst float64
		n, size := 0, 0
		for x, d := range cases(impl) {
			loss, g := d.loss(uint64(x))
			grads, err := d.grads(g, nil)
			if err != nil {
				return errored(err, d.Name+": %v")
			}
			var norm float64
			for _, gr := range grads {
				for _, v := range gr {
					norm += v * v
				}
			}
			norm = math.Sqrt(norm)
			var r gradcheck.Report
			if err := protect(func() error {
				r = gradcheck.Directional(loss, d.params(grads), count, gradcheck.Options{Precise: true, Abs: fdRel * norm, Rel: fdRel, Seed: 7, Fixed: true})
				return nil
			}); err != nil {
				return errored(err, d.Name+": %v")
			}
			rel := r.MaxAbs / norm
			if err := r.Err(); err != nil {
				res := fail("%s: %v", d.Name, err)
				res.Error = rel
				return res
			}
			worst = max(worst, rel)
			n += r.Checked
			for _, in := range d.Inputs {
				size += len(in.X)
			}
		}
		res := pass("%d directions over %d inputs, max |error| / ‖∇L‖ = %.1e", n, size, worst)
		res.Error = worst
		return res
	}
}

// accumulateCheck runs every backward on gradient buffers pre-filled with
// random sentinels: after − before must equal a fresh backward.
func accumulateCheck[I any](cases opCases[I]) func(I) Result {
	return func(impl I) Result {
		var worst float64
		for x, d := range cases(impl) {
			_, g := d.loss(uint64(x))
			fresh, err := d.grads(g, nil)
			if err != nil {
				return errored(err, d.Name+": %v")
			}
			r := rand.New(rand.NewPCG(uint64(x), 0xacc))
			pre := make([][]float64, len(fresh))
			for i := range pre {
				pre[i] = make([]float64, len(fresh[i]))
				for j := range pre[i] {
					pre[i][j] = r.NormFloat64()
				}
			}
			got, err := d.grads(g, pre)
			if err != nil {
				return errored(err, d.Name+": %v")
			}
			var ps []pair
			for i, in := range d.Inputs {
				delta := clone(got[i])
				for j := range delta {
					delta[j] -= pre[i][j]
				}
				ps = append(ps, pair{"d" + in.Name, delta, fresh[i]})
			}
			e, msg := compare(identical, ps...)
			worst = max(worst, e)
			if msg != "" {
				res := fail("%s: %s (pre-filled buffer overwritten?)", d.Name, msg)
				res.Error = e
				return res
			}
		}
		res := pass("after − before equals a fresh backward for every gradient, max error %.1e", worst)
		res.Error = worst
		return res
	}
}

// gradientChecks returns the three generic checks of an operation.
func gradientChecks[I any](op string, cases opCases[I], bigCases opCases[I]) []Check[I] {
	return []Check[I]{
		{Name: "fd-elements", Kind: Gradient, Run: fdCheck(cases),
			Claim: "every element of every input gradient of " + op + " equals the 4-point difference of L = Σ out ⊙ G",
			Limit: "agreement with the forward as written, not that the forward is right"},
		{Name: "fd-directions", Kind: Gradient, Run: dirCheck(bigCases, 4),
			Claim: "uᵀ∇L equals the directional difference for random directions on a larger " + op,
			Limit: "a few directions: an error confined to a few elements may hide"},
		{Name: "accumulates", Kind: Contract, Run: accumulateCheck(cases),
			Claim: "backward adds into its gradient buffers: pre-filled, after − before equals a fresh run",
			Limit: "the contract of the buffers, not the values"},
	}
}

// randn returns n seeded standard normal values times scale.
func randn(seed uint64, n int, scale float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x7a11))
	x := make([]float64, n)
	for i := range x {
		x[i] = scale * r.NormFloat64()
	}
	return x
}

// shape names a case by its dimensions: shape("n", 3, "D", 5) = "n=3, D=5".
func shape(kv ...any) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, fmt.Sprintf("%v=%v", kv[i], kv[i+1]))
	}
	return strings.Join(parts, ", ")
}
