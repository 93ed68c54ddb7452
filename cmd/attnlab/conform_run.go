package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
)

// listAdapters prints the shipped adapters, one a line, then where the
// guide to wrapping one's own kernel is.
func listAdapters(stdout io.Writer) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, s := range adapters.List() {
		if why := s.Missing(); why != "" {
			fmt.Fprintf(tw, "%s\tmissing\t%s: %s\n", s.Name, s.Runs, why)
		} else {
			fmt.Fprintf(tw, "%s\tready\t%s\n", s.Name, s.Runs)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "\n%s\n", listFooter)
	return err
}

// listFooter ends conform -list: the way to one's own kernel.
const listFooter = `Your own kernel: attnlab conform -exec "CMD ARGS", its adapter written as docs/conform-your-kernel.md shows (Go, Python, Node, C); the cards of these adapters are in docs/conform-cards.md.`

// target starts what -exec or -impl names; close ends it, with the
// adapter's exit checked.
func target(ctx context.Context, exe, impl string, timeout time.Duration) (conform.Implementation, func() error, error) {
	switch impl {
	case "reference":
		return conform.Reference(), func() error { return nil }, nil
	case "fused":
		return conform.Fused(), func() error { return nil }, nil
	}
	a, err := adapters.Start(ctx, exe, timeout)
	if err != nil {
		return nil, nil, adapterFailure(err)
	}
	return a, func() error { return adapterFailure(a.Close()) }, nil
}

func runConform(ctx context.Context, o *conformOpts, stdout io.Writer) error {
	impl, closeImpl, err := target(ctx, o.exe, o.impl, o.timeout)
	if err != nil {
		return err
	}
	defer closeImpl() // after a failure: ends it
	rep, err := conform.Run(ctx, impl, o.contract)
	if err != nil {
		return adapterFailure(err)
	}
	if err := closeImpl(); err != nil { // it must exit 0
		return err
	}
	if o.asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else if err := rep.WriteText(stdout); err != nil {
		return err
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
