package main

import (
	"context"
	"fmt"
	"io"

	"github.com/attnlab/attnlab/conform"
	"github.com/attnlab/attnlab/internal/output"
)

// runDiff is conform -against: A is -exec or -impl, B -against. Exit 0
// when they agree, 1 when they differ.
func runDiff(ctx context.Context, o *conformOpts, stdout io.Writer) error {
	if o.repro != "" {
		// refuse a bad folder before the runs, not after them
		claim, err := output.Target{Path: o.repro, Flag: "-repro", Replace: o.force, Hint: "-force replaces it"}.ClaimDir()
		if err != nil {
			return err
		}
		defer claim.Release()
		if err := writable("-repro", o.repro, true); err != nil {
			return err
		}
	}
	a, closeA, err := target(ctx, o.exe, o.impl, o.timeout)
	if err != nil {
		return err
	}
	defer closeA()
	b, closeB, err := target(ctx, o.against, "", o.timeout)
	if err != nil {
		return err
	}
	defer closeB()
	d, err := conform.Diff(ctx, a, b, o.contract)
	if err != nil {
		return adapterFailure(err)
	}
	if err := closeA(); err != nil { // both must exit 0
		return err
	}
	if err := closeB(); err != nil {
		return err
	}
	if o.asJSON {
		err = writeJSON(stdout, d)
	} else {
		err = d.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if o.repro != "" {
		if d.First == nil {
			fmt.Fprintf(stdout, "-repro: every replayed answer agrees: nothing written to %s\n", o.repro)
		} else if err := d.WriteRepro(o.repro); err != nil {
			return fmt.Errorf("-repro: %w", err)
		} else if !o.asJSON {
			fmt.Fprintf(stdout, "the first differing request and both answers are in %s\n", o.repro)
		}
	}
	if !d.Same() {
		return errFailed
	}
	return nil
}
