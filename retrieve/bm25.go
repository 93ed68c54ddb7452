package retrieve

import (
	"container/heap"
	"math"
	"sync"
)

// BM25 is an Okapi BM25 index over documents split by Terms. It is safe for
// concurrent use by multiple goroutines once built.
//
// The score of document d for query q is
//
//	score(q, d) = Σ_{t ∈ q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))
//	idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// where the sum runs over the query's terms with repetition (a term written
// twice counts twice, like two clauses of a Lucene boolean query), tf(t,d)
// is the count of t in d, |d| the number of terms of d, avgdl the mean of
// |d| over the N documents, and df(t) the number of documents holding t.
// The idf is Lucene's, which stays positive for terms in more than half the
// documents. Lucene 8 and later drop the constant factor (k1+1); it is kept
// here, which scales every score by 2.2 and changes no ranking. Lengths are
// exact (Lucene rounds them to one byte).
//
// The index statistics are cross-checked against bleve v2.6.3 in
// bleve_test.go. Bleve's "bm25" scoring is a different formula (√tf,
// idf² with a query norm, a coordination factor, and an average length
// taken from the vocabulary size), so its rankings differ from these; that
// file documents the differences.
type BM25 struct {
	K1, B float64

	n     int
	terms map[string]int32
	post  [][]posting // by term id, in increasing document order
	lens  []int32
	avgdl float64

	pool sync.Pool // *[]float64 accumulators of length n
}

type posting struct {
	doc, tf int32
}

// NewBM25 indexes docs with k1 = 1.2 and b = 0.75; document i of the index is
// docs[i].
func NewBM25(docs []string) *BM25 {
	x := &BM25{K1: 1.2, B: 0.75, n: len(docs), terms: map[string]int32{}, lens: make([]int32, len(docs))}
	var total int
	tf := map[int32]int32{}
	for d, text := range docs {
		ts := Terms(text)
		x.lens[d] = int32(len(ts))
		total += len(ts)
		clear(tf)
		for _, t := range ts {
			id, ok := x.terms[t]
			if !ok {
				id = int32(len(x.post))
				x.terms[t] = id
				x.post = append(x.post, nil)
			}
			tf[id]++
		}
		for id, c := range tf {
			x.post[id] = append(x.post[id], posting{int32(d), c})
		}
	}
	if len(docs) > 0 {
		x.avgdl = float64(total) / float64(len(docs))
	}
	x.pool.New = func() any { s := make([]float64, x.n); return &s }
	return x
}

// Len returns the number of documents.
func (x *BM25) Len() int { return x.n }

// DocLen returns the number of terms of document d.
func (x *BM25) DocLen(d int) int { return int(x.lens[d]) }

// AvgDocLen returns the mean number of terms per document.
func (x *BM25) AvgDocLen() float64 { return x.avgdl }

// Vocabulary returns the number of distinct terms.
func (x *BM25) Vocabulary() int { return len(x.post) }

// DocFreq returns the number of documents that hold term t (a term as Terms
// returns it).
func (x *BM25) DocFreq(t string) int {
	if id, ok := x.terms[t]; ok {
		return len(x.post[id])
	}
	return 0
}

// TermFreq returns the number of times term t occurs in document d.
func (x *BM25) TermFreq(t string, d int) int {
	id, ok := x.terms[t]
	if !ok {
		return 0
	}
	ps := x.post[id]
	lo, hi := 0, len(ps)
	for lo < hi {
		m := (lo + hi) / 2
		if int(ps[m].doc) < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(ps) && int(ps[lo].doc) == d {
		return int(ps[lo].tf)
	}
	return 0
}

// IDF returns Lucene's idf of a term that occurs in df of the N documents.
func (x *BM25) IDF(df int) float64 {
	return math.Log(1 + (float64(x.n)-float64(df)+0.5)/(float64(df)+0.5))
}

// accumulate adds the score of every document for the query terms into acc
// (length Len), term at a time along the postings. Terms are taken in the
// order of their first occurrence in the query, so the floating-point sums,
// and the order of equal-looking scores, are the same on every run.
func (x *BM25) accumulate(acc []float64, terms []string) {
	for _, q := range queryTerms(x.terms, terms) {
		x.accumulateTerm(acc, q.id, float64(q.count))
	}
}

// Analyze splits a query into the terms the index holds (Terms).
func (x *BM25) Analyze(query string) []string { return Terms(query) }

// ScoreTerms returns the score of every document for terms already
// analysed, each weighed as if the query said it Weight times (in place of
// its count), summed in the order given; terms the index does not hold are
// skipped.
func (x *BM25) ScoreTerms(terms []WeightedTerm) []float64 {
	acc := make([]float64, x.n)
	for _, t := range terms {
		if id, ok := x.terms[t.Term]; ok {
			x.accumulateTerm(acc, id, t.Weight)
		}
	}
	return acc
}

// accumulateTerm adds the scores of one term, weighed by weight, into acc.
func (x *BM25) accumulateTerm(acc []float64, id int32, weight float64) {
	norm := x.K1 / x.avgdl
	ps := x.post[id]
	w := weight * x.IDF(len(ps)) * (x.K1 + 1)
	for _, p := range ps {
		tf := float64(p.tf)
		acc[p.doc] += w * tf / (tf + x.K1*(1-x.B) + norm*x.B*float64(x.lens[p.doc]))
	}
}

// Scores returns the score of every document for query.
func (x *BM25) Scores(query string) []float64 {
	acc := make([]float64, x.n)
	x.accumulate(acc, Terms(query))
	return acc
}

// ScoreAll is Scores (Exhaustive).
func (x *BM25) ScoreAll(query string) []float64 { return x.Scores(query) }

// Top returns the documents of Rank from the scores of ScoreAll: those with
// a positive score, at most k, best first (Exhaustive).
func (x *BM25) Top(scores []float64, k int) []int { return topK(scores, k, true) }

// Score writes the score of document docs[i] for query into scores[i].
// It panics if scores is shorter than docs.
func (x *BM25) Score(query string, docs []int, scores []float64) {
	if len(scores) < len(docs) {
		panic("retrieve: BM25.Score: scores shorter than docs")
	}
	accp := x.pool.Get().(*[]float64)
	acc := *accp
	x.accumulate(acc, Terms(query))
	for i, d := range docs {
		scores[i] = acc[d]
	}
	clear(acc)
	x.pool.Put(accp)
}

// Rank returns the documents with a positive score for query, at most k of
// them, best first; equal scores are ordered by document index.
func (x *BM25) Rank(query string, k int) []int {
	accp := x.pool.Get().(*[]float64)
	acc := *accp
	x.accumulate(acc, Terms(query))
	top := topK(acc, k, true)
	clear(acc)
	x.pool.Put(accp)
	return top
}

// TopK returns the indices of the k largest scores, largest first, equal
// scores by increasing index; NaN scores are skipped. It keeps a min-heap of
// k entries, so it costs O(n log k).
func TopK(scores []float64, k int) []int { return topK(scores, k, false) }

func topK(scores []float64, k int, positive bool) []int {
	if k <= 0 {
		return nil
	}
	h := &minHeap{}
	for i, s := range scores {
		if s != s || positive && s <= 0 {
			continue
		}
		e := scored{i, s}
		if h.Len() < k {
			heap.Push(h, e)
		} else if worse((*h)[0], e) {
			(*h)[0] = e
			heap.Fix(h, 0)
		}
	}
	out := make([]int, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(scored).i
	}
	return out
}

type scored struct {
	i int
	s float64
}

// worse reports whether a ranks below b: a lower score, or the same score
// and a larger index.
func worse(a, b scored) bool {
	return a.s < b.s || a.s == b.s && a.i > b.i
}

type minHeap []scored

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// qterm is a term of a query that the index knows, and how often the query
// says it.
type qterm struct{ id, count int32 }

// queryTerms returns the query's terms that ids knows, each once with its
// count, in the order of their first occurrence: the order the scores are
// summed in, the same on every run.
func queryTerms(ids map[string]int32, terms []string) []qterm {
	var qts []qterm
	at := map[int32]int{}
	for _, t := range terms {
		id, ok := ids[t]
		if !ok {
			continue
		}
		if i, seen := at[id]; seen {
			qts[i].count++
			continue
		}
		at[id] = len(qts)
		qts = append(qts, qterm{id, 1})
	}
	return qts
}
