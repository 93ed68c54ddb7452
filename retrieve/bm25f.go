package retrieve

import (
	"fmt"
	"math"
	"sync"
)

// BM25F is BM25 over documents made of several fields (a function's doc
// comment, signature and body), each with a weight and a length
// normalisation of its own (Robertson, Zaragoza and Taylor, "Simple BM25
// extension to multiple weighted fields", CIKM 2004; Zaragoza et al.,
// TREC 2004). A term's counts in the fields are first combined,
//
//	tf~(t,d) = Σ_f W_f · tf_f(t,d) / (1 − B_f + B_f·|d_f|/avgdl_f)
//
// and saturated once:
//
//	score(q, d) = Σ_{t ∈ q} idf(t) · tf~(t,d)·(k1+1) / (tf~(t,d) + k1)
//
// with BM25's idf over the documents that hold t in any field. A field
// weighed 2 counts as if it were written twice; a term found in two fields
// is not counted twice over, as it would be by adding per-field BM25
// scores. With one field of weight 1 it is BM25 (NewBM25) exactly. It is
// safe for concurrent use once built.
type BM25F struct {
	K1      float64
	Weights []float64 // per field
	B       []float64 // per field

	n     int
	terms map[string]int32
	post  [][]fposting // by term id, in increasing document order
	lens  [][]int32    // by field, by document
	avgdl []float64    // by field
	pool  sync.Pool    // *bm25fScratch

	analyze func(string) []string // text → terms, for the documents and the queries
}

type fposting struct {
	doc   int32
	field int32
	tf    int32
}

type bm25fScratch struct {
	acc, tf []float64
	touched []int32
}

// NewBM25F indexes docs, each a list of len(weights) fields, with k1 = 1.2
// and b = 0.75 for every field; document i of the index is docs[i]. It
// panics if a document does not have one text per weight or a weight is
// negative or not finite.
func NewBM25F(docs [][]string, weights []float64) *BM25F {
	return NewBM25FWith(docs, weights, Terms)
}

// NewBM25FWith is NewBM25F with the documents and the queries split into
// terms by analyze (Terms, or StemTerms).
func NewBM25FWith(docs [][]string, weights []float64, analyze func(string) []string) *BM25F {
	nf := len(weights)
	for _, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			panic(fmt.Sprintf("retrieve: NewBM25F: field weight %v", w))
		}
	}
	x := &BM25F{K1: 1.2, Weights: weights, B: make([]float64, nf), n: len(docs), terms: map[string]int32{},
		lens: make([][]int32, nf), avgdl: make([]float64, nf), analyze: analyze}
	for f := range nf {
		x.B[f] = 0.75
		x.lens[f] = make([]int32, len(docs))
	}
	total := make([]int, nf)
	tf := map[int32]int32{}
	for d, fields := range docs {
		if len(fields) != nf {
			panic(fmt.Sprintf("retrieve: NewBM25F: document %d has %d fields, want %d", d, len(fields), nf))
		}
		for f, text := range fields {
			ts := analyze(text)
			x.lens[f][d] = int32(len(ts))
			total[f] += len(ts)
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
				x.post[id] = append(x.post[id], fposting{int32(d), int32(f), c})
			}
		}
	}
	for f := range nf {
		if len(docs) > 0 {
			x.avgdl[f] = float64(total[f]) / float64(len(docs))
		}
	}
	x.pool.New = func() any {
		return &bm25fScratch{acc: make([]float64, x.n), tf: make([]float64, x.n)}
	}
	return x
}

// Len returns the number of documents.
func (x *BM25F) Len() int { return x.n }

// DocFreq returns the number of documents that hold term t (as the
// index's analysis gives it) in any field.
func (x *BM25F) DocFreq(t string) int {
	id, ok := x.terms[t]
	if !ok {
		return 0
	}
	return x.docFreq(id)
}

func (x *BM25F) docFreq(id int32) int {
	n, last := 0, int32(-1)
	for _, p := range x.post[id] { // a document's postings are adjacent
		if p.doc != last {
			n, last = n+1, p.doc
		}
	}
	return n
}

// accumulate adds every document's score for the query terms into s.acc.
func (x *BM25F) accumulate(s *bm25fScratch, terms []string) {
	qts := queryTerms(x.terms, terms)
	wts := make([]weightedID, len(qts))
	for i, q := range qts {
		wts[i] = weightedID{q.id, float64(q.count)}
	}
	x.accumulateIDs(s, wts)
}

// weightedID is a term of the index with the weight a query gives it.
type weightedID struct {
	id int32
	w  float64
}

// accumulateIDs adds every document's score for the weighted terms into
// s.acc, a term's weight multiplying its idf as a count does.
func (x *BM25F) accumulateIDs(s *bm25fScratch, qts []weightedID) {
	norm := make([]float64, len(x.Weights)) // B_f / avgdl_f
	for f := range norm {
		if x.avgdl[f] > 0 {
			norm[f] = x.B[f] / x.avgdl[f]
		}
	}
	for _, q := range qts {
		ps := x.post[q.id]
		df := x.docFreq(q.id)
		w := q.w * math.Log(1+(float64(x.n)-float64(df)+0.5)/(float64(df)+0.5)) * (x.K1 + 1)
		s.touched = s.touched[:0]
		for _, p := range ps {
			if len(s.touched) == 0 || s.touched[len(s.touched)-1] != p.doc { // a document's postings are adjacent
				s.touched = append(s.touched, p.doc)
			}
			s.tf[p.doc] += x.Weights[p.field] * float64(p.tf) / (1 - x.B[p.field] + norm[p.field]*float64(x.lens[p.field][p.doc]))
		}
		for _, d := range s.touched {
			t := s.tf[d]
			s.acc[d] += w * t / (t + x.K1)
			s.tf[d] = 0
		}
	}
}

// ScoreAll returns the score of every document for query (Exhaustive).
func (x *BM25F) ScoreAll(query string) []float64 {
	s := x.pool.Get().(*bm25fScratch)
	x.accumulate(s, x.analyze(query))
	out := make([]float64, x.n)
	copy(out, s.acc)
	clear(s.acc)
	x.pool.Put(s)
	return out
}

// Analyze splits a query into the terms the index holds (Terms, or the
// analysis NewBM25FWith was given).
func (x *BM25F) Analyze(query string) []string { return x.analyze(query) }

// ScoreTerms returns the score of every document for terms already
// analysed, each weighed as if the query said it Weight times; terms the
// index does not hold are skipped.
func (x *BM25F) ScoreTerms(terms []WeightedTerm) []float64 {
	wts := make([]weightedID, 0, len(terms))
	for _, t := range terms {
		if id, ok := x.terms[t.Term]; ok {
			wts = append(wts, weightedID{id, t.Weight})
		}
	}
	s := x.pool.Get().(*bm25fScratch)
	x.accumulateIDs(s, wts)
	out := make([]float64, x.n)
	copy(out, s.acc)
	clear(s.acc)
	x.pool.Put(s)
	return out
}

// Top returns the documents of Rank from the scores of ScoreAll: those with
// a positive score, at most k, best first (Exhaustive).
func (x *BM25F) Top(scores []float64, k int) []int { return topK(scores, k, true) }

// Rank returns the documents with a positive score for query, at most k of
// them, best first; equal scores are ordered by document index.
func (x *BM25F) Rank(query string, k int) []int { return x.Top(x.ScoreAll(query), k) }

// Score writes the score of document docs[i] for query into scores[i].
// It panics if scores is shorter than docs.
func (x *BM25F) Score(query string, docs []int, scores []float64) {
	if len(scores) < len(docs) {
		panic("retrieve: BM25F.Score: scores shorter than docs")
	}
	all := x.ScoreAll(query)
	for i, d := range docs {
		scores[i] = all[d]
	}
}
