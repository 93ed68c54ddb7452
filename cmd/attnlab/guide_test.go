package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/adapters"
	"github.com/attnlab/attnlab/conform"
)

// The guide to conform, whose commands TestGuide runs or checks.
const guidePath = "../../docs/conform-your-kernel.md"

// guideBlock is a ```sh block of the guide with the marker before it:
//
//	<!-- guide: run -->                 run as written, exit status 0
//	<!-- guide: run, exit 1 -->         run, exit status 1 wanted
//	<!-- guide: run, needs node -->     run where node is installed (node, gcc, python3-numpy)
//	<!-- guide: check -->               not run (a long build, a runtime CI may lack): flags, adapter names and paths checked
//
// A ```text block after <!-- guide: output --> lists lines the previous
// block's standard output must contain (spaces compared loosely).
type guideBlock struct {
	line   int // of the opening fence
	run    bool
	exit   int
	needs  []string
	script string
	output []string
}

var guideMarker = regexp.MustCompile(`^<!-- guide: (.*) -->$`)

// guideBlocks parses the guide's marked blocks.
func guideBlocks(doc string) ([]guideBlock, error) {
	lines := strings.Split(doc, "\n")
	var blocks []guideBlock
	marker := "" // the marker of the next fence, if it comes before any text
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := guideMarker.FindStringSubmatch(l); m != nil {
			marker = m[1]
			continue
		}
		if !strings.HasPrefix(l, "```") {
			if strings.TrimSpace(l) != "" {
				marker = ""
			}
			continue
		}
		lang, start := strings.TrimPrefix(l, "```"), i
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the block never closes", start+1)
		}
		switch {
		case lang == "sh":
			b := guideBlock{line: start + 1, script: strings.Join(body, "\n") + "\n"}
			parts := strings.Split(marker, ", ")
			switch parts[0] {
			case "run":
				b.run = true
			case "check":
			default:
				return nil, fmt.Errorf("line %d: a sh block without <!-- guide: run --> or <!-- guide: check --> before it", start+1)
			}
			for _, p := range parts[1:] {
				switch f := strings.Fields(p); {
				case len(f) == 2 && f[0] == "exit" && b.run:
					n, err := strconv.Atoi(f[1])
					if err != nil {
						return nil, fmt.Errorf("line %d: marker %q", start+1, marker)
					}
					b.exit = n
				case len(f) == 2 && f[0] == "needs" && b.run:
					b.needs = append(b.needs, f[1])
				default:
					return nil, fmt.Errorf("line %d: marker %q: unknown %q", start+1, marker, p)
				}
			}
			blocks = append(blocks, b)
		case marker == "output":
			if len(blocks) == 0 || !blocks[len(blocks)-1].run {
				return nil, fmt.Errorf("line %d: an output block after no run block", start+1)
			}
			blocks[len(blocks)-1].output = body
		case marker != "":
			return nil, fmt.Errorf("line %d: marker %q before a %q block", start+1, marker, lang)
		}
		marker = ""
	}
	return blocks, nil
}

// guideNeeds says why what a block needs is not here, or "".
func guideNeeds(need string) string {
	switch need {
	case "node", "gcc":
		if _, err := exec.LookPath(need); err != nil {
			return need + " is not installed"
		}
	case "python3-numpy":
		if err := exec.Command(adapters.Python, "-c", "import numpy").Run(); err != nil {
			return adapters.Python + " has no numpy: install Debian's python3-numpy"
		}
	default:
		return "unknown need " + need
	}
	return ""
}

// repoRoot is a new folder that looks like the repository's root to go
// and to the guide's commands (a link to each of its entries), so that
// what they write stays out of the checkout.
func repoRoot(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(root, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestGuide runs the guide's commands marked to run, in order, in one
// folder that looks like the repository's root, with this test binary as
// attnlab on PATH, and wants each block's exit status and output lines;
// it checks the others' attnlab flags, adapter names and paths. It also
// wants the guide to name every field of the card, quote the verdict's
// rule as conform states it, and link only to files that exist.
func TestGuide(t *testing.T) {
	data, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	blocks, err := guideBlocks(doc)
	if err != nil {
		t.Fatalf("%s: %v", guidePath, err)
	}
	ran := 0
	for _, b := range blocks {
		if b.run {
			ran++
		}
	}
	if ran < 5 {
		t.Fatalf("%d blocks marked to run, want the guide's walk-through (5 or more)", ran)
	}

	t.Run("card fields", func(t *testing.T) {
		card := reflect.TypeFor[conform.Card]()
		for i := range card.NumField() {
			key, _, _ := strings.Cut(card.Field(i).Tag.Get("json"), ",")
			if key != "notes" && key != "not_measured" && !strings.Contains(doc, "(`"+key+"`)") {
				t.Errorf("the guide does not explain the card field %s (as (`%s`))", key, key)
			}
		}
		for _, key := range []string{"notes", "not_measured", "why", "not_established", "not_covered", "rule"} {
			if !strings.Contains(doc, "`"+key+"`") {
				t.Errorf("the guide does not name the report's %s", key)
			}
		}
		if !strings.Contains(strings.Join(strings.Fields(doc), " "), conform.Rule) {
			t.Errorf("the guide does not quote the verdict's rule as conform.Rule states it:\n%s", conform.Rule)
		}
	})

	t.Run("links", func(t *testing.T) {
		for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(doc, -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(guidePath), m[1])); err != nil {
				t.Errorf("link to %s: %v", m[1], err)
			}
		}
	})

	root := repoRoot(t)
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nATTNLAB_TEST_CLI=1 exec %s \"$@\"\n", strconv.Quote(self))
	if err := os.WriteFile(filepath.Join(bin, "attnlab"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	for _, b := range blocks {
		name := fmt.Sprintf("line %d", b.line)
		if !b.run {
			t.Run(name+" check", func(t *testing.T) {
				for _, bad := range checkGuideBlock(b.script, root) {
					t.Error(bad)
				}
			})
			continue
		}
		t.Run(name, func(t *testing.T) {
			for _, n := range b.needs {
				if why := guideNeeds(n); why != "" {
					t.Skipf("%s skipped: %s", strings.TrimSpace(b.script), why)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", b.script)
			cmd.Dir, cmd.Env = root, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			if err != nil && code < 0 {
				t.Fatalf("%s: %v\n%s", b.script, err, stderr.String())
			}
			if code != b.exit {
				t.Fatalf("%s: exit %d, the guide says %d\n%s%s", b.script, code, b.exit, stdout.String(), stderr.String())
			}
			got := strings.Join(strings.Fields(stdout.String()), " ")
			for _, l := range b.output {
				if want := strings.Join(strings.Fields(l), " "); want != "" && !strings.Contains(got, want) {
					t.Errorf("%s: the output lacks %q, which the guide shows:\n%s", strings.TrimSpace(b.script), l, stdout.String())
				}
			}
		})
	}
}

// checkGuideBlock checks a block that is not run: bash parses it, each
// attnlab command parses its flags and names a shipped adapter or a
// program, and every relative path it names exists in the repository. It
// returns what is wrong.
func checkGuideBlock(script, root string) []string {
	if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
		return []string{fmt.Sprintf("bash -n: %v: %s", err, out)}
	}
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		words, err := shellWords(line)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", line, err))
			continue
		}
		dirs := []string{root}
		for _, cmd := range splitCommands(words) {
			for i, w := range cmd {
				if (w == "cd" || w == "-C") && i+1 < len(cmd) {
					dirs = append(dirs, filepath.Join(root, cmd[i+1]))
				}
			}
			if cmd[0] == "attnlab" {
				bad = append(bad, checkAttnlab(cmd[1:], root)...)
				continue
			}
			for _, w := range cmd {
				bad = append(bad, checkPath(w, dirs)...)
			}
		}
	}
	return bad
}

// checkAttnlab checks the arguments of an attnlab command: its flags
// parse, and -exec and -against name a shipped adapter or a command whose
// program is an interpreter or a path that exists.
func checkAttnlab(args []string, root string) []string {
	line := "attnlab " + strings.Join(args, " ")
	c, rest := find(commands, args)
	if c == nil {
		return []string{line + ": no such attnlab command"}
	}
	fs, _ := c.flagSet()
	if _, err := parseFlags(fs, rest, c.positional); err != nil {
		return []string{fmt.Sprintf("%s: %v", line, err)}
	}
	var bad []string
	for _, f := range []string{"exec", "against"} {
		fl := fs.Lookup(f)
		if fl == nil || fl.Value.String() == "" {
			continue
		}
		v := fl.Value.String()
		if _, ok := adapters.Lookup(v); ok {
			continue
		}
		words, err := shellWords(v)
		switch {
		case err != nil || len(words) == 0:
			bad = append(bad, fmt.Sprintf("%s: -%s %q: %v", line, f, v, err))
			continue
		case filepath.IsAbs(words[0]) || words[0] == "node" || words[0] == "go":
		case !strings.Contains(words[0], "/"):
			bad = append(bad, fmt.Sprintf("%s: -%s %q: neither a shipped adapter (attnlab conform -list) nor a program's path", line, f, v))
		}
		for _, w := range words {
			bad = append(bad, checkPath(w, []string{root})...)
		}
	}
	return bad
}

var relativePath = regexp.MustCompile(`^(\./)?[a-z][a-z0-9_.-]*(/[A-Za-z0-9_.-]+)+/?$|^\./[A-Za-z0-9_.-]+$`)

// checkPath wants w, when it looks like a relative path into the
// repository, to exist in one of dirs.
func checkPath(w string, dirs []string) []string {
	if !relativePath.MatchString(w) {
		return nil
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, w)); err == nil {
			return nil
		}
	}
	return []string{w + " does not exist in the repository"}
}

// shellWords splits a line as sh does, for the forms the guide uses: words,
// '…' and "…" quoting, and the operators ( ) && || ; | as words of their
// own; a # outside quotes starts a comment.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '#' && !inWord:
			flush()
			return words, nil
		case ch == '\'' || ch == '"':
			j := strings.IndexByte(line[i+1:], ch)
			if j < 0 {
				return nil, fmt.Errorf("unclosed %c", ch)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case strings.IndexByte("()&|;", ch) >= 0:
			flush()
			op := string(ch)
			if i+1 < len(line) && (ch == '&' || ch == '|') && line[i+1] == ch {
				op += string(ch)
				i++
			}
			words = append(words, op)
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// splitCommands splits words at the shell's operators.
func splitCommands(words []string) [][]string {
	var cmds [][]string
	var cur []string
	for _, w := range words {
		switch w {
		case "(", ")", "&&", "||", ";", "|", "&":
			if len(cur) > 0 {
				cmds = append(cmds, cur)
			}
			cur = nil
		default:
			cur = append(cur, w)
		}
	}
	if len(cur) > 0 {
		cmds = append(cmds, cur)
	}
	return cmds
}

// TestGuideBlocksRejectsUnmarked: a sh block without a marker, an unknown
// marker and an output block after no run are errors, so no command of the
// guide goes unchecked; and the checks of a block not run find what is
// wrong in one.
func TestGuideBlocksRejectsUnmarked(t *testing.T) {
	for _, doc := range []string{
		"text\n\n```sh\nattnlab lab\n```\n",
		"<!-- guide: run -->\ntext between\n```sh\nattnlab lab\n```\n",
		"<!-- guide: sometimes -->\n```sh\nattnlab lab\n```\n",
		"<!-- guide: run, needs -->\n```sh\nattnlab lab\n```\n",
		"<!-- guide: output -->\n```text\nok\n```\n",
		"<!-- guide: run -->\n```sh\nattnlab lab\n",
	} {
		if _, err := guideBlocks(doc); err == nil {
			t.Errorf("no error for\n%s", doc)
		}
	}
	blocks, err := guideBlocks("<!-- guide: run, exit 1, needs node -->\n```sh\na\nb\n```\n\n<!-- guide: output -->\n```text\nx\n```\n<!-- guide: check -->\n```sh\nc\n```\n")
	want := []guideBlock{{line: 2, run: true, exit: 1, needs: []string{"node"}, script: "a\nb\n", output: []string{"x"}}, {line: 12, script: "c\n"}}
	if err != nil || !reflect.DeepEqual(blocks, want) {
		t.Errorf("got %+v, %v\nwant %+v", blocks, err, want)
	}
	// the checks of a block that is not run catch a misspelt adapter, a
	// bad flag, a path that is not there and a shell syntax error
	root, _ := filepath.Abs("../..")
	for script, want := range map[string]string{
		"attnlab conform -exec torch-compsite\n":                           "neither a shipped adapter",
		"attnlab conform -exec torch-composite -contrac top-left\n":        "-contrac",
		"attnlab conform -exec ./conform-gone\n":                           "./conform-gone does not exist",
		"(cd adapters/ggml && go run ./cmd/buidl)\n":                       "./cmd/buidl does not exist",
		"/usr/bin/python3 examples/conform-python/numpy_attention.pi\n":    "numpy_attention.pi does not exist",
		"attnlab conform -exec \"node examples/conform-node/nosuch.js\"\n": "nosuch.js does not exist",
		"attnlab conform -exec ggml-softmax (\n":                           "bash -n",
		"attnlab nosuch\n":                                                 "no such attnlab command",
	} {
		if bad := checkGuideBlock(script, root); len(bad) == 0 || !strings.Contains(bad[0], want) {
			t.Errorf("%q: %q, want %q", script, bad, want)
		}
	}
	for _, script := range []string{
		"attnlab conform -exec ggml-softmax -against ggml-flash-attn\n",
		"(cd adapters/ggml && go run ./cmd/build)\n",
		"attnlab conform -exec \"/usr/bin/python3 examples/conform-python/numpy_attention.py\" -json\n",
	} {
		if bad := checkGuideBlock(script, root); len(bad) > 0 {
			t.Errorf("%q: %q, want no complaint", script, bad)
		}
	}
	words, err := shellWords(`(cd adapters/ggml && go run ./cmd/build) # built once`)
	if w := []string{"(", "cd", "adapters/ggml", "&&", "go", "run", "./cmd/build", ")"}; err != nil || !reflect.DeepEqual(words, w) {
		t.Errorf("shellWords: %q, %v; want %q", words, err, w)
	}
}
