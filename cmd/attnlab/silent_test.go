package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSearchQueries: a query the encoder reads nothing of is an error, not
// the same three hits for any such query; flags may follow the query.
func TestSearchQueries(t *testing.T) {
	data := retrieverData(t)
	out := filepath.Join(t.TempDir(), "run")
	trainRetriever(t, data, out)
	index := filepath.Join(out, "index")
	for _, q := range []string{"!!!", "a b c"} {
		code, stdout, stderr := attnlab(t, "search", "-index", index, q)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "nothing the encoder reads") {
			t.Errorf("search %q: exit %d, stdout %q, stderr %q", q, code, stdout, stderr)
		}
	}
	code, stdout, stderr := attnlab(t, "search", "-index", index, "widgets", "store", "-k", "2")
	if rows := strings.Split(strings.TrimSpace(stdout), "\n"); code != 0 || len(rows) != 2 {
		t.Errorf("flags after the query: exit %d, %d rows\n%s%s", code, len(rows), stdout, stderr)
	}
	// after "--" a word that looks like a flag is part of the query
	if code, _, stderr := attnlab(t, "search", "-index", index, "--", "-k", "widgets"); code != 0 {
		t.Errorf("query after --: exit %d %s", code, stderr)
	}
}

// TestRetrieverSmallData: a split that asked for pairs and got none, and an
// evaluation over 10 documents or fewer, come with a warning; training on a
// dataset without validation pairs says so.
func TestRetrieverSmallData(t *testing.T) {
	one := t.TempDir()
	os.MkdirAll(filepath.Join(one, "pkg"), 0o755)
	src := "package pkg\n\n// Count returns how many widgets the store holds today.\nfunc Count(s []int) int { return len(s) }\n\n// Reset removes every gadget from the store at once.\nfunc Reset(s []int) []int { return s[:0] }\n"
	os.WriteFile(filepath.Join(one, "pkg", "p.go"), []byte(src), 0o644)
	out := filepath.Join(t.TempDir(), "d")
	code, stdout, stderr := attnlab(t, "retriever", "data", "-src", one, "-out", out, "-quiet")
	if code != 0 || strings.Count(stderr, "warning:") != 2 {
		t.Errorf("one package: exit %d, want two warnings (two empty splits)\n%s%s", code, stdout, stderr)
	}
	// every pair in one split, when asked
	all := filepath.Join(t.TempDir(), "all")
	if code, _, stderr := attnlab(t, "retriever", "data", "-src", retrieverTree(t), "-out", all, "-val-frac", "0", "-test-frac", "1", "-quiet"); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("-test-frac 1: exit %d %s", code, stderr)
	}
	if n := len(readPairs(t, filepath.Join(all, "test.jsonl"))); n != 80 {
		t.Errorf("-val-frac 0 -test-frac 1: %d test pairs, want all 80", n)
	}
	for _, f := range []string{"train.jsonl", "val.jsonl"} {
		if n := len(readPairs(t, filepath.Join(all, f))); n != 0 {
			t.Errorf("%s holds %d pairs, want 0", f, n)
		}
	}
	// evaluating 2 documents: perfect scores, and a warning that says why
	code, stdout, stderr = attnlab(t, "retriever", "eval", "-pairs", filepath.Join(out, "train.jsonl"), "-model", "none")
	if code != 0 || !strings.Contains(stderr, "warning:") || !strings.Contains(stderr, "top 10") {
		t.Errorf("eval of 2 pairs: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestProgressLinesWithoutATerminal: with stderr not a terminal (a log, CI)
// a long run still reports where it is, a line at a time.
func TestProgressLinesWithoutATerminal(t *testing.T) {
	defer func(d time.Duration) { logEvery = d }(logEvery)
	logEvery = 0
	src, out := tinyCorpus(t), filepath.Join(t.TempDir(), "run")
	args := trainArgs(src, out, "-steps", "3")
	for i, a := range args {
		if a == "-quiet" {
			args = append(args[:i:i], args[i+1:]...)
			break
		}
	}
	code, stdout, stderr := attnlab(t, args...)
	if code != 0 || strings.Count(stderr, "training ") != 3 || !strings.Contains(stderr, "training 3/3 loss") {
		t.Errorf("exit %d; want a progress line per step on stderr, got:\n%s\n%s", code, stderr, stdout)
	}
}
