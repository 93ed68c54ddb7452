package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/conform"
)

var conformCmd = register(&command{
	name:  "conform",
	usage: `-exec "CMD ARGS" | -impl reference|fused  [-contract position|bottom-right|top-left] [-json] [-timeout D]`,
	short: "run the lab's attention checks on another implementation and print its semantics card",
	long: `Conform runs the lab's attention checks on an implementation that is not
attnlab's: -exec starts an adapter process that speaks the protocol of
docs/conform-protocol.md (adapters for PyTorch and ONNX Runtime are in
adapters/, a Go example in examples/conform-go/); -impl picks one of
attnlab's own kernels instead.

It first measures the semantics card: where the causal diagonal sits for
M < N (a chunk after a cache) and M > N (position, bottom-right, top-left,
other); what a valid query row that sees no key gets (error, zero, nan,
uniform, other) and whether the backward there is the derivative of that
forward; what padding rows get; the GQA head mapping (contiguous,
interleaved, unsupported); the default scale; and the float32 error against
attnlab's float64 reference over that of a plain float32 implementation.
Then it runs every check of the attention suite that the implementation's
declared capabilities allow, the others reported as skipped with the
capability they need. The implementation is conformant when both causal
alignments are the -contract's, a fully masked valid row is an error (as
DESIGN §2 has it: never NaN, never a silent zero row), and no check fails.

Exit status: 0 conformant, 1 not, 2 usage, 3 the adapter failed (crashed,
hung past -timeout, closed its output, or answered outside the protocol:
the error names the adapter and the request).

Example: attnlab conform -exec "/usr/bin/python3 adapters/python/torch_composite.py"`,
	define: func(fs *flag.FlagSet) runFunc {
		exe := fs.String("exec", "", "the adapter command, split into words like a shell does")
		impl := fs.String("impl", "", "one of attnlab's kernels instead of an adapter: reference or fused")
		contract := fs.String("contract", conform.AlignPosition, "the causal alignment to hold it to: "+strings.Join(conform.Contracts, ", "))
		asJSON := fs.Bool("json", false, "print the report as JSON")
		timeout := fs.Duration("timeout", 60*time.Second, "longest wait for one answer of the adapter")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			switch {
			case (*exe == "") == (*impl == ""):
				return usagef("give one of -exec and -impl")
			case *impl != "" && *impl != "reference" && *impl != "fused":
				return usagef("-impl %q: want reference or fused", *impl)
			case !(*timeout > 0):
				return usagef("-timeout %v: want > 0", *timeout)
			}
			known := false
			for _, c := range conform.Contracts {
				known = known || c == *contract
			}
			if !known {
				return usagef("-contract %q: want %s", *contract, strings.Join(conform.Contracts, ", "))
			}
			return runConform(ctx, *exe, *impl, *contract, *timeout, *asJSON, stdout)
		}
	},
})

func runConform(ctx context.Context, exe, impl, contract string, timeout time.Duration, asJSON bool, stdout io.Writer) error {
	var target conform.Implementation
	switch impl {
	case "reference":
		target = conform.Reference()
	case "fused":
		target = conform.Fused()
	default:
		a, err := conform.Start(ctx, exe, timeout)
		if err != nil {
			return adapterFailure(err)
		}
		defer a.Close()
		target = a
	}
	rep, err := conform.Run(ctx, target, contract)
	if err != nil {
		return adapterFailure(err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeCard(stdout, rep)
	}
	if !rep.Conformant {
		return errFailed
	}
	return nil
}

// adapterFailure marks the failure of an adapter process for exit status 3.
func adapterFailure(err error) error {
	var ae *conform.Error
	if errors.As(err, &ae) {
		return adapterError{err}
	}
	return err
}

func writeCard(w io.Writer, rep *conform.Report) {
	c := rep.Card
	fmt.Fprintf(w, "%s (%s): %d calls in %.1f s\n\n", rep.Implementation, rep.Version, rep.Calls, rep.Seconds)
	consistent := "n/a"
	if c.EmptyRowBackwardConsistent != nil {
		consistent = map[bool]string{true: "yes", false: "no"}[*c.EmptyRowBackwardConsistent]
	}
	ratio := "n/a (no float32)"
	if c.Float32ErrorRatio != nil {
		ratio = fmt.Sprintf("%.2f", *c.Float32ErrorRatio)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"causal, M < N", c.CausalMLtN}, {"causal, M > N", c.CausalMGtN},
		{"fully masked valid row", c.EmptyRow}, {"  backward consistent there", consistent},
		{"padding query rows", c.PaddingRows}, {"GQA head mapping", c.GQA}, {"default scale", c.Scale},
		{"float32 error / plain float32's", ratio},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	tw.Flush()
	for _, n := range c.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, ch := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Status, ch.Name, ch.Detail)
	}
	tw.Flush()
	if rep.Conformant {
		fmt.Fprintf(w, "\nCONFORMANT to the %s contract\n", rep.Contract)
	} else {
		fmt.Fprintf(w, "\nNOT CONFORMANT to the %s contract: %s\n", rep.Contract, strings.Join(rep.Why, "; "))
	}
}
