package search

import (
	"context"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
)

// TestSiblings: a function's namesake in another package with a similar doc
// is its sibling, found among the training pairs too; a namesake in the
// same package, with an unrelated doc, with the same doc text or with the
// same code is not.
func TestSiblings(t *testing.T) {
	p := func(id, pkg, query, code string) retrieve.Pair {
		return retrieve.Pair{ID: id, Package: pkg, Query: query, Code: code}
	}
	eval := []retrieve.Pair{
		p("strings.Contains", "strings", "reports whether substr is within s.", "func Contains(s, substr string) bool { return Index(s, substr) >= 0 }"),
		p("strings.Fields", "strings", "splits the string s around each instance of one or more consecutive white space characters.", "func Fields(s string) []string { return nil }"),
		p("strings.Title", "strings", "returns a copy of the string with title case.", "func Title(s string) string { return s }"),
	}
	train := []retrieve.Pair{
		p("bytes.Contains", "bytes", "reports whether subslice is within b.", "func Contains(b, subslice []byte) bool { return Index(b, subslice) != -1 }"),
		p("bytes.Fields", "bytes", "interprets s as a sequence of UTF-8-encoded code points.", "func Fields(s []byte) [][]byte { return nil }"),
		p("strings.Builder.Title", "strings", "returns a copy of the string with title case.", "func (b *Builder) Title() string { return \"\" }"),
		p("text.Title", "text", "returns a copy of the string with title case.", "func Title(s string) string { return s }"),
		p("bytes.Index", "bytes", "reports whether substr is within s.", "func Index(b, sub []byte) int { return 0 }"),
	}
	got := siblings(eval, append(train, eval...))
	if len(got) != 1 {
		t.Fatalf("%d sibling items, want 1 (strings.Contains and bytes.Contains): %+v", len(got), got)
	}
	if it := got[0]; it.q1 != eval[0].Query || it.q2 != eval[0].Query || it.c1 != eval[0].Code || it.c2 != train[0].Code || it.d1 != eval[0].Query || it.d2 != train[0].Query {
		t.Errorf("item %+v: want strings.Contains's doc, its code and doc against bytes.Contains's", it)
	}
}

// TestContrastWithDocs: two functions whose code is the same up to a name
// and whose docs differ are told apart by the systems that read the docs
// (bm25f+doc, dense+doc) and not by BM25 over the code, which ties.
func TestContrastWithDocs(t *testing.T) {
	code := "func F(s string) int { return len(s) }"
	items := []item{
		{"counts the bytes of a string", code, "counts the bytes of a string", code, "counts the bytes of a string", "reports whether the string is empty"},
		{"reports whether the string is empty", code, "reports whether the string is empty", code, "reports whether the string is empty", "counts the bytes of a string"},
	}
	m := tinyEncoder(t)
	c, err := contrast(context.Background(), items, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Accuracy["bm25"] != 0 || c.Ties["bm25"] != 1 {
		t.Errorf("bm25 over the code: accuracy %g, ties %g; want every item a tie", c.Accuracy["bm25"], c.Ties["bm25"])
	}
	if c.Accuracy["bm25f+doc"] != 1 {
		t.Errorf("bm25f+doc: accuracy %g, want 1", c.Accuracy["bm25f+doc"])
	}
	if _, ok := c.Accuracy["dense+doc"]; !ok || c.Ties["dense+doc"] != 0 {
		t.Errorf("dense+doc: %v, ties %g; want it scored without ties", c.Accuracy, c.Ties["dense+doc"])
	}
}
