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
// (or "attnlab help <command>") for one command's description and flags;
// "attnlab version" (or -version) says which build this is.
//
// Exit statuses: 0 success; 1 failure (a check failed, bad data, an I/O
// error); 2 usage error; 3 an adapter under test failed (conform); 130 and
// 143 interrupted by SIGINT and SIGTERM. A second signal ends the process
// at once, unless a save is in progress (a checkpoint, or a training run
// that saves when stopped): then it waits for the save, and only a third
// signal ends the process at once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		cancel(interrupted{s})
		s = <-sigs // a second signal: the user insists, or a runtime repeats itself
		if atomicfile.SavesInProgress() > 0 {
			fmt.Fprintf(os.Stderr, "attnlab: %v again: finishing the save in progress first (a third signal exits at once)\n", s)
			go func() { <-sigs; os.Exit(interrupted{s}.status()) }()
			atomicfile.WaitSaves()
		}
		fmt.Fprintf(os.Stderr, "attnlab: %v again: exiting now\n", s)
		os.Exit(interrupted{s}.status())
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printCommands(stdout)
		return 2
	}
	name, args := args[0], args[1:]
	if name == "-version" || name == "--version" {
		name = "version"
	}
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
		if !c.streams {
			stop := heartbeat(c.fullName())
			err = runC(ctx, pos, stdout)
			stop()
		} else {
			err = runC(ctx, pos, stdout)
		}
	}
	return exitStatus(ctx, c, err, stderr)
}

// writeJSON prints v as -json does: indented by two spaces, one object.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
