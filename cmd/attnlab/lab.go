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

	"github.com/attnlab/attnlab/lab"
	"github.com/attnlab/attnlab/lab/report"
)

var labCmd = register(&command{
	name:  "lab",
	usage: "[-op OP,...] [-json] [-plot FILE] [-html DIR [-force]]",
	short: "run every check and negative control; exit 1 if any fails or escapes",
	long: `Lab is the main job. It runs every check on the reference attention (all
must pass), runs every check on every registered fault (each must be caught
by at least one check, and the report names which), and sweeps the finite-
difference step ε from 1e-1 to 1e-12 to show the truncation and rounding
regimes, as a table and as a PNG plot.

-html DIR also writes a self-contained report for a reader: DIR/index.html
(inline CSS, no network fetches) and its PNG figures: the ε sweep, per
operation each check with its claim, limit and measurement and the fault ×
check matrix, the visibility tables, attention weights and first-row
gradients of a small example, GQA head grouping and RoPE rotation. The
report is built in a temporary folder beside DIR and renamed into place when
complete. A DIR that exists and is not empty is refused unless -force is
given. The page holds no timestamps or durations: the same code gives the
same bytes. With -html, the ε-sweep PNG goes into DIR only, unless -plot is
given explicitly.

-op runs only the named operations (a comma-separated list; "attnlab
explain -list" names them all).

It exits 0 when everything passes, 1 when a check fails or a fault escapes
(the report is still written), 2 on bad usage.

Example: attnlab lab -html lab-report`,
})

var (
	labOps   = labCmd.flags.String("op", "", "run only these operations, comma-separated (default: all)")
	labJSON  = labCmd.flags.Bool("json", false, "print the report as JSON")
	labPlot  = labCmd.flags.String("plot", "eps-sweep.png", "write the ε-sweep plot to this PNG file (\"\" for none)")
	labHTML  = labCmd.flags.String("html", "", "write an HTML report (index.html and PNG figures) into this folder")
	labForce = labCmd.flags.Bool("force", false, "with -html: replace a folder that is not empty")
)

func init() { labCmd.run = runLab }

func runLab(ctx context.Context, args []string, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	ops, err := opList(*labOps)
	if err != nil {
		return err
	}
	plot := *labPlot
	if *labHTML != "" {
		// Refuse a bad folder before the run, not after it.
		if err := report.CheckDir(*labHTML, *labForce); err != nil {
			if errors.Is(err, report.ErrDirNotEmpty) {
				return usageError{err.Error()}
			}
			return err
		}
		if !flagSet(labCmd.flags, "plot") {
			plot = ""
		}
	} else if *labForce {
		return usageError{"-force applies to -html only"}
	}
	start := time.Now()
	r, err := lab.Run(lab.Options{Ops: ops})
	if err != nil {
		return err
	}
	if plot != "" {
		if err := report.Plot(plot, r.Sweep); err != nil {
			return err
		}
	}
	if *labHTML != "" {
		if err := report.HTML(r, *labHTML, *labForce); err != nil {
			if errors.Is(err, report.ErrDirNotEmpty) {
				return usageError{err.Error()}
			}
			return err
		}
	}
	if *labJSON {
		if err := report.JSON(stdout, r); err != nil {
			return err
		}
	} else {
		if err := report.Text(stdout, r, plot); err != nil {
			return err
		}
		if *labHTML != "" {
			fmt.Fprintf(stdout, "report: %s (lab and report took %.1f s)\n", filepath.Join(*labHTML, "index.html"), time.Since(start).Seconds())
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

// flagSet reports whether the flag called name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
