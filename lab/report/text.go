// Package report renders what package lab measured: text for a terminal,
// JSON for programs, a self-contained HTML page with figures for a reader,
// the fault × check table, the ε sweeps of the lab and of one GradCheck
// (table and plot), and the long form of any operation, check or fault
// (attnlab explain). Package lab runs; this package only writes.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/lab"
)

// Text writes the report for a reader: per operation the checks on the
// correct implementation and the negative controls, then the ε sweep and a
// summary line.
func Text(w io.Writer, r *lab.Report, plot string) error {
	var b strings.Builder
	b.WriteString("attnlab lab\n")
	for _, op := range r.Ops {
		writeOp(&b, op)
	}
	writeSweep(&b, r, plot)
	n := r.Counts()
	fmt.Fprintf(&b, "\nSUMMARY: %d/%d checks pass on the correct implementations; %d/%d faults caught (%d invisible to finite differences); %d operations; %.1f s.\n",
		n.Passed, n.Checks, n.Caught, n.Faults, n.FDBlind, n.Ops, r.Seconds)
	if r.OK() {
		b.WriteString("OK\n")
	} else {
		b.WriteString("FAILED\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// JSON writes the report as indented JSON with its verdict, "ok".
func JSON(w io.Writer, r *lab.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*lab.Report
		OK bool `json:"ok"`
	}{r, r.OK()})
}

// Plot writes the ε sweep as a PNG plot to path.
func Plot(path string, s checks.Sweep) error {
	return plots.EpsSweepPNG(path, "Finite-difference error of attention gradients against the step",
		[]plots.Series{series("central (2-point)", s.Central), series("4-point", s.Precise)})
}

// GradSweep writes the sweep of a GradCheck (attnlab gradcheck -sweep): per
// step ε the max abs and max rel error and the slope from the row before,
// then the best ε.
func GradSweep(w io.Writer, rows gradcheck.SweepRows) error {
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
	_, err := io.WriteString(w, b.String())
	return err
}

// GradSweepPlot writes the max abs error of the sweep of a GradCheck
// against ε as a PNG plot to path, the series named for the stencil
// (precise: the 4-point one).
func GradSweepPlot(path string, rows gradcheck.SweepRows, precise bool) error {
	name := "central"
	if precise {
		name = "4-point"
	}
	return plots.EpsSweepPNG(path, "Finite-difference error against the step", []plots.Series{series(name, rows)})
}

// series is the max abs error of rows against ε.
func series(name string, rows gradcheck.SweepRows) plots.Series {
	sr := plots.Series{Name: name}
	for _, row := range rows {
		sr.X = append(sr.X, row.Eps)
		sr.Y = append(sr.Y, row.MaxAbs)
	}
	return sr
}

func writeOp(b *strings.Builder, op lab.OpReport) {
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

func writeSweep(b *strings.Builder, r *lab.Report, plot string) {
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
	if plot != "" {
		fmt.Fprintf(b, "  plot: %s\n", plot)
	}
}

// FaultTable writes, per operation, the fault × check matrix: x where a
// check caught the fault, e where it caught it because the implementation
// errored, . where the fault passed.
func FaultTable(w io.Writer, ops []lab.OpReport) error {
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
