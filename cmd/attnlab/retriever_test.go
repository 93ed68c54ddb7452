package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
)

// retrieverTree writes 40 small packages of two documented functions each
// under a temporary folder and returns it.
func retrieverTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for i := range 40 {
		dir := filepath.Join(root, fmt.Sprintf("pkg%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		src := fmt.Sprintf(`package pkg%02d

// Count%[2]d returns how many widgets of kind %[2]d the store holds.
func Count%[2]d(s *Store) int { return len(s.widgets%[2]d) }

// Reset%[2]d removes every gadget of kind %[2]d from the store.
func Reset%[2]d(s *Store) { s.gadgets%[2]d = nil }
`, i, 100+i) // kinds of three digits: Terms drops one-character terms
		if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRetrieverDataThenEval(t *testing.T) {
	src := retrieverTree(t)
	out := filepath.Join(t.TempDir(), "data")
	code, stdout, stderr := attnlab(t, "retriever", "data", "-src", src, "-out", out)
	if code != 0 {
		t.Fatalf("data exited %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"40 .go files read", "80  kept", "split", "wrote "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("data output lacks %q:\n%s", want, stdout)
		}
	}
	total := 0
	for _, name := range retrieve.SplitNames {
		ps, err := retrieve.ReadJSONL(filepath.Join(out, name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		total += len(ps)
	}
	if total != 80 {
		t.Errorf("the splits hold %d pairs, want 80", total)
	}

	code, stdout, stderr = attnlab(t, "retriever", "eval", "-pairs", filepath.Join(out, "train.jsonl"), "-model", "none", "-systems", "bm25", "-workers", "1")
	if code != 0 {
		t.Fatalf("eval exited %d\n%s\n%s", code, stdout, stderr)
	}
	// Each query names its widgets or gadgets by kind number, which only its
	// own function holds: BM25 finds every gold first.
	row := regexp.MustCompile(`(?m)^\s*bm25\s+(\S+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)`).FindStringSubmatch(stdout)
	if row == nil || row[1] != "1.0000" || row[2] != "1.0000" || row[3] != "1.0000" {
		t.Errorf("want MRR@10, R@1 and CSN MRR of 1, got\n%s", stdout)
	}
}

func TestRetrieverErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"id":"a","query":"q","code":"c"}`+"\n"+`{"id":"b","code":"c"}`+"\n"), 0o644)
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	undocumented := t.TempDir()
	os.WriteFile(filepath.Join(undocumented, "x.go"), []byte("package x\n\nfunc F() {}\n"), 0o644)

	for _, c := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"retriever"}, 2, "missing subcommand"},
		{[]string{"retriever", "index"}, 2, `unknown subcommand "index"`},
		{[]string{"retriever", "eval"}, 2, "-data is required"},
		{[]string{"retriever", "eval", "-queries", bad}, 2, "-queries needs -src DIR"},
		{[]string{"retriever", "eval", "-queries", bad, "-src", dir, "-pairs", bad}, 2, "-queries and -data or -pairs: choose one"},
		{[]string{"retriever", "eval", "-pairs", bad, "-systems", "bm25,tfidf"}, 2, `unknown system "tfidf"`},
		{[]string{"retriever", "eval", "-pairs", bad, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"retriever", "eval", "-nosuch"}, 2, "flag provided but not defined"},
		{[]string{"retriever", "eval", "-pairs", bad, "-fusion", "max"}, 2, `-fusion "max": want blend or rrf`},
		{[]string{"retriever", "eval", "-pairs", bad, "-bm25-weight", "1"}, 2, "-bm25-weight 1: want a value in (0, 1)"},
		{[]string{"retriever", "eval", "-pairs", bad, "-bm25-weight", "-0.5"}, 2, "-bm25-weight -0.5: want a value in (0, 1)"},
		{[]string{"retriever", "eval", "-pairs", bad, "-bm25-weight", "0"}, 2, "-bm25-weight 0: want a value in (0, 1)"},
		{[]string{"retriever", "eval", "-queries", bad, "-src", dir, "-fields", "doc=-1"}, 2, "-fields \"doc=-1\": want finite weights"},
		{[]string{"retriever", "eval", "-queries", bad, "-src", dir, "-fields", "title=1"}, 2, "unknown field \"title\""},
		{[]string{"search", "-src", dir, "-bm25-weight", "NaN", "query"}, 2, "-bm25-weight NaN"},
		{[]string{"retriever", "eval", "-pairs", bad, "-fuse-weight", "1"}, 2, "-fuse-weight 1: want 0 (ranks) or a value in (0, 1)"},
		{[]string{"retriever", "data", "-val-frac", "0.6", "-test-frac", "0.5"}, 2, "sum of at most 1"},
		{[]string{"retriever", "data", "-val-frac", "-0.1"}, 2, "-val-frac -0.1"},
		{[]string{"retriever", "eval", "-pairs", bad}, 1, `bad.jsonl:2: missing field "query"`},
		{[]string{"retriever", "eval", "-pairs", empty}, 1, "holds no pairs"},
		{[]string{"retriever", "eval", "-pairs", filepath.Join(dir, "nosuch.jsonl")}, 1, "no such file"},
		{[]string{"retriever", "data", "-src", undocumented, "-out", filepath.Join(dir, "out")}, 1, "no documented function or method"},
	} {
		code, _, stderr := attnlab(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Errorf("a failed data run created its output folder")
	}
	if code, _, _ := attnlab(t, "retriever", "eval", "-h"); code != 0 {
		t.Errorf("eval -h: exit %d, want 0", code)
	}
}

// TestRetrieverTranslate: translate writes a table search and eval read,
// refuses to write over it without -force, and a table that is not one is
// refused by name.
func TestRetrieverTranslate(t *testing.T) {
	data := retrieverData(t)
	dir := t.TempDir()
	table := filepath.Join(dir, "t.tsv")
	code, stdout, stderr := attnlab(t, "retriever", "translate", "-data", data, "-out", table)
	if code != 0 || !strings.Contains(stdout, "query terms translated") {
		t.Fatalf("translate exited %d\n%s\n%s", code, stdout, stderr)
	}
	tab, err := retrieve.LoadTranslation(table)
	if err != nil {
		t.Fatal(err)
	}
	// "removes" is said of Reset, whose code sets gadgets to nil
	if ws := tab.To["removes"]; !slices.ContainsFunc(ws, func(w retrieve.WeightedTerm) bool { return w.Term == "nil" }) {
		t.Errorf("removes → %v, want nil among them", ws)
	}
	before, _ := os.ReadFile(table)
	if code, _, stderr := attnlab(t, "retriever", "translate", "-data", data, "-out", table); code != 2 || !strings.Contains(stderr, "-force replaces it") {
		t.Errorf("a second translate: exit %d, %q; want a refusal", code, stderr)
	}
	if after, _ := os.ReadFile(table); !bytes.Equal(before, after) {
		t.Error("the refused translate changed the table")
	}
	if code, _, stderr := attnlab(t, "retriever", "translate", "-data", data, "-out", table, "-force"); code != 0 {
		t.Errorf("-force: exit %d, %s", code, stderr)
	}
	if code, _, stderr := attnlab(t, "retriever", "translate", "-data", data, "-out", filepath.Join(dir, "none.tsv"), "-min-query", "1000"); code != 1 || !strings.Contains(stderr, "the table would be empty") {
		t.Errorf("a degenerate table: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.tsv")); err == nil {
		t.Error("a degenerate table was written")
	}
	notTable := filepath.Join(dir, "bad.tsv")
	os.WriteFile(notTable, []byte("sorts\tsort 1\n"), 0o644)
	pairs := filepath.Join(data, "train.jsonl")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"retriever", "eval", "-pairs", pairs, "-translation", notTable}, 1, "bad.tsv:1: not a term translation table"},
		{[]string{"retriever", "eval", "-pairs", pairs, "-translation", filepath.Join(dir, "nosuch.tsv")}, 1, "nosuch.tsv"},
		{[]string{"retriever", "eval", "-pairs", pairs, "-translate-alpha", "-1"}, 2, "-translate-alpha -1: want a finite value >= 0"},
		{[]string{"search", "-src", dir, "-translation", notTable, "q"}, 1, "bad.tsv:1"},
		{[]string{"retriever", "translate", "-data", data, "-out", table, "-min-lift", "1"}, 2, "-min-lift 1: want a value above 1"},
		{[]string{"retriever", "translate", "-out", table}, 2, "-data is required"},
		{[]string{"retriever", "translate", "-data", data, "-out", pairs, "-force"}, 2, "would overwrite the input"},
	} {
		code, _, stderr := attnlab(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
