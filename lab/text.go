package lab

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/attnlab/attnlab/checks"
)

// WriteText writes the report for a reader: the checks on the reference, the
// ε sweep, the negative controls and a summary.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "attnlab lab: %s\n\n", r.Impl)

	b.WriteString("CHECKS ON THE REFERENCE (each must pass)\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", verdict(c.Pass, "PASS", "FAIL"), c.Check, c.Kind, c.Detail)
	}
	tw.Flush()
	b.WriteString("\n  what each checks, and what a pass cannot prove:\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  %-24s %s\n  %-24s limit: %s\n", c.Check, c.Claim, "", c.Limit)
	}

	fmt.Fprintf(&b, "\nε SWEEP: max |analytic − numeric| over every element of dQ, dK, dV\n  (%s)\n", r.Sweep.Config)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  ε\tcentral\tslope\t4-point\tslope\t\n")
	cs, ps := r.Sweep.Central.Slopes(), r.Sweep.Precise.Slopes()
	for i, row := range r.Sweep.Central {
		fmt.Fprintf(tw, "  %.1e\t%.1e\t%s\t%.1e\t%s\t\n", row.Eps, row.MaxAbs, slope(cs, i), r.Sweep.Precise[i].MaxAbs, slope(ps, i))
	}
	tw.Flush()
	bc, bp := r.Sweep.Central.Best(), r.Sweep.Precise.Best()
	fmt.Fprintf(&b, "  best: central %.1e at ε = %.0e, 4-point %.1e at ε = %.0e.\n", bc.MaxAbs, bc.Eps, bp.MaxAbs, bp.Eps)
	b.WriteString("  Large ε: truncation error, slope ≈ 2 (central) or 4 (4-point). Small ε: rounding error ≈ u/ε, slope ≈ −1.\n")
	if r.Plot != "" {
		fmt.Fprintf(&b, "  plot: %s\n", r.Plot)
	}

	b.WriteString("\nNEGATIVE CONTROLS (each fault must be caught by at least one check)\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	blind := 0
	for _, f := range r.Faults {
		by := strings.Join(f.CaughtBy, ", ")
		if !f.Caught() {
			by = "NOTHING"
		}
		note := ""
		if f.FDBlind && f.Kinds[checks.Gradient] == 0 {
			note = "  ← finite differences pass: only semantic checks see it"
			blind++
		} else if f.FDBlind {
			note = "  ← finite differences fail only because the forward errors"
			blind++
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", verdict(f.Caught(), "CAUGHT", "ESCAPED"), f.Name, f.Breaks)
		fmt.Fprintf(tw, "  \t\tcaught by: %s%s\n", by, note)
	}
	tw.Flush()

	passed, caught := 0, 0
	for _, c := range r.Checks {
		if c.Pass {
			passed++
		}
	}
	for _, f := range r.Faults {
		if f.Caught() {
			caught++
		}
	}
	fmt.Fprintf(&b, "\nSUMMARY: %d/%d checks pass on the reference; %d/%d faults caught (%d invisible to finite differences); %.1f s.\n",
		passed, len(r.Checks), caught, len(r.Faults), blind, r.Seconds)
	if r.OK() {
		b.WriteString("OK\n")
	} else {
		b.WriteString("FAILED\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFaultTable writes the fault × check matrix: x where a check caught the
// fault, e where it caught it because the implementation errored.
func (r *Report) WriteFaultTable(w io.Writer) error {
	var b strings.Builder
	if len(r.Faults) == 0 {
		return nil
	}
	b.WriteString("checks:\n")
	for i, res := range r.Faults[0].Results {
		fmt.Fprintf(&b, "  %2d %s\n", i+1, res.Check)
	}
	b.WriteString("\nx = caught, e = caught because the implementation returned an error, . = passed\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprint(tw, "fault\t")
	for i := range r.Faults[0].Results {
		fmt.Fprintf(tw, "%d\t", i+1)
	}
	fmt.Fprint(tw, "what it breaks\n")
	for _, f := range r.Faults {
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
