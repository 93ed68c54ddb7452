package dense

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// TestShortQuery: a doc comment (its name stripped) is cut to its first
// sentence and clause, lower-cased, without punctuation, links, one-letter
// parameter names, a leading "returns" or "reports whether", function
// words at either end, and content words beyond the limit.
func TestShortQuery(t *testing.T) {
	for _, c := range []struct {
		q     string
		words int
		want  string
	}{
		{"returns the cube root of x.", 6, "cube root"},
		{"reports whether sp is a valid sparse map. It does not matter whether sp represents data fragments.", 6, "sp is a valid sparse map"},
		{"closes the [Writer], flushing any pending output.", 6, "closes the writer"},
		{"is an explicit timeout for the operation, e.g. \"1000\", \"1s\" or \"500ms\".", 6, "explicit timeout for the operation"},
		{"sets the type of a node (i.e. its kind). Other text.", 6, "sets the type of a node"},
		{"parses the version in a go.mod file: v1.2 or later", 6, "parses the version in a go.mod file"},
		{"returns true if resource exists", 6, "resource exists"},
		{"decodes the base64 text of the given reader into the destination buffer without allocating", 3, "decodes the base64 text"},
		{"a message to the local systemd journal. vars is a map of journald fields.", 6, "message to the local systemd journal"},
		{"See https://example.com/doc.html", 6, "see"},
		{"https://example.com/doc.html", 6, ""},
		{"Returns (RuneError, 1) when invalid", 6, "runeerror 1 when invalid"}, // a clause of one word: the sentence
		// at most 1.5·words words in all, even of function words
		{"determines whether the file with the given name in the given directory should be included", 6, "determines whether the file with the given name"},
	} {
		if got := ShortQuery(c.q, c.words); got != c.want {
			t.Errorf("ShortQuery(%q, %d) = %q, want %q", c.q, c.words, got, c.want)
		}
	}
}

// TestShortenQueries: the share of pairs cut follows p, the draws are
// those of the seed (the same twice, others with another seed), the input
// is left as it was, and p 0 cuts none.
func TestShortenQueries(t *testing.T) {
	var ps []retrieve.Pair
	for i := range 400 {
		ps = append(ps, retrieve.Pair{ID: fmt.Sprint(i), Query: fmt.Sprintf("returns the number %d of widgets in the given box.", i), Code: "func F() {}"})
	}
	orig := slices.Clone(ps)
	a, na := ShortenQueries(ps, 0.5, 6, 7)
	b, nb := ShortenQueries(ps, 0.5, 6, 7)
	c, _ := ShortenQueries(ps, 0.5, 6, 8)
	if !slices.Equal(ps, orig) {
		t.Fatal("ShortenQueries changed its input")
	}
	if !slices.Equal(a, b) || na != nb {
		t.Error("the same seed cut other queries")
	}
	if slices.Equal(a, c) {
		t.Error("seeds 7 and 8 cut the same queries")
	}
	if na < 150 || na > 250 {
		t.Errorf("p 0.5 cut %d of 400 queries", na)
	}
	cut := 0
	for i, p := range a {
		switch p.Query {
		case ps[i].Query:
		case fmt.Sprintf("number %d of widgets in the given box", i):
			cut++
		default:
			t.Fatalf("pair %d: query %q, want the original or its short form", i, p.Query)
		}
	}
	if cut != na {
		t.Errorf("%d queries cut, ShortenQueries says %d", cut, na)
	}
	if all, n := ShortenQueries(ps, 1, 6, 7); n != len(ps) || all[3].Query != "number 3 of widgets in the given box" {
		t.Errorf("p 1 cut %d of %d (pair 3: %q)", n, len(ps), all[3].Query)
	}
	if none, n := ShortenQueries(ps, 0, 6, 7); n != 0 || !slices.Equal(none, ps) {
		t.Errorf("p 0 cut %d", n)
	}
}

// TestRunShortQueries: with -short-queries 1 the trainer of a run learns
// from the short queries (masking same-query pairs by their short text)
// and records the option, so that a resume with another is refused.
func TestRunShortQueries(t *testing.T) {
	o := tinyRun(t, filepath.Join(t.TempDir(), "out"))
	o.ShortQueries, o.ShortWords = 1, 2
	pairs := tinyPairs()[:8]
	tr, err := o.trainer(context.Background(), tinyModel(t, pairs), pairs, train.Events{})
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range tr.Data.QueryText {
		if want := fmt.Sprintf("number %d", i); q != want {
			t.Errorf("pair %d: trained on %q, want %q", i, q, want)
		}
	}
	if tr.Opt.ShortQueries != 1 || tr.Opt.ShortWords != 2 {
		t.Errorf("trainer options: short-queries %v, short-words %d", tr.Opt.ShortQueries, tr.Opt.ShortWords)
	}
	o.ShortQueries = 0
	if tr, err = o.trainer(context.Background(), tinyModel(t, pairs), pairs, train.Events{}); err != nil {
		t.Fatal(err)
	}
	if tr.Data.QueryText[3] != pairs[3].Query || tr.Opt.ShortWords != 0 {
		t.Errorf("short-queries 0: trained on %q with short-words %d recorded", tr.Data.QueryText[3], tr.Opt.ShortWords)
	}
}

// TestRunDenseNegatives: with -dense-negatives the trainer's negatives
// are the -init encoder's own mined ones interleaved with BM25's, its
// first; the option is recorded, and refused without -init.
func TestRunDenseNegatives(t *testing.T) {
	ctx := context.Background()
	pairs := tinyPairs()[:8]
	initDir := filepath.Join(t.TempDir(), "init")
	if err := tinyModel(t, pairs).Save(initDir); err != nil {
		t.Fatal(err)
	}
	o := tinyRun(t, filepath.Join(t.TempDir(), "out"))
	o.HardNegatives, o.DenseNegatives = 2, 2
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "dense-negatives 2 without init") {
		t.Errorf("dense-negatives without init: %v", err)
	}
	o.Init = initDir
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	tr, err := o.trainer(ctx, tinyModel(t, pairs), pairs, train.Events{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := Load(initDir)
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewIndex(ctx, im, pairs, nil)
	if err != nil {
		t.Fatal(err)
	}
	dn, err := retrieve.MineRanked(ctx, x.Ranker(), pairs, 2, o.MineDepth)
	if err != nil {
		t.Fatal(err)
	}
	bm, _ := retrieve.MineHardNegatives(pairs, retrieve.MineOptions{K: 2, Depth: o.MineDepth, Margin: o.MineMargin})
	if want := retrieve.MergeNegatives(dn, bm); fmt.Sprint(tr.Data.Negatives) != fmt.Sprint(want) {
		t.Errorf("negatives %v, want %v (dense %v, bm25 %v)", tr.Data.Negatives, want, dn, bm)
	}
	n := 0
	for i, l := range dn {
		if len(l) > 0 {
			n++
			if tr.Data.Negatives[i][0] != l[0] {
				t.Errorf("pair %d: first negative %d, want the encoder's %d", i, tr.Data.Negatives[i][0], l[0])
			}
		}
	}
	if n == 0 || tr.Opt.DenseNegatives != 2 {
		t.Errorf("%d pairs with dense negatives; recorded dense-negatives %d", n, tr.Opt.DenseNegatives)
	}
}
