// Command attnlab is the attention laboratory: it proves hand-derived
// attention gradients by finite differences, semantic invariants and negative
// controls, prints mask tables, and serves as a reference oracle for other
// implementations.
//
// Usage:
//
//	attnlab <command> [flags]
//
// Run "attnlab help" for the list of commands and "attnlab help <command>"
// for one command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

// A command is one subcommand of attnlab, after cmd/go's base.Command.
type command struct {
	name  string
	usage string // the argument synopsis
	short string // one line for the command list
	long  string // the help text, ending with an Example: line
	flags *flag.FlagSet
	run   func(ctx context.Context, args []string, stdout io.Writer) error
}

// usageError is an error in how the command was called: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

var commands []*command

func register(c *command) *command {
	c.flags = flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.flags.Usage = func() { printHelp(c.flags.Output(), c) }
	commands = append(commands, c)
	return c
}

func printHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: attnlab %s %s\n\n%s\n", c.name, c.usage, strings.TrimSpace(c.long))
	var sb strings.Builder
	c.flags.SetOutput(&sb)
	c.flags.PrintDefaults()
	c.flags.SetOutput(nil)
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
	fmt.Fprintln(w, "\nRun \"attnlab help <command>\" for a command's flags.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args and returns the exit status: 0 on success, 1 when the
// command fails, 2 when it was called wrongly, 130 when it was interrupted
// (its error wraps context.Canceled).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printCommands(stderr)
		return 2
	}
	name, args := args[0], args[1:]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		if len(args) == 0 {
			printCommands(stdout)
			return 0
		}
		for _, c := range commands {
			if c.name == args[0] {
				printHelp(stdout, c)
				return 0
			}
		}
		fmt.Fprintf(stderr, "attnlab help: unknown command %q\n", args[0])
		return 2
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		c.flags.SetOutput(stderr)
		if err := c.flags.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		err := c.run(ctx, c.flags.Args(), stdout)
		var ue usageError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "attnlab %s: %v\n", c.name, err)
			fmt.Fprintf(stderr, "run \"attnlab help %s\" for usage\n", c.name)
			return 2
		case errors.Is(err, errFailed):
			return 1
		case errors.Is(err, context.Canceled):
			fmt.Fprintf(stderr, "attnlab %s: %v\n", c.name, err)
			return 130
		default:
			fmt.Fprintf(stderr, "attnlab %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "attnlab: unknown command %q\n", name)
	printCommands(stderr)
	return 2
}

// errFailed is returned by a command that has already reported its failure
// on stdout (a check that failed, a fault that escaped): exit status 1, no
// further message.
var errFailed = errors.New("failed")

// noArgs rejects positional arguments.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
	}
	return nil
}
