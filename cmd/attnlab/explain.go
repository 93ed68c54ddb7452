package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"

	"github.com/attnlab/attnlab/lab"
	"github.com/attnlab/attnlab/lab/report"
)

var explainCmd = register(&command{
	name:  "explain",
	usage: "[-list] NAME",
	short: "explain a check, a fault or an operation: what it tests, proves and cannot prove",
	long: `Explain prints the long form of one name of the lab.

For an operation (` + strings.Join(lab.Names(), ", ") + `) it derives
the gradient path: the forward's equations, then the backward's, each with
its shapes and the reason for its form (for attention, the V path dV = Pᵀ dO
and the Q/K path through dP, dS, dQ and dK), then the operation's checks and
faults.

For a check, written OP/CHECK (check names repeat across operations: fd-
elements runs on all of them), it gives the equation or invariant tested,
the shapes, what a pass proves and what it cannot. A bare check name is
explained once if it means the same wherever it runs, else generically with
the list of operations that run it.

For a fault it says what the fault breaks, runs every check of its
operation on it, and shows which caught it.

An unknown name is a usage error (exit 2) naming the operations and close
matches; -list prints every name.

Example: attnlab explain attention/first-row-grad`,
})

func init() {
	explainCmd.positional = true
	explainCmd.define = func(fs *flag.FlagSet) runFunc {
		list := fs.Bool("list", false, "list every operation with its checks and faults")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			return runExplain(args, *list, stdout)
		}
	}
}

func runExplain(args []string, list bool, stdout io.Writer) error {
	if list {
		if err := noArgs(args); err != nil {
			return err
		}
		return report.Names(stdout)
	}
	if len(args) != 1 {
		return usageError{"want one NAME: an operation, OP/CHECK, a check or a fault (\"attnlab explain -list\" lists them)"}
	}
	err := report.Explain(stdout, args[0])
	if unknown, ok := errors.AsType[*report.UnknownNameError](err); ok {
		return usageError{unknown.Error()}
	}
	return err
}
