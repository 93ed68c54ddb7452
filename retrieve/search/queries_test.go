package search

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/train"
)

// TestEvaluateQueries: each query searches its root; the gold is found by
// file and name (a build-tag twin's file names the function indexed in its
// place); a query worded as a doc comment finds its function through the
// doc (bm25-doc+code, bm25f) and not through the code alone (bm25-code);
// the measures follow the ranks.
func TestEvaluateQueries(t *testing.T) {
	src := t.TempDir()
	for name, text := range fieldTree {
		p := filepath.Join(src, "repo", filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	model := filepath.Join(t.TempDir(), "enc")
	if err := tinyEncoder(t).Save(model); err != nil {
		t.Fatal(err)
	}
	queries := filepath.Join(t.TempDir(), "q.jsonl")
	os.WriteFile(queries, []byte(`{"query": "widget sparkle", "root": "repo", "path": "a/x.go", "func": "Frob"}
{"query": "returns two", "root": "repo", "path": "a/t_other.go", "func": "Twin"}
`), 0o644)
	res, err := EvaluateQueries(context.Background(), QueryEvalOptions{Queries: queries, Src: src, Model: model, Depth: 5}, train.Events{})
	if err != nil {
		t.Fatal(err)
	}
	if res.N != 2 || len(res.Roots) != 1 || res.Roots[0].Funcs != 3 || len(res.Rows) != 6 {
		t.Fatalf("result %+v: want 2 queries, one root of 3 functions, the 6 systems without a reranker", res)
	}
	for _, name := range []string{"bm25-doc+code", "bm25f"} {
		if r, _ := res.Row(name); r.Ranks[0] != 1 || r.Ranks[1] != 1 || r.MRR10 != 1 || r.Hit1 != 1 {
			t.Errorf("%s: ranks %v, MRR@10 %g, hit@1 %g; want both golds first", name, r.Ranks, r.MRR10, r.Hit1)
		}
	}
	if r, _ := res.Row("bm25-code"); r.Ranks[0] != 0 || r.Hit10 > 0.5 {
		t.Errorf("bm25-code found a function by words of its doc alone: ranks %v", r.Ranks)
	}
	for _, r := range res.Rows {
		if r.Hit1 > r.Hit3 || r.Hit3 > r.Hit10 || r.MRR10 > r.Hit10 || r.MRR10 < r.Hit1 {
			t.Errorf("%s: hit@1 %g, hit@3 %g, hit@10 %g, MRR@10 %g are not ordered", r.System, r.Hit1, r.Hit3, r.Hit10, r.MRR10)
		}
	}

	// a gold the root does not hold, and a malformed line, are errors
	// naming the query
	for _, c := range []struct{ line, want string }{
		{`{"query": "widget sparkle", "root": "repo", "path": "a/x.go", "func": "Frobb"}`, "q2.jsonl:1 (\"widget sparkle\")"},
		{`{"query": "widget sparkle", "root": "repo", "path": "a/x.go"}`, "q2.jsonl:1: want a query, a path and a func"},
		{`{"query": "x", "path": "a/x.go", "func": "F", "extra": 1}`, "q2.jsonl:1: json: unknown field"},
	} {
		bad := filepath.Join(t.TempDir(), "q2.jsonl")
		os.WriteFile(bad, []byte(c.line+"\n"), 0o644)
		if _, err := EvaluateQueries(context.Background(), QueryEvalOptions{Queries: bad, Src: src, Model: model, Depth: 5}, train.Events{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.line, err, c.want)
		}
	}
}
