// Command attnlab is the attention laboratory: it proves hand-derived
// attention gradients by finite differences, semantic invariants and negative
// controls, prints mask tables, serves as a reference oracle for other
// implementations, and trains and runs the models built on the proven ops.
//
// Usage:
//
//	attnlab <command> [flags]
//
// Run "attnlab help" for the list of commands and "attnlab <command> -h"
// (or "attnlab help <command>") for one command's description and flags.
//
// Exit statuses: 0 success; 1 failure (a check failed, bad data, an I/O
// error); 2 usage error; 3 an adapter under test failed (conform); 130 and
// 143 interrupted by SIGINT and SIGTERM. A second signal ends the process
// at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/attnlab/attnlab/internal/output"
)

// runFunc runs a command with its flags parsed; args are the positional
// arguments.
type runFunc func(ctx context.Context, args []string, stdout io.Writer) error

// A command is one subcommand of attnlab, after cmd/go's base.Command.
type command struct {
	name  string
	usage string // the argument synopsis
	short string // one line for the command list
	long  string // the help text, ending with an Example: line
	// define registers the command's flags on a fresh flag set and returns
	// the function that runs it: each call of a command gets flags of its
	// own.
	define func(fs *flag.FlagSet) runFunc
	// subs are the subcommands (attnlab retriever train, …): a command
	// with subs runs none of its own.
	subs []*command
	// positional commands take arguments mixed with flags (attnlab search
	// QUERY -k 3): flags are parsed wherever they appear, up to "--".
	positional bool
	parent     *command
}

// fullName is the command as typed: "train", "retriever train".
func (c *command) fullName() string {
	if c.parent != nil {
		return c.parent.fullName() + " " + c.name
	}
	return c.name
}

// usageError is an error in how the command was called: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

var commands []*command

func register(c *command) *command {
	commands = append(commands, c)
	for _, s := range c.subs {
		s.parent = c
	}
	return c
}

// flagSet returns c's flags with their run function.
func (c *command) flagSet() (*flag.FlagSet, runFunc) {
	fs := flag.NewFlagSet(c.fullName(), flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line, help on stdout
	fs.Usage = func() {}
	var run runFunc
	if c.define != nil {
		run = c.define(fs)
	}
	return fs, run
}

func printHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: attnlab %s %s\n\n%s\n", c.fullName(), c.usage, strings.TrimSpace(c.long))
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "\nSubcommands (attnlab %s SUB -h for each one's flags):\n", c.fullName())
		for _, s := range c.subs {
			fmt.Fprintf(w, "  %-10s %s\n", s.name, s.short)
		}
		return
	}
	fs, _ := c.flagSet()
	var sb strings.Builder
	fs.SetOutput(&sb)
	fs.PrintDefaults()
	if sb.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", sb.String())
	}
}

func printCommands(w io.Writer) {
	fmt.Fprintln(w, "attnlab: transformer attention with hand-derived gradients, proven.")
	fmt.Fprintln(w, "\nusage: attnlab <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.short)
	}
	fmt.Fprintln(w, "\nRun \"attnlab <command> -h\" for a command's description and flags.")
	fmt.Fprintln(w, "Exit status: 0 ok, 1 failure, 2 usage, 3 adapter failure, 130/143 interrupted.")
}

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		cancel(interrupted{s})
		s = <-sigs // a second signal: the user insists
		fmt.Fprintf(os.Stderr, "attnlab: %v again: exiting now\n", s)
		os.Exit(interrupted{s}.status())
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

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

// run dispatches args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printCommands(stdout)
		return 2
	}
	name, args := args[0], args[1:]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		if len(args) == 0 {
			printCommands(stdout)
			return 0
		}
		c, rest := find(commands, args)
		if c == nil || len(rest) > 0 {
			fmt.Fprintf(stderr, "attnlab help: unknown command %q\n", strings.Join(args, " "))
			return 2
		}
		printHelp(stdout, c)
		return 0
	}
	c, args := find(commands, append([]string{name}, args...))
	if c == nil {
		fmt.Fprintf(stderr, "attnlab: unknown command %q\nrun \"attnlab help\" for the list of commands\n", name)
		return 2
	}
	if len(c.subs) > 0 { // a command of subcommands, without one
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			printHelp(stdout, c)
			return 0
		}
		msg := "missing subcommand"
		if len(args) > 0 {
			msg = fmt.Sprintf("unknown subcommand %q", args[0])
		}
		var names []string
		for _, s := range c.subs {
			names = append(names, s.name)
		}
		fmt.Fprintf(stderr, "attnlab %s: %s: want %s\nrun \"attnlab %s -h\" for usage\n", c.name, msg, strings.Join(names, ", "), c.name)
		return 2
	}
	fs, runC := c.flagSet()
	pos, err := parseFlags(fs, args, c.positional)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, c)
		return 0
	}
	if err == nil {
		err = runC(ctx, pos, stdout)
	}
	return report(ctx, c, err, stderr)
}

// find walks args down the command tree: the command named by the leading
// words, and the arguments after them.
func find(cs []*command, args []string) (*command, []string) {
	var found *command
	for len(args) > 0 {
		var next *command
		for _, c := range cs {
			if c.name == args[0] {
				next = c
			}
		}
		if next == nil {
			break
		}
		found, args, cs = next, args[1:], next.subs
	}
	return found, args
}

// parseFlags parses args; with positional, flags may follow the positional
// arguments (up to a "--", after which everything is positional). A flag
// error is a usageError naming the flag.
func parseFlags(fs *flag.FlagSet, args []string, positional bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" || !positional {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// report prints err for command c and returns the exit status.
func report(ctx context.Context, c *command, err error, stderr io.Writer) int {
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
	case errors.As(err, &ue), errors.Is(err, output.ErrExists), errors.Is(err, output.ErrInput):
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

// noArgs rejects positional arguments.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
	}
	return nil
}

// goRoot returns the GOROOT that the go command reports, or the one this
// binary was built with when there is no go command.
func goRoot() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return s
		}
	}
	return runtime.GOROOT()
}

// interruptible runs f and returns its error, or ctx's as soon as ctx is
// done: for library work that does not watch ctx itself and writes nothing
// (the process ends with the command, and f with it).
func interruptible(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
