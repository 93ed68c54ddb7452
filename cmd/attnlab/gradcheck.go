package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/lab"
	"github.com/attnlab/attnlab/lab/report"
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
	define: gradcheckFlags,
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

func gradcheckFlags(fs *flag.FlagSet) runFunc {
	o := &lab.GradOptions{}
	fs.StringVar(&o.Op, "op", "attention", "operation: "+strings.Join(lab.Names(), ", "))
	fs.StringVar(&o.Fault, "fault", "", "check this registered fault of the operation instead of the correct implementation")
	fs.IntVar(&o.Sizes.B, "b", 2, "batch items (groups of the reranker, queries of the dual encoder)")
	fs.IntVar(&o.Sizes.Hq, "hq", 4, "query heads")
	fs.IntVar(&o.Sizes.Hkv, "hkv", 2, "key/value heads (divides -hq)")
	fs.IntVar(&o.Sizes.M, "m", 3, "attention: queries (the new chunk)")
	fs.IntVar(&o.Sizes.N, "n", 7, "attention: keys (cache included); documents or candidates of the retrieval heads")
	fs.IntVar(&o.Sizes.D, "d", 8, "head dimension (of q and k for attention); embedding width")
	fs.IntVar(&o.Sizes.Dv, "dv", 8, "attention: head dimension of v")
	fs.IntVar(&o.Sizes.T, "t", 4, "tokens per sequence (ops other than attention)")
	fs.IntVar(&o.Sizes.Dim, "dim", 16, "model width (vocabulary of crossentropy and embedding)")
	fs.IntVar(&o.Sizes.F, "f", 24, "SwiGLU hidden width (swiglu, block, decoder)")
	pairing := fs.String("pairing", "half", "RoPE pairing: half or interleaved")
	fs.BoolVar(&o.Sizes.Causal, "causal", true, "attention: causal mask (positions: a cache of n−m tokens, then the chunk)")
	fs.IntVar(&o.Sizes.Window, "window", 0, "attention: sliding window (0 = none)")
	dtype := fs.String("dtype", "float64", "dtype of the analytic gradients, float64 or float32")
	fs.BoolVar(&o.Precise, "precise", false, "4-point stencil instead of central differences")
	fs.Float64Var(&o.Eps, "eps", 0, "finite-difference step (0: 1e-6, or 1e-3 with -precise)")
	fs.Float64Var(&o.Rel, "rel", 0, "relative tolerance rel, added to the estimated error (0: 1e-7 for float64, 1e-3 for float32)")
	fs.IntVar(&o.Directions, "directions", 0, "check K random directions instead of every element")
	fs.BoolVar(&o.Sweep, "sweep", false, "print the error against ε from 1e-1 to 1e-12")
	plot := fs.String("plot", "", "with -sweep: write the plot to this PNG file")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed for the inputs")
	return func(ctx context.Context, args []string, stdout io.Writer) error {
		if err := noArgs(args); err != nil {
			return err
		}
		return runGradcheck(ctx, o, *dtype, *pairing, *plot, stdout)
	}
}

func runGradcheck(ctx context.Context, o *lab.GradOptions, dtype, pairing, plot string, stdout io.Writer) error {
	dtype, err := dtypeName(dtype, "float64", "float32")
	if err != nil {
		return err
	}
	if o.Sizes.Pairing, err = nn.ParsePairing(pairing); err != nil {
		return usagef("-pairing %q: want half or interleaved", pairing)
	}
	o.Float32 = dtype == "float32"
	if alias, ok := opAliases[o.Op]; ok {
		o.Op = alias
	}
	if err := o.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if plot != "" {
		if !o.Sweep {
			return usagef("-plot %s without -sweep: the plot is of the sweep", plot)
		}
		claim, err := output.Target{Path: plot, Flag: "-plot"}.ClaimFile()
		if err != nil {
			return err
		}
		defer claim.Release()
		if err := writable("-plot", plot, false); err != nil {
			return err
		}
	}
	// building a large instance cannot be interrupted; nothing is written
	// before the check ends
	res, err := await(ctx, func() (*lab.GradResult, error) { return lab.GradCheck(ctx, *o) })
	if se := (*lab.SizeError)(nil); errors.As(err, &se) {
		return usageError{se.Error()}
	}
	if err != nil {
		return err
	}
	if res.FaultErr != nil {
		fmt.Fprintf(stdout, "%s, %s: %v\n", o.Op, res.What, res.FaultErr)
		return errFailed
	}
	fmt.Fprintf(stdout, "%s %s, %s: analytic %s vs numeric float64\n", o.Op, res.Case, res.What, dtype)
	if o.Sweep {
		if err := report.GradSweep(stdout, res.Sweep); err != nil || plot == "" {
			return err
		}
		if err := report.GradSweepPlot(plot, res.Sweep, o.Precise); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "plot: %s\n", plot)
		return err
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
