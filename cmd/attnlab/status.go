package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/attnlab/attnlab/internal/fsprobe"
	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/train"
)

// interrupted is the cause of a context cancelled by a signal.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "interrupted (" + e.sig.String() + ")" }

// status is the shell's convention: 128 + the signal number.
func (e interrupted) status() int {
	if e.sig == syscall.SIGTERM {
		return 143
	}
	return 130
}

// errFailed is returned by a command that has already reported its failure
// on stdout (a check that failed, a fault that escaped): exit status 1, no
// further message.
var errFailed = errors.New("failed")

// adapterError is the failure of an implementation under test: exit 3.
type adapterError struct{ err error }

func (e adapterError) Error() string { return e.err.Error() }
func (e adapterError) Unwrap() error { return e.err }

// exitStatus prints err for command c and returns the exit status.
func exitStatus(ctx context.Context, c *command, err error, stderr io.Writer) int {
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) {
		msg := sig.Error()
		if err != nil && !errors.Is(err, errFailed) && err != context.Canceled {
			msg += ": " + err.Error()
		}
		fmt.Fprintf(stderr, "attnlab %s: %s\n", c.fullName(), msg)
		return sig.status()
	}
	var ue usageError
	var ae adapterError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue), errors.Is(err, output.ErrExists), errors.Is(err, output.ErrInput), errors.Is(err, output.ErrNoPath):
		fmt.Fprintf(stderr, "attnlab %s: %v\nrun \"attnlab %s -h\" for usage\n", c.fullName(), err, c.fullName())
		return 2
	case errors.Is(err, errFailed):
		return 1
	case errors.As(err, &ae):
		fmt.Fprintf(stderr, "attnlab %s: %v\n", c.fullName(), err)
		return 3
	default:
		fmt.Fprintf(stderr, "attnlab %s: %v\n", c.fullName(), err)
		return 1
	}
}

// optionError makes an option that does not suit the model it met (a
// *train.OptionError: a window beyond its positions, a batch whose
// activations do not fit) a usage error.
func optionError(err error) error {
	if oe := (*train.OptionError)(nil); errors.As(err, &oe) {
		return usageError{oe.Error()}
	}
	return err
}

// writable checks, before any work, that the output of flag can be
// written at path: a file whose folder exists, or a folder to make.
func writable(flag, path string, folder bool) error {
	check := fsprobe.File
	if folder {
		check = fsprobe.Dir
	}
	if err := check(path); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}

// await runs f in a goroutine and returns what it returns, or ctx's error
// as soon as ctx is done: for work that cannot be interrupted inside, like
// opening a FIFO that has no writer yet. The process exits on the
// interrupt while f goes on.
func await[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// noArgs rejects positional arguments.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
	}
	return nil
}
