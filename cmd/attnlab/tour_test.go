package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/internal/vec"
)

// A tourStep is a block of the README's tour: a command and the lines of
// its output the README shows.
type tourStep struct {
	command string   // as the README gives it, without "$ "
	want    []string // the output lines shown; "…" stands for what is left out
}

// tourSteps are the README's ```text blocks that begin "$ attnlab ": the
// command (its quoted text may span lines) and the lines shown after it.
func tourSteps(t *testing.T, readme string) []tourStep {
	t.Helper()
	var steps []tourStep
	for _, b := range regexp.MustCompile("(?ms)^```text\n(.*?)^```$").FindAllStringSubmatch(readme, -1) {
		lines := strings.Split(strings.TrimSuffix(b[1], "\n"), "\n")
		if !strings.HasPrefix(lines[0], "$ attnlab ") {
			continue
		}
		n := 1 // the command goes on while a quote is open
		cmd := strings.TrimPrefix(lines[0], "$ ")
		for strings.Count(cmd, `"`)%2 == 1 && n < len(lines) {
			cmd += "\n" + lines[n]
			n++
		}
		steps = append(steps, tourStep{cmd, lines[n:]})
	}
	return steps
}

// tourArgs are the words of a tour command (guide_test's shellWords),
// with $(go env GOROOT) replaced by its value; any other $ or shell
// operator is refused.
func tourArgs(t *testing.T, cmd string) []string {
	t.Helper()
	if strings.Contains(cmd, "$(go env GOROOT)") {
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "env", "GOROOT").Output()
		if err != nil {
			t.Skipf("go env GOROOT: %v", err)
		}
		cmd = strings.ReplaceAll(cmd, "$(go env GOROOT)", strings.TrimSpace(string(out)))
	}
	words, err := shellWords(cmd)
	if err != nil || strings.Contains(cmd, "$") || len(splitCommands(words)) != 1 || words[0] != "attnlab" {
		t.Fatalf("the tour's command %q is not one attnlab command in words and quotes (%v)", cmd, err)
	}
	return words[1:]
}

// squeeze trims a line and makes each run of blanks one space: tab
// stops and column widths are not what the tour shows.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// matches says whether line is pattern, where "…" in pattern stands for
// any text.
func matches(pattern, line string) bool {
	parts := strings.Split(squeeze(pattern), "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(squeeze(line))
}

// shows says where out (its lines) fails to show want, "" when it shows
// it: each line of want is a line of out, in order, one after the other,
// except that a line "…" stands for any number of lines.
func shows(want []string, out string) string {
	lines := strings.Split(out, "\n")
	at, gap := 0, false
	for _, w := range want {
		if w == "…" {
			gap = true
			continue
		}
		for at < len(lines) && gap && !matches(w, lines[at]) {
			at++
		}
		if at == len(lines) || !matches(w, lines[at]) {
			return w
		}
		at++
		gap = false
	}
	return ""
}

// TestREADMETour: each step of the README's five-minute tour shows what
// its command prints now. The lab's step is docs/lab.md's block, which
// package lab's tests check against a whole run (the command's tests run
// the lab on a few operations only); conform's runs where its adapter's
// runtime is installed; generate's and search's, whose digits are float32
// rounding, on the kernels of docs/model.md's samples.
func TestREADMETour(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := tourSteps(t, string(readme))
	if len(steps) < 6 {
		t.Fatalf("the README's tour has %d steps of $ attnlab …, want 6", len(steps))
	}
	samples, err := os.ReadFile("../../docs/model.md")
	if err != nil {
		t.Fatal(err)
	}
	kernels := regexp.MustCompile(`on the (\w+) kernels`).FindSubmatch(samples)
	for _, s := range steps {
		args := tourArgs(t, s.command)
		t.Run(args[0], func(t *testing.T) {
			switch args[0] {
			case "lab":
				return // TestHeadlineNumbers of package docs compares it with docs/lab.md
			case "conform":
				for i, a := range args {
					if a == "-exec" && i+1 < len(args) {
						if sh, ok := adapters.Lookup(args[i+1]); ok && sh.Missing() != "" {
							t.Skipf("%s: %s", args[i+1], sh.Missing())
						}
					}
				}
			case "generate", "search":
				if kernels == nil || string(kernels[1]) != vec.Path() {
					t.Skipf("the tour's %s was run on the kernels of docs/model.md's samples, not this process's %s", args[0], vec.Path())
				}
			}
			code, stdout, stderr := attnlab(t, args...)
			if code != 0 && code != 1 {
				t.Fatalf("%s: exit %d: %s", s.command, code, stderr)
			}
			if line := shows(s.want, stdout+stderr); line != "" {
				t.Errorf("the README's tour shows\n\t%s\nwhich %s no longer prints (exit %d):\n%s%s", line, s.command, code, stdout, stderr)
			}
		})
	}
}

// TestTourMatcher: the matcher finds what a step shows and misses what
// it does not.
func TestTourMatcher(t *testing.T) {
	out := "a 1.0 x\n\tb\n\nc  d\ne\n"
	for _, c := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"a … x", "b"}, true},
		{[]string{"…", "c d", "e"}, true},
		{[]string{"a 1.0 x", "…", "e"}, true},
		{[]string{"b"}, false},              // not the first line
		{[]string{"a 1.0 x", "c d"}, false}, // a line skipped without …
		{[]string{"…", "e", "c d"}, false},  // out of order
		{[]string{"…", "f"}, false},
	} {
		if got := shows(c.want, out) == ""; got != c.ok {
			t.Errorf("shows(%q) = %v, want %v", c.want, got, c.ok)
		}
	}
	if w := tourArgs(t, "attnlab search -src /x \"a b\nc\" -k 3"); strings.Join(w, "|") != "search|-src|/x|a b\nc|-k|3" {
		t.Errorf("tourArgs: %q", w)
	}
}
