package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/nn"
)

var gradcheckCmd = register(&command{
	name:  "gradcheck",
	usage: "[-op OP] [shape flags] [-dtype float64|float32] [-precise] [-eps E] [-directions K] [-sweep [-plot FILE]]",
	short: "check one op's gradients against finite differences at chosen shapes",
	long: `Gradcheck draws random inputs and a random G, and compares the analytic
gradients of L = Σ out ⊙ G with finite differences of the float64 forward,
element by element (or, with -directions K, along K random directions, for
shapes too large for that).

Ops: attention (shapes -b -hq -hkv -m -n -d -dv, masks -causal -window; with
-dtype float32 the analytic gradients come from the float32 instantiation,
so the report shows float32's error), and rope, rmsnorm, swiglu, layer and
block (shapes -b -t -dim -hq -hkv -d -f, -pairing).

An element passes when

  |a − n| ≤ abs + rel·max(|a|, |n|) + 2·(T + R)

with a the analytic and n the numeric value, abs = 1e-10, rel = -rel, and
T, R the estimated truncation and rounding error of n at the step ε:
T = |D(ε) − D'(ε)|, D' the next wider stencil on the same points (4-point
for central differences, 6-point for -precise), and R = g·η/ε, g = 1
(central) or 3/2 (4-point), η = max(3σ, u·|L|) the rounding noise of one
evaluation of L, σ measured from high-order differences of L at points
10⁻³ε apart, u = 2⁻⁵³. So the defaults pass a correct gradient at any ε
and still fail one whose error is above what the differences can resolve.
The report of a failure gives T and R of the worst element.

-sweep prints the error against the step ε from 1e-1 to 1e-12 instead, and
-plot writes it as a PNG.

Example: attnlab gradcheck -op block -dim 16 -hq 4 -hkv 2 -d 4 -f 24 -precise`,
})

var (
	gcOp      = gradcheckCmd.flags.String("op", "attention", "op: attention, "+strings.Join(checks.OpNames(), ", "))
	gcB       = gradcheckCmd.flags.Int("b", 1, "batch items")
	gcHq      = gradcheckCmd.flags.Int("hq", 4, "query heads")
	gcHkv     = gradcheckCmd.flags.Int("hkv", 2, "key/value heads (divides -hq)")
	gcM       = gradcheckCmd.flags.Int("m", 3, "attention: queries (the new chunk)")
	gcN       = gradcheckCmd.flags.Int("n", 7, "attention: keys (cache included)")
	gcD       = gradcheckCmd.flags.Int("d", 8, "head dimension (of q and k for attention)")
	gcDv      = gradcheckCmd.flags.Int("dv", 8, "attention: head dimension of v")
	gcT       = gradcheckCmd.flags.Int("t", 4, "tokens per sequence (ops other than attention)")
	gcDim     = gradcheckCmd.flags.Int("dim", 16, "model width (rmsnorm, swiglu, layer, block)")
	gcF       = gradcheckCmd.flags.Int("f", 24, "SwiGLU hidden width (swiglu, block)")
	gcPairing = gradcheckCmd.flags.String("pairing", "half", "RoPE pairing: half or interleaved")
	gcCausal  = gradcheckCmd.flags.Bool("causal", true, "attention: causal mask (positions: a cache of n−m tokens, then the chunk)")
	gcWindow  = gradcheckCmd.flags.Int("window", 0, "attention: sliding window (0 = none)")
	gcDtype   = gradcheckCmd.flags.String("dtype", "float64", "attention: dtype of the analytic gradients, float64 or float32")
	gcPrecise = gradcheckCmd.flags.Bool("precise", false, "4-point stencil instead of central differences")
	gcEps     = gradcheckCmd.flags.Float64("eps", 0, "finite-difference step (0: 1e-6, or 1e-3 with -precise)")
	gcRel     = gradcheckCmd.flags.Float64("rel", 0, "relative tolerance rel, added to the estimated error (0: 1e-7 for float64, 1e-3 for float32)")
	gcDirs    = gradcheckCmd.flags.Int("directions", 0, "check K random directions instead of every element")
	gcSweep   = gradcheckCmd.flags.Bool("sweep", false, "print the error against ε from 1e-1 to 1e-12")
	gcPlot    = gradcheckCmd.flags.String("plot", "", "with -sweep: write the plot to this PNG file")
	gcSeed    = gradcheckCmd.flags.Uint64("seed", 1, "random seed for the inputs")
)

func init() { gradcheckCmd.run = runGradcheck }

func runGradcheck(ctx context.Context, args []string, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if *gcDtype != "float64" && *gcDtype != "float32" {
		return usageError{fmt.Sprintf("-dtype %q: want float64 or float32", *gcDtype)}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"-eps", *gcEps}, {"-rel", *gcRel}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return usageError{fmt.Sprintf("%s %g: want a finite number >= 0 (0: the default)", f.name, f.v)}
		}
	}
	if *gcDirs < 0 {
		return usageError{fmt.Sprintf("-directions %d: want >= 0", *gcDirs)}
	}
	var (
		loss   func() float64
		params []gradcheck.Param
		err    error
	)
	if *gcOp == "attention" {
		loss, params, err = attentionCase(stdout)
	} else {
		loss, params, err = opCase(stdout)
	}
	if err != nil {
		return err
	}
	opt := gradcheck.Options{Precise: *gcPrecise, Eps: *gcEps, Rel: *gcRel, Seed: *gcSeed}
	if opt.Rel == 0 && *gcDtype == "float32" {
		opt.Rel, opt.Abs = 1e-3, 1e-5
	}
	if *gcSweep {
		return sweep(stdout, loss, params, opt)
	}
	var rep gradcheck.Report
	if *gcDirs > 0 {
		if opt.Abs == 0 { // a directional derivative is measured against ‖∇L‖
			opt.Abs = max(opt.Rel, gradcheck.DefaultRel) * checks.GradNorm(params)
		}
		rep = gradcheck.Directional(loss, params, *gcDirs, opt)
	} else {
		rep = gradcheck.Check(loss, params, opt)
	}
	if _, err := io.WriteString(stdout, rep.String()+"\n"); err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		fmt.Fprintln(stdout, err)
		return errFailed
	}
	fmt.Fprintln(stdout, "OK")
	return nil
}

// opCase builds one of the ops of checks.OpDiff from the flags.
func opCase(stdout io.Writer) (func() float64, []gradcheck.Param, error) {
	if *gcDtype != "float64" {
		return nil, nil, usageError{"-dtype float32 is offered for -op attention only"}
	}
	var pairing nn.Pairing
	switch *gcPairing {
	case "half":
		pairing = nn.Half
	case "interleaved":
		pairing = nn.Interleaved
	default:
		return nil, nil, usageError{fmt.Sprintf("-pairing %q: want half or interleaved", *gcPairing)}
	}
	s := checks.Sizes{B: *gcB, T: *gcT, Dim: *gcDim, Hq: *gcHq, Hkv: *gcHkv, HeadDim: *gcD, F: *gcF, Pairing: pairing}
	for _, v := range []struct {
		name string
		v    int
	}{{"-b", s.B}, {"-t", s.T}, {"-dim", s.Dim}, {"-hq", s.Hq}, {"-hkv", s.Hkv}, {"-d", s.HeadDim}, {"-f", s.F}} {
		if v.v < 1 {
			return nil, nil, usageError{fmt.Sprintf("%s %d: want >= 1", v.name, v.v)}
		}
	}
	if s.Hq%s.Hkv != 0 {
		return nil, nil, usageError{fmt.Sprintf("-hq %d is not a multiple of -hkv %d", s.Hq, s.Hkv)}
	}
	if s.HeadDim%2 != 0 && (*gcOp == "rope" || *gcOp == "layer" || *gcOp == "block") {
		return nil, nil, usageError{fmt.Sprintf("-d %d: RoPE needs an even head dimension", s.HeadDim)}
	}
	d, err := checks.OpDiff(*gcOp, s, *gcSeed)
	if err != nil {
		return nil, nil, usageError{err.Error()}
	}
	fmt.Fprintf(stdout, "%s %s, analytic vs numeric float64\n", *gcOp, d.Name)
	return d.Prepare()
}

// attentionCase builds reference attention from the flags.
func attentionCase(stdout io.Writer) (func() float64, []gradcheck.Param, error) {
	c := &attention.Config{B: *gcB, Hq: *gcHq, Hkv: *gcHkv, M: *gcM, N: *gcN, D: *gcD, Dv: *gcDv, Causal: *gcCausal, Window: *gcWindow}
	if err := c.Validate(); err != nil {
		return nil, nil, usageError{err.Error()}
	}
	if err := everyRowSeesAKey(c); err != nil {
		return nil, nil, err
	}
	r := rand.New(rand.NewPCG(*gcSeed, 0))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	q, k, v := fill(c.B*c.Hq*c.M*c.D), fill(c.B*c.Hkv*c.N*c.D), fill(c.B*c.Hkv*c.N*c.Dv)
	g := fill(c.B * c.Hq * c.M * c.Dv)

	ref := attention.Reference[float64]()
	o := make([]float64, len(g))
	lse := make([]float64, c.B*c.Hq*c.M)
	if err := ref.Run(o, lse, nil, nil, nil, q, k, v, nil, c); err != nil {
		return nil, nil, err // a row with nothing visible, say
	}
	loss := func() float64 {
		if err := ref.Run(o, lse, nil, nil, nil, q, k, v, nil, c); err != nil {
			panic(err) // the mask does not depend on q, k, v: checked above
		}
		var l float64
		for i := range o {
			l += o[i] * g[i]
		}
		return l
	}
	dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
	if *gcDtype == "float32" {
		dq32, dk32, dv32 := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
		if err := attention.Reference[float32]().Run(make([]float32, len(g)), make([]float32, len(lse)), dq32, dk32, dv32, to32(q), to32(k), to32(v), to32(g), c); err != nil {
			return nil, nil, err
		}
		dq, dk, dv = to64(dq32), to64(dk32), to64(dv32)
	} else if err := ref.Run(o, lse, dq, dk, dv, q, k, v, g, c); err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stdout, "attention B=%d Hq=%d Hkv=%d M=%d N=%d D=%d Dv=%d causal=%v window=%d, analytic %s vs numeric float64\n",
		c.B, c.Hq, c.Hkv, c.M, c.N, c.D, c.Dv, c.Causal, c.Window, *gcDtype)
	return loss, []gradcheck.Param{{Name: "q", X: q, Grad: dq}, {Name: "k", X: k, Grad: dk}, {Name: "v", X: v, Grad: dv}}, nil
}

// everyRowSeesAKey returns a usage error naming the shape when a query row
// of c sees no key: with -causal and the default positions the M queries
// follow a cache of N − M keys, so M > N leaves the first rows before every
// key.
func everyRowSeesAKey(c *attention.Config) error {
	for b := range c.B {
		for i := range c.M {
			seen := false
			for j := range c.N {
				seen = seen || c.Visible(b, i, j)
			}
			if !seen {
				return usageError{fmt.Sprintf("-m %d -n %d -causal=%v -window %d: query row %d (position %d) sees no key; "+
					"the %d queries follow a cache of n − m keys, so want -m <= -n, or -causal=false", c.M, c.N, c.Causal, c.Window, i, c.QueryPos(b, i), c.M)}
			}
		}
	}
	return nil
}

func sweep(stdout io.Writer, loss func() float64, params []gradcheck.Param, opt gradcheck.Options) error {
	rows := gradcheck.Sweep(loss, params, gradcheck.Decades(1e-1, 1e-12, 2), opt)
	var b strings.Builder
	fmt.Fprintf(&b, "%10s %12s %12s %8s\n", "ε", "max abs", "max rel", "slope")
	slopes := rows.Slopes()
	for i, row := range rows {
		s := ""
		if i > 0 {
			s = fmt.Sprintf("%+.2f", slopes[i-1])
		}
		fmt.Fprintf(&b, "%10.1e %12.2e %12.2e %8s\n", row.Eps, row.MaxAbs, row.MaxRel, s)
	}
	best := rows.Best()
	fmt.Fprintf(&b, "best ε = %.1e (max abs %.2e)\n", best.Eps, best.MaxAbs)
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return err
	}
	if *gcPlot != "" {
		sr := plots.Series{Name: map[bool]string{false: "central", true: "4-point"}[*gcPrecise]}
		for _, row := range rows {
			sr.X, sr.Y = append(sr.X, row.Eps), append(sr.Y, row.MaxAbs)
		}
		if err := plots.EpsSweepPNG(*gcPlot, "Finite-difference error against the step", []plots.Series{sr}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "plot: %s\n", *gcPlot)
	}
	return nil
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, e := range x {
		y[i] = float32(e)
	}
	return y
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, e := range x {
		y[i] = float64(e)
	}
	return y
}
