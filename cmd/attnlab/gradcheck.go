package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/lab"
	"github.com/attnlab/attnlab/nn"
)

// opAliases are earlier names of operations, still accepted by -op.
var opAliases = map[string]string{"layer": "attention-layer"}

var gradcheckCmd = register(&command{
	name:  "gradcheck",
	usage: "[-op OP] [-fault NAME] [shape flags] [-dtype float64|float32] [-precise] [-eps E] [-rel R] [-directions K] [-sweep [-plot FILE]]",
	short: "check one op's gradients against finite differences at chosen shapes",
	long: `Gradcheck draws random inputs and a random G, and compares the analytic
gradients of L = Σ out ⊙ G with finite differences of the float64 forward,
element by element (or, with -directions K, along K random directions, for
shapes too large for that). With -dtype float32 the analytic gradients come
from the op's float32 path, so the report shows float32's error. With
-fault NAME it checks a registered fault ("attnlab faults" lists them)
instead of the correct implementation: a fault that breaks the backward
fails, one that keeps forward and backward consistent passes.

Ops, and the shape flags each reads:
` + opsHelp() + `
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

// opsHelp lists the operations of the registry with what each reads.
func opsHelp() string {
	var b strings.Builder
	for _, info := range lab.Catalog() {
		fmt.Fprintf(&b, "  %s: %s\n", info.Op, info.Reads)
	}
	for alias, op := range opAliases {
		fmt.Fprintf(&b, "  (%s is accepted for %s)\n", alias, op)
	}
	return b.String()
}

// The flags of gradcheck, defined afresh on each call's flag set (see init).
var (
	gcOp      *string
	gcFault   *string
	gcB       *int
	gcHq      *int
	gcHkv     *int
	gcM       *int
	gcN       *int
	gcD       *int
	gcDv      *int
	gcT       *int
	gcDim     *int
	gcF       *int
	gcPairing *string
	gcCausal  *bool
	gcWindow  *int
	gcDtype   *string
	gcPrecise *bool
	gcEps     *float64
	gcRel     *float64
	gcDirs    *int
	gcSweep   *bool
	gcPlot    *string
	gcSeed    *uint64
)

func init() {
	gradcheckCmd.define = func(fs *flag.FlagSet) runFunc {
		gcOp = fs.String("op", "attention", "operation: "+strings.Join(lab.Names(), ", "))
		gcFault = fs.String("fault", "", "check this registered fault of the operation instead of the correct implementation")
		gcB = fs.Int("b", 2, "batch items (groups of the reranker, queries of the dual encoder)")
		gcHq = fs.Int("hq", 4, "query heads")
		gcHkv = fs.Int("hkv", 2, "key/value heads (divides -hq)")
		gcM = fs.Int("m", 3, "attention: queries (the new chunk)")
		gcN = fs.Int("n", 7, "attention: keys (cache included); documents or candidates of the retrieval heads")
		gcD = fs.Int("d", 8, "head dimension (of q and k for attention); embedding width")
		gcDv = fs.Int("dv", 8, "attention: head dimension of v")
		gcT = fs.Int("t", 4, "tokens per sequence (ops other than attention)")
		gcDim = fs.Int("dim", 16, "model width (vocabulary of crossentropy and embedding)")
		gcF = fs.Int("f", 24, "SwiGLU hidden width (swiglu, block, decoder)")
		gcPairing = fs.String("pairing", "half", "RoPE pairing: half or interleaved")
		gcCausal = fs.Bool("causal", true, "attention: causal mask (positions: a cache of n−m tokens, then the chunk)")
		gcWindow = fs.Int("window", 0, "attention: sliding window (0 = none)")
		gcDtype = fs.String("dtype", "float64", "dtype of the analytic gradients, float64 or float32")
		gcPrecise = fs.Bool("precise", false, "4-point stencil instead of central differences")
		gcEps = fs.Float64("eps", 0, "finite-difference step (0: 1e-6, or 1e-3 with -precise)")
		gcRel = fs.Float64("rel", 0, "relative tolerance rel, added to the estimated error (0: 1e-7 for float64, 1e-3 for float32)")
		gcDirs = fs.Int("directions", 0, "check K random directions instead of every element")
		gcSweep = fs.Bool("sweep", false, "print the error against ε from 1e-1 to 1e-12")
		gcPlot = fs.String("plot", "", "with -sweep: write the plot to this PNG file")
		gcSeed = fs.Uint64("seed", 1, "random seed for the inputs")
		return runGradcheck
	}
}

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
	name := *gcOp
	if alias, ok := opAliases[name]; ok {
		name = alias
	}
	s, err := sizes()
	if err != nil {
		return err
	}
	if *gcPlot != "" {
		if err := output.File(*gcPlot, false); err != nil {
			return err
		}
	}
	res, err := lab.GradCheck(lab.GradOptions{Op: name, Fault: *gcFault, Sizes: s, Float32: *gcDtype == "float32",
		Directions: *gcDirs, Sweep: *gcSweep,
		Options: gradcheck.Options{Precise: *gcPrecise, Eps: *gcEps, Rel: *gcRel, Seed: *gcSeed}})
	if se := (*lab.SizeError)(nil); errors.As(err, &se) {
		return usageError{se.Error()}
	}
	if err != nil {
		return err
	}
	if res.FaultErr != nil {
		fmt.Fprintf(stdout, "%s, %s: %v\n", name, res.What, res.FaultErr)
		return errFailed
	}
	fmt.Fprintf(stdout, "%s %s, %s: analytic %s vs numeric float64\n", name, res.Case, res.What, *gcDtype)
	if *gcSweep {
		return sweep(stdout, res.Sweep)
	}
	if _, err := io.WriteString(stdout, res.Report.String()+"\n"); err != nil {
		return err
	}
	if err := res.Report.Err(); err != nil {
		fmt.Fprintln(stdout, err)
		return errFailed
	}
	fmt.Fprintln(stdout, "OK")
	return nil
}

// sizes reads the shape flags.
func sizes() (checks.Sizes, error) {
	s := checks.Sizes{B: *gcB, T: *gcT, M: *gcM, N: *gcN, Dim: *gcDim, Hq: *gcHq, Hkv: *gcHkv, D: *gcD, Dv: *gcDv, F: *gcF,
		Causal: *gcCausal, Window: *gcWindow}
	switch *gcPairing {
	case "half":
		s.Pairing = nn.Half
	case "interleaved":
		s.Pairing = nn.Interleaved
	default:
		return s, usageError{fmt.Sprintf("-pairing %q: want half or interleaved", *gcPairing)}
	}
	for _, v := range []struct {
		name string
		v    int
	}{{"-b", s.B}, {"-t", s.T}, {"-m", s.M}, {"-n", s.N}, {"-dim", s.Dim}, {"-hq", s.Hq}, {"-hkv", s.Hkv}, {"-d", s.D}, {"-dv", s.Dv}, {"-f", s.F}} {
		if v.v < 1 {
			return s, usageError{fmt.Sprintf("%s %d: want >= 1", v.name, v.v)}
		}
	}
	if s.Window < 0 {
		return s, usageError{fmt.Sprintf("-window %d: want >= 0", s.Window)}
	}
	if s.Hq%s.Hkv != 0 {
		return s, usageError{fmt.Sprintf("-hq %d is not a multiple of -hkv %d", s.Hq, s.Hkv)}
	}
	return s, nil
}

func sweep(stdout io.Writer, rows gradcheck.SweepRows) error {
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
