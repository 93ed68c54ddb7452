package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/attnlab/attnlab/models"
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
	// streams is set for a command that prints its result as it goes
	// (generate): every other command prints a heartbeat line while it
	// runs for long without a progress of its own (see heartbeat).
	streams bool
	parent  *command
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

// shippedModel returns the folder of the shipped model name (package
// models), for a command whose -model was omitted.
func shippedModel(name string) (string, error) {
	dir, err := models.Dir(name)
	if err != nil {
		return "", fmt.Errorf("no -model given, and this build ships no %s model: %w", name, err)
	}
	return dir, nil
}

// shippedRetriever fills an omitted -model with the shipped dual encoder
// and, then, when rerankByDefault, an omitted -reranker with the shipped
// reranker; -reranker shipped names the shipped reranker and -reranker
// none becomes "" (no reranking).
func shippedRetriever(model, reranker *string, rerankByDefault bool) error {
	if *model == "" {
		dir, err := shippedModel(models.Encoder)
		if err != nil {
			return err
		}
		*model = dir
		if *reranker == "" && rerankByDefault {
			*reranker = "shipped"
		}
	}
	switch *reranker {
	case "shipped":
		dir, err := shippedModel(models.Reranker)
		if err != nil {
			return err
		}
		*reranker = dir
	case "none":
		*reranker = ""
	}
	return nil
}
