package retrieve

// Cross-check of BM25 against bleve v2.6.3, an independent BM25 search
// engine. Both are fed the same terms: bleve indexes strings.Join(Terms(code),
// " ") with a whitespace tokenizer and no filters, and is queried with a
// disjunction of term queries, one per distinct query term.
//
// Reading bleve's source (search/scorer/scorer_term.go, search/searcher/
// search_term.go, search/scorer/scorer_disjunction.go and the scorch index)
// shows that its "bm25" scoring model is not the Okapi/Lucene formula of
// BM25. It shares the idf ln(1 + (N − df + 0.5)/(df + 0.5)), k1 = 1.2 and
// b = 0.75, and otherwise computes, per matching clause t,
//
//	idf(t)·√tf·k1 / (√tf + k1·(1 − b + b·|d|/avgdl′)) · idf(t)·queryNorm
//	queryNorm = 1/√(Σ_clauses idf²)
//	avgdl′    = ⌈(Σ over segments of the field's dictionary size) / N⌉
//
// and multiplies the sum over clauses by coord = matched/total clauses. So,
// against BM25: the term frequency enters as its square root; the numerator
// has k1 where BM25 has k1+1; each term is weighted by idf² (normalised)
// instead of idf; documents matching fewer query terms are penalised by
// coord; and the "average document length" is the vocabulary size per
// document, rounded up, not the mean length (with one segment, ⌈V/N⌉).
// Document lengths come back from a float32 norm 1/√|d|, exact to ~1e-7.
// None of these is a constant factor, so the two rankings differ.
//
// The test therefore checks two things. First, bleveFormula (the formula
// above, evaluated from this package's index statistics: N, df, tf, |d| and
// the vocabulary) reproduces bleve's top-10 scores to a relative 1e-6 and its
// ranking up to exact ties. That validates what the two implementations must
// share — the tokens, document frequencies, term frequencies, lengths and
// the top-k selection — against an independent engine. Second, it measures
// how far bleve's ranking is from BM25's (top-10 overlap, same top-1) and
// asserts only a loose floor, since that distance is a property of bleve's
// formula, not an error of either side.
//
// A further trap: bleve.NewMemOnly builds an upsidedown index, which does not
// report field cardinality; bleve then sees avgdl′ = 0 and silently scores
// with tf-idf even though the mapping asks for bm25. The BM25 model needs
// the scorch index type (bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
// is scorch in memory). TestBleveMemOnlyIgnoresBM25 pins that down.

import (
	"context"
	"go/build"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/whitespace"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// newBleve indexes docs, pre-split by Terms, in a bleve index with the BM25
// scoring model, in one batch (one segment).
func newBleve(t testing.TB, docs []string, memOnly bool) bleve.Index {
	t.Helper()
	im := bleve.NewIndexMapping()
	im.ScoringModel = bleveindex.BM25Scoring
	if err := im.AddCustomAnalyzer("terms", map[string]any{"type": custom.Name, "tokenizer": whitespace.Name}); err != nil {
		t.Fatal(err)
	}
	fm := bleve.NewTextFieldMapping()
	fm.Analyzer = "terms"
	fm.Store = false
	fm.IncludeInAll = false
	fm.IncludeTermVectors = false
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt("code", fm)
	im.DefaultMapping = dm
	var idx bleve.Index
	var err error
	if memOnly {
		idx, err = bleve.NewMemOnly(im)
	} else {
		idx, err = bleve.NewUsing("", im, scorch.Name, scorch.Name, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	b := idx.NewBatch()
	for i, d := range docs {
		if err := b.Index(strconv.Itoa(i), map[string]any{"code": strings.Join(Terms(d), " ")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := idx.Batch(b); err != nil {
		t.Fatal(err)
	}
	return idx
}

type hit struct {
	doc   int
	score float64
}

func bleveSearch(t testing.TB, idx bleve.Index, terms []string, k int) []hit {
	t.Helper()
	var qs []query.Query
	for _, term := range terms {
		tq := bleve.NewTermQuery(term)
		tq.SetField("code")
		qs = append(qs, tq)
	}
	res, err := idx.Search(bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), k, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	var hits []hit
	for _, h := range res.Hits {
		d, err := strconv.Atoi(h.ID)
		if err != nil {
			t.Fatal(err)
		}
		hits = append(hits, hit{d, h.Score})
	}
	return hits
}

// bleveFormula scores every document of x the way bleve v2.6.3 does for a
// disjunction of the given (distinct, indexed) terms; see the file comment.
func bleveFormula(x *BM25, terms []string) []float64 {
	const k1, b = 1.2, 0.75
	avgdl := math.Ceil(float64(x.Vocabulary()) / float64(x.Len()))
	var sumSq float64
	for _, t := range terms {
		idf := x.IDF(x.DocFreq(t))
		sumSq += idf * idf
	}
	qnorm := 1 / math.Sqrt(sumSq)
	scores := make([]float64, x.Len())
	for d := range scores {
		var sum float64
		matched := 0
		for _, t := range terms {
			tf := x.TermFreq(t, d)
			if tf == 0 {
				continue
			}
			matched++
			idf := x.IDF(x.DocFreq(t))
			norm := float64(float32(1 / math.Sqrt(float64(x.DocLen(d)))))
			dl := 1 / (norm * norm)
			s := math.Sqrt(float64(tf))
			sum += idf * s * k1 / (s + k1*(1-b+b*dl/avgdl)) * idf * qnorm
		}
		scores[d] = sum * float64(matched) / float64(len(terms))
	}
	return scores
}

// distinctIndexed returns the distinct terms of query that x has indexed, in
// order of first occurrence.
func distinctIndexed(x *BM25, query string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range Terms(query) {
		if !seen[t] && x.DocFreq(t) > 0 {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// bleveSample is the cross-check corpus: the documented functions of
// GOROOT/src/encoding and its sub-packages, all splits together.
func bleveSample(t testing.TB) []Pair {
	t.Helper()
	src := filepath.Join(build.Default.GOROOT, "src", "encoding")
	tr, va, te, _, err := BuildDataset(context.Background(), src, DefaultOptions())
	if err != nil {
		t.Skipf("no Go source to sample: %v", err)
	}
	return append(append(tr, va...), te...)
}

func TestBM25AgainstBleve(t *testing.T) {
	pairs := bleveSample(t)
	docs := make([]string, len(pairs))
	for i, p := range pairs {
		docs[i] = p.Code
	}
	x := NewBM25(docs)
	idx := newBleve(t, docs, false)

	const k, tol = 10, 1e-9
	var queries, sameTop1, exactOrder int
	var overlap, worst, mrrBleve, mrrBM25 float64
	for i, p := range pairs {
		terms := distinctIndexed(x, p.Query)
		if len(terms) == 0 {
			continue
		}
		queries++
		got := bleveSearch(t, idx, terms, k)
		want := bleveFormula(x, terms)
		top := TopK(want, k)
		if len(got) != len(top) {
			t.Fatalf("query %d %q: bleve returned %d hits, the formula %d", i, p.Query, len(got), len(top))
		}
		same := true
		for r, h := range got {
			w := want[top[r]]
			worst = max(worst, math.Abs(h.score-w)/w)
			if math.Abs(h.score-w) > tol*w {
				t.Fatalf("query %d %q, rank %d: bleve scores %.9g, the formula %.9g", i, p.Query, r+1, h.score, w)
			}
			// bleve's hit at rank r must score like the formula's hit at
			// rank r: the orders agree except among exact ties.
			if math.Abs(want[h.doc]-w) > tol*w {
				t.Fatalf("query %d %q, rank %d: bleve has doc %d (formula score %.9g), the formula doc %d (%.9g)",
					i, p.Query, r+1, h.doc, want[h.doc], top[r], w)
			}
			same = same && h.doc == top[r]
			if h.doc == i {
				mrrBleve += 1 / float64(r+1)
			}
		}
		if same {
			exactOrder++
		}

		// Distance between bleve's ranking and BM25's.
		bmScores := make([]float64, x.Len())
		x.accumulate(bmScores, terms)
		bm := topK(bmScores, k, true)
		in := map[int]bool{}
		for r, d := range bm {
			in[d] = true
			if d == i {
				mrrBM25 += 1 / float64(r+1)
			}
		}
		common := 0
		for _, h := range got {
			if in[h.doc] {
				common++
			}
		}
		overlap += float64(common) / float64(max(len(bm), len(got)))
		if len(bm) > 0 && bm[0] == got[0].doc {
			sameTop1++
		}
	}
	if queries < 100 {
		t.Fatalf("only %d sample queries", queries)
	}
	overlap /= float64(queries)
	top1 := float64(sameTop1) / float64(queries)
	t.Logf("%d documents, %d queries: bleve matches the formula on this index in all top-%d lists, worst relative score difference %.1e; identical order in %d lists, the rest differ only among tied scores",
		len(docs), queries, k, worst, exactOrder)
	t.Logf("bleve vs BM25: mean top-%d overlap %.3f, same top-1 %.3f; MRR@10 on the sample: BM25 %.3f, bleve %.3f",
		k, overlap, top1, mrrBM25/float64(queries), mrrBleve/float64(queries))
	if overlap < 0.5 || top1 < 0.5 {
		t.Errorf("bleve and BM25 rankings share less than expected: overlap %.3f, top-1 %.3f (want >= 0.5)", overlap, top1)
	}
}

// TestBleveMemOnlyIgnoresBM25 pins the trap described in the file comment:
// with NewMemOnly, bleve scores tf-idf although the mapping asks for BM25.
func TestBleveMemOnlyIgnoresBM25(t *testing.T) {
	docs := []string{"alpha beta", "alpha alpha gamma", "delta", "alpha beta beta beta gamma delta"}
	x := NewBM25(docs)
	terms := []string{"alpha", "beta"}
	want := bleveFormula(x, terms)
	for _, h := range bleveSearch(t, newBleve(t, docs, false), terms, 10) {
		if math.Abs(h.score-want[h.doc]) > 1e-6*want[h.doc] {
			t.Errorf("scorch: doc %d scores %.9g, formula %.9g", h.doc, h.score, want[h.doc])
		}
	}
	var differ int
	for _, h := range bleveSearch(t, newBleve(t, docs, true), terms, 10) {
		if math.Abs(h.score-want[h.doc]) > 1e-3*want[h.doc] {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("NewMemOnly now scores with BM25: the note in bleve_test.go is out of date")
	}
}
