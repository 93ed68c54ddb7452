package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedDefaults: without -model, generate and lm-eval use the shipped
// language model, search and retriever eval the shipped encoder and
// reranker.
func TestShippedDefaults(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, stdout, stderr := attnlab(t, "generate", "-prompt", "// Max returns the larger of a and b.\nfunc Max(a, b int) int {", "-n", "8", "-temp", "0")
	if code != 0 || !strings.HasPrefix(stdout, "// Max returns") || len(stdout) <= len("// Max returns the larger of a and b.\nfunc Max(a, b int) int {\n") {
		t.Errorf("generate: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a.go"), []byte(`package a

// Max returns the larger of a and b.
func Max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Join concatenates the strings of s with sep between them.
func Join(s []string, sep string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += sep
		}
		out += x
	}
	return out
}
`), 0o644)
	code, stdout, stderr = attnlab(t, "lm-eval", "-src", src, "-no-compressors")
	if code != 0 || !strings.Contains(stdout, "bits/byte") {
		t.Errorf("lm-eval: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, rr := range []string{"", "shipped"} {
		code, stdout, stderr = attnlab(t, "search", "-src", src, "-cache", "", "-quiet", "-reranker", rr, "concatenate strings with a separator")
		if code != 0 || !strings.Contains(strings.SplitN(stdout, "\n", 2)[0], "Join") {
			t.Errorf("search -reranker %q: exit %d, stdout %q, stderr %q", rr, code, stdout, stderr)
		}
	}
	data := filepath.Join(t.TempDir(), "pairs.jsonl")
	os.WriteFile(data, []byte(`{"id":"a.Max","query":"returns the larger of a and b.","code":"func Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}","package":"a","file":"a.go","line":4}
{"id":"a.Join","query":"concatenates the strings of s with sep between them.","code":"func Join(s []string, sep string) string {\n\treturn strings.Join(s, sep)\n}","package":"a","file":"a.go","line":12}
`), 0o644)
	code, stdout, stderr = attnlab(t, "retriever", "eval", "-pairs", data, "-quiet")
	for _, row := range []string{"bm25", "dense", "hybrid", "hybrid+rerank"} {
		if code != 0 || !strings.Contains(stdout, "\n"+strings.Repeat(" ", max(0, 14-len(row)))+row+" ") && !strings.Contains(stdout, " "+row+" ") {
			t.Errorf("retriever eval: no %s row; exit %d, stdout %q, stderr %q", row, code, stdout, stderr)
		}
	}
	code, stdout, _ = attnlab(t, "retriever", "eval", "-pairs", data, "-model", "none", "-quiet")
	if code != 0 || strings.Contains(stdout, "dense") || !strings.Contains(stdout, "bm25") {
		t.Errorf("retriever eval -model none: exit %d, stdout %q", code, stdout)
	}
}

// TestGenerateHealsThePrompt: the shipped language model learned "{\n\t" as
// one token, so "func main() {" ends inside a token it knows; healed, the
// greedy continuation begins on a new line, as Go does; unhealed, the
// model reads "{" as the rare token it is and does not. Both print the
// prompt as given.
func TestGenerateHealsThePrompt(t *testing.T) {
	const prompt = "func main() {"
	for _, c := range []struct {
		heal    string
		newline bool
	}{{"-heal=true", true}, {"-heal=false", false}} {
		code, stdout, stderr := attnlab(t, "generate", "-prompt", prompt, "-temp", "0", "-n", "4", c.heal)
		if code != 0 {
			t.Fatalf("generate %s: exit %d\n%s", c.heal, code, stderr)
		}
		if !strings.HasPrefix(stdout, prompt) {
			t.Fatalf("generate %s printed %q, not beginning with the prompt", c.heal, stdout)
		}
		if got := strings.HasPrefix(stdout[len(prompt):], "\n"); got != c.newline {
			t.Errorf("generate %s: continuation %q; want a new line first: %v", c.heal, stdout[len(prompt):], c.newline)
		}
	}
}
