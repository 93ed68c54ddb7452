package main

import (
	"context"
	"flag"
	"io"
	"slices"

	"github.com/attnlab/attnlab/lab"
	"github.com/attnlab/attnlab/lab/report"
)

var faultsCmd = register(&command{
	name:  "faults",
	usage: "[-op OP,...] [-json]",
	short: "the negative-control table: each fault and the checks that catch it",
	long: `Faults runs every check on every deliberately broken implementation of the
registry and prints the matrix: which check catches which fault. A fault that
no check catches makes the command exit 1. -op limits it to the named
operations (comma-separated).

Example: attnlab faults`,
})

func init() {
	faultsCmd.define = func(fs *flag.FlagSet) runFunc {
		asJSON := fs.Bool("json", false, "print the table as JSON")
		op := fs.String("op", "", "only these operations, comma-separated (default: all)")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			names, err := opList(*op)
			if err != nil {
				return err
			}
			return runFaults(ctx, names, *asJSON, stdout)
		}
	}
}

func runFaults(ctx context.Context, names []string, asJSON bool, stdout io.Writer) error {
	// the faults stop between checks; an interrupt does not wait for the
	// checks in progress
	ops, err := await(ctx, func() ([]lab.OpReport, error) {
		var ops []lab.OpReport
		for _, o := range lab.Ops() {
			info := o.Info()
			if names != nil && !slices.Contains(names, info.Op) {
				continue
			}
			fos, err := o.RunFaults(ctx)
			if err != nil {
				return nil, err
			}
			ops = append(ops, lab.OpReport{Op: info.Op, Impl: info.Impl, Faults: fos})
		}
		return ops, nil
	})
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(stdout, ops); err != nil {
			return err
		}
	} else if err := report.FaultTable(stdout, ops); err != nil {
		return err
	}
	for _, op := range ops {
		for _, f := range op.Faults {
			if !f.Caught() {
				return errFailed
			}
		}
	}
	return nil
}
