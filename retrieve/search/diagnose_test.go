package search

import (
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
	if it := got[0]; it.q1 != eval[0].Query || it.q2 != eval[0].Query || it.c1 != eval[0].Code || it.c2 != train[0].Code {
		t.Errorf("item %+v: want strings.Contains's doc, its code against bytes.Contains's", it)
	}
}
