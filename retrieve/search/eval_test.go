package search

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// TestEvaluateDropsDuplicatePairs: a file whose pairs repeat documents
// (a whole pair again under a new id, or the same code up to white space
// under another query) is measured on its unique documents, the first pair of each, with
// one warning counting the copies; the measures equal those of the file
// without the copies.
func TestEvaluateDropsDuplicatePairs(t *testing.T) {
	var pairs []retrieve.Pair
	for i := range 14 {
		pairs = append(pairs, retrieve.Pair{
			ID:    fmt.Sprintf("p.F%d", i),
			Query: fmt.Sprintf("returns the %s of widget %d", []string{"size", "name", "colour"}[i%3], i),
			Code:  fmt.Sprintf("func F%d(w Widget) int { return w.%s + %d }", i, []string{"Size", "Name", "Colour"}[i%3], i),
		})
	}
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.jsonl")
	if err := retrieve.WriteJSONL(clean, pairs); err != nil {
		t.Fatal(err)
	}
	dup := append([]retrieve.Pair(nil), pairs...)
	for _, i := range []int{3, 7} { // whole pairs again, under new ids (a repeated id is a format error)
		p := pairs[i]
		p.ID += ".copy"
		dup = append(dup, p)
	}
	again := pairs[5]
	again.ID, again.Query, again.Code = "q.G5", "another question", strings.ReplaceAll(again.Code, " ", "\n\t ")
	dup = append(dup[:9], append([]retrieve.Pair{again}, dup[9:]...)...) // the code of pair 5, white space aside, under another query
	dupped := filepath.Join(dir, "dup.jsonl")
	if err := retrieve.WriteJSONL(dupped, dup); err != nil {
		t.Fatal(err)
	}
	eval := func(data string) (*EvalResult, []string) {
		var warned []string
		res, err := Evaluate(context.Background(), EvalOptions{Data: data, Systems: []string{"bm25"}, Depth: 5,
			EvalOptions: retrieve.EvalOptions{Candidates: 10, Seed: 1, Workers: 1}},
			train.Events{Warning: func(m string) { warned = append(warned, m) }})
		if err != nil {
			t.Fatal(err)
		}
		return res, warned
	}
	want, warned := eval(clean)
	if len(warned) != 0 || want.Queries != 14 {
		t.Fatalf("clean file: %d queries, warnings %q", want.Queries, warned)
	}
	got, warned := eval(dupped)
	w := dupped + ": 3 of 17 pairs repeat the code of an earlier pair (up to white space); measuring the 14 unique documents"
	if len(warned) != 1 || !strings.HasPrefix(warned[0], w) || len(got.Warnings) != 1 {
		t.Errorf("warnings %q (result %q), want one beginning %q", warned, got.Warnings, w)
	}
	if got.Queries != 14 {
		t.Errorf("%d queries measured, want the 14 unique", got.Queries)
	}
	g, c := got.Rows[0].Metrics, want.Rows[0].Metrics
	if g.Queries != c.Queries || g.Docs != c.Docs || g.MRR10 != c.MRR10 || g.Recall1 != c.Recall1 || g.NDCG10 != c.NDCG10 || g.CSNMRR != c.CSNMRR {
		t.Errorf("bm25 on the file with copies: %+v, on the clean file %+v", g, c)
	}
}
