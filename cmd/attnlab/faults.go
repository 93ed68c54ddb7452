package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"

	"github.com/attnlab/attnlab/lab"
)

var faultsCmd = register(&command{
	name:  "faults",
	usage: "[-json]",
	short: "the negative-control table: each fault and the checks that catch it",
	long: `Faults runs every check on every deliberately broken implementation of the
registry and prints the matrix: which check catches which fault. A fault that
no check catches makes the command exit 1.

Example: attnlab faults`,
})

func init() {
	faultsCmd.define = func(fs *flag.FlagSet) runFunc {
		asJSON := fs.Bool("json", false, "print the table as JSON")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runFaults(ctx, *asJSON, stdout)
		}
	}
}

func runFaults(ctx context.Context, asJSON bool, stdout io.Writer) error {
	var ops []lab.OpReport
	for _, s := range lab.Suites() {
		ops = append(ops, lab.OpReport{Op: s.Name(), Faults: s.RunFaults()})
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ops); err != nil {
			return err
		}
	} else if err := lab.WriteFaultTable(stdout, ops); err != nil {
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
