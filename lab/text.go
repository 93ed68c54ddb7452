package lab

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/attnlab/attnlab/checks"
)

// WriteText writes the report for a reader: per operation the checks on the
// correct implementation and the negative controls, then the ε sweep and a
// summary.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("attnlab lab\n")
	for _, op := range r.Ops {
		writeOp(&b, op)
	}
	writeSweep(&b, r)

	passed, total, caught, faults, blind := 0, 0, 0, 0, 0
	for _, op := range r.Ops {
		for _, c := range op.Checks {
			total++
			if c.Pass {
				passed++
			}
		}
		for _, f := range op.Faults {
			faults++
			if f.Caught() {
				caught++
			}
			if f.FDBlind {
				blind++
			}
		}
	}
	fmt.Fprintf(&b, "\nSUMMARY: %d/%d checks pass on the correct implementations; %d/%d faults caught (%d invisible to finite differences); %d operations; %.1f s.\n",
		passed, total, caught, faults, blind, len(r.Ops), r.Seconds)
	if r.OK() {
		b.WriteString("OK\n")
	} else {
		b.WriteString("FAILED\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeOp(b *strings.Builder, op OpReport) {
	fmt.Fprintf(b, "\n=== %s: %s\n\nCHECKS (each must pass)\n", op.Op, op.Impl)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, c := range op.Checks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", verdict(c.Pass, "PASS", "FAIL"), c.Check, c.Kind, c.Detail)
	}
	tw.Flush()
	b.WriteString("\n  what each checks, and what a pass cannot prove:\n")
	for _, c := range op.Checks {
		fmt.Fprintf(b, "  %-24s %s\n  %-24s limit: %s\n", c.Check, c.Claim, "", c.Limit)
	}

	if len(op.Faults) == 0 {
		b.WriteString("\nNEGATIVE CONTROLS: none of its own; the same checks catch every fault of the reference above\n")
		return
	}
	b.WriteString("\nNEGATIVE CONTROLS (each fault must be caught by at least one check)\n")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, f := range op.Faults {
		by := strings.Join(f.CaughtBy, ", ")
		if !f.Caught() {
			by = "NOTHING"
		}
		note := ""
		switch {
		case f.Kinds[checks.Gradient] > 0:
		case f.FDErrored:
			note = "  ← finite differences fail only because the forward errors"
		case f.Caught():
			note = "  ← passes finite differences: only the other checks see it"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", verdict(f.Caught(), "CAUGHT", "ESCAPED"), f.Name, f.Breaks)
		fmt.Fprintf(tw, "  \t\tcaught by: %s%s\n", by, note)
	}
	tw.Flush()
}

func writeSweep(b *strings.Builder, r *Report) {
	fmt.Fprintf(b, "\n=== ε sweep: max |analytic − numeric| over every element of attention's dQ, dK, dV\n  (%s)\n", r.Sweep.Config)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  ε\tcentral\tslope\t4-point\tslope\t\n")
	cs, ps := r.Sweep.Central.Slopes(), r.Sweep.Precise.Slopes()
	for i, row := range r.Sweep.Central {
		fmt.Fprintf(tw, "  %.1e\t%.1e\t%s\t%.1e\t%s\t\n", row.Eps, row.MaxAbs, slope(cs, i), r.Sweep.Precise[i].MaxAbs, slope(ps, i))
	}
	tw.Flush()
	bc, bp := r.Sweep.Central.Best(), r.Sweep.Precise.Best()
	fmt.Fprintf(b, "  best: central %.1e at ε = %.0e, 4-point %.1e at ε = %.0e.\n", bc.MaxAbs, bc.Eps, bp.MaxAbs, bp.Eps)
	b.WriteString("  Large ε: truncation error, slope ≈ 2 (central) or 4 (4-point). Small ε: rounding error ≈ u/ε, slope ≈ −1.\n")
	if r.Plot != "" {
		fmt.Fprintf(b, "  plot: %s\n", r.Plot)
	}
}

// WriteFaultTable writes, per operation, the fault × check matrix: x where a
// check caught the fault, e where it caught it because the implementation
// errored, . where the fault passed.
func WriteFaultTable(w io.Writer, ops []OpReport) error {
	var b strings.Builder
	b.WriteString("x = caught, e = caught because the implementation returned an error, . = passed\n")
	for _, op := range ops {
		if len(op.Faults) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n=== %s\nchecks:\n", op.Op)
		for i, res := range op.Faults[0].Results {
			fmt.Fprintf(&b, "  %2d %s\n", i+1, res.Check)
		}
		b.WriteByte('\n')
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		fmt.Fprint(tw, "fault\t")
		for i := range op.Faults[0].Results {
			fmt.Fprintf(tw, "%d\t", i+1)
		}
		fmt.Fprint(tw, "what it breaks\n")
		for _, f := range op.Faults {
			fmt.Fprintf(tw, "%s\t", f.Name)
			for _, res := range f.Results {
				mark := "."
				switch {
				case res.Errored:
					mark = "e"
				case !res.Pass:
					mark = "x"
				}
				fmt.Fprintf(tw, "%s\t", mark)
			}
			fmt.Fprintf(tw, "%s\n", f.Breaks)
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func verdict(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func slope(s []float64, i int) string {
	if i == 0 || i-1 >= len(s) || math.IsNaN(s[i-1]) {
		return ""
	}
	return fmt.Sprintf("%+.1f", s[i-1])
}
