package main

import (
	"flag"
	"strings"
	"testing"
)

// allCommands lists every command and subcommand by the words that call it.
func allCommands() [][]string {
	var out [][]string
	for _, c := range commands {
		out = append(out, []string{c.name})
		for _, s := range c.subs {
			out = append(out, []string{c.name, s.name})
		}
	}
	return out
}

// TestEveryCommandHasHelp: -h and help print a description with an example
// to stdout and exit 0, the same text both ways, and no flag's default
// panics on the way (the flag package prints such a panic and goes on).
func TestEveryCommandHasHelp(t *testing.T) {
	for _, words := range allCommands() {
		name := strings.Join(words, " ")
		code, stdout, stderr := attnlab(t, append(words, "-h")...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: attnlab "+name) || !strings.Contains(stdout, "Example: attnlab ") || strings.Contains(stdout, "panic") {
			t.Errorf("%s -h: exit %d, stderr %q, stdout:\n%s", name, code, stderr, stdout)
		}
		code, help, _ := attnlab(t, append([]string{"help"}, words...)...)
		if code != 0 || help != stdout {
			t.Errorf("help %s: exit %d, and not the text of -h", name, code)
		}
		if c, _ := find(commands, words); c != nil && len(c.subs) == 0 && !strings.Contains(stdout, "Flags:") && c.define != nil {
			fs, _ := c.flagSet()
			n := 0
			fs.VisitAll(func(*flag.Flag) { n++ })
			if n > 0 {
				t.Errorf("%s -h lists no flags", name)
			}
		}
	}
}

// TestUsageErrorIsOneLine: a mistyped flag is one line naming it and one
// pointing at -h, not the whole flag list.
func TestUsageErrorIsOneLine(t *testing.T) {
	for _, words := range allCommands() {
		c, _ := find(commands, words)
		if len(c.subs) > 0 {
			continue
		}
		code, stdout, stderr := attnlab(t, append(words, "-no-such-flag")...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || stdout != "" || len(lines) != 2 || !strings.Contains(lines[0], "-no-such-flag") || !strings.Contains(lines[1], "attnlab "+strings.Join(words, " ")+" -h") {
			t.Errorf("%v -no-such-flag: exit %d, stdout %q, stderr %q", words, code, stdout, stderr)
		}
	}
	code, stdout, _ := attnlab(t)
	if code != 2 || !strings.Contains(stdout, "commands:") {
		t.Errorf("no arguments: exit %d, stdout %q", code, stdout)
	}
}
