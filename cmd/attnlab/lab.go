package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/lab"
	"github.com/attnlab/attnlab/lab/report"
)

var labCmd = register(&command{
	name:  "lab",
	usage: "[-op OP,...] [-json] [-plot FILE] [-html DIR] [-force]",
	short: "run every check and negative control; exit 1 if any fails or escapes",
	long: `Lab is the main job. It runs every check on the reference attention (all
must pass), runs every check on every registered fault (each must be caught
by at least one check, and the report names which), and sweeps the finite-
difference step ε from 1e-1 to 1e-12 to show the truncation and rounding
regimes, as a table (and as a PNG plot with -plot FILE).

-html DIR also writes a self-contained report for a reader: DIR/index.html
(inline CSS, no network fetches) and its PNG figures: the ε sweep, per
operation each check with its claim, limit and measurement and the fault ×
check matrix, the visibility tables, attention weights and first-row
gradients of a small example, GQA head grouping and RoPE rotation. The
report is built in a temporary folder beside DIR and renamed into place when
complete. A DIR that exists and is not empty is refused unless -force is
given. The page holds no timestamps or durations: the same code gives the
same bytes. An existing -plot file is refused unless -force.

-op runs only the named operations (a comma-separated list; "attnlab
explain -list" names them all).

It exits 0 when everything passes, 1 when a check fails or a fault escapes
(the report is still written), 2 on bad usage.

Example: attnlab lab -html lab-report`,
})

type labOpts struct {
	json, force    bool
	plot, html, op string
}

func init() {
	labCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &labOpts{}
		fs.BoolVar(&o.json, "json", false, "print the report as JSON")
		fs.StringVar(&o.op, "op", "", "run only these operations, comma-separated (default: all)")
		fs.StringVar(&o.plot, "plot", "", "also write the ε-sweep plot to this PNG file")
		fs.StringVar(&o.html, "html", "", "write an HTML report (index.html and PNG figures) into this folder")
		fs.BoolVar(&o.force, "force", false, "replace an existing -plot file or a non-empty -html folder")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runLab(ctx, o, stdout)
		}
	}
}

func runLab(ctx context.Context, o *labOpts, stdout io.Writer) error {
	ops, err := opList(o.op)
	if err != nil {
		return err
	}
	if o.html != "" {
		// Refuse a bad folder before the run, not after it.
		claim, err := output.Target{Path: o.html, Flag: "-html", Replace: o.force}.ClaimDir()
		if err != nil {
			return err
		}
		defer claim.Release()
	}
	if o.plot != "" {
		claim, err := output.Target{Path: o.plot, Flag: "-plot", Replace: o.force}.ClaimFile()
		if err != nil {
			return err
		}
		defer claim.Release()
	}
	if o.force && o.html == "" && o.plot == "" {
		return usageError{"-force applies to -html and -plot only"}
	}
	if o.plot != "" {
		if err := writable("-plot", o.plot, false); err != nil {
			return err
		}
	}
	if o.html != "" {
		if err := writable("-html", o.html, true); err != nil {
			return err
		}
	}
	start := time.Now()
	// the lab stops between checks; a check may run a second more, which
	// an interrupt does not wait for (nothing is written before the end)
	r, err := await(ctx, func() (*lab.Report, error) { return lab.Run(ctx, lab.Options{Ops: ops}) })
	if err != nil {
		return err
	}
	if o.plot != "" {
		if err := report.Plot(o.plot, r.Sweep); err != nil {
			return err
		}
	}
	if o.html != "" {
		if err := report.HTML(r, o.html, o.force); err != nil {
			if errors.Is(err, report.ErrDirNotEmpty) {
				return usageError{err.Error()}
			}
			return err
		}
	}
	if o.json {
		if err := report.JSON(stdout, r); err != nil {
			return err
		}
	} else {
		if err := report.Text(stdout, r, o.plot); err != nil {
			return err
		}
		if o.html != "" {
			fmt.Fprintf(stdout, "report: %s (lab and report took %.1f s)\n", filepath.Join(o.html, "index.html"), time.Since(start).Seconds())
		}
	}
	if !r.OK() {
		return errFailed
	}
	return nil
}

// opList splits a comma-separated list of operations of the registry; ""
// is every operation (nil). An unknown name is a usage error.
func opList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var ops []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if _, ok := lab.Find(name); !ok {
			return nil, usageError{fmt.Sprintf("-op %q: unknown operation (operations: %s)", name, strings.Join(lab.Names(), ", "))}
		}
		ops = append(ops, name)
	}
	return ops, nil
}
