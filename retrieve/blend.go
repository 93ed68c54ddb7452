package retrieve

import (
	"fmt"
	"math"
	"slices"
)

// DefaultBM25Weight is the weight of BM25 in the hybrid first stage (a
// Blend of BM25 and the dual encoder, which gets the rest): the best of
// 0.1, 0.2, … 0.6 on the validation pairs of the standard library and of
// the Debian packages alike.
const DefaultBM25Weight = 0.3

// Blend is a hybrid Ranker that adds the systems' scores with weights, each
// system's scores first rescaled to [0, 1] over the candidates at hand
// (min–max: the lowest candidate gets 0, the highest 1). Unlike reciprocal
// rank fusion (Fusion) it keeps how far apart the scores are: a document
// far ahead in one system and a little behind in the other wins, where
// ranks would call it a tie. The candidates of Rank are the union of every
// system's top Depth; Score rescales over the documents it is given.
//
// This is the convex combination of Bruch, Gai and Ingber, "An Analysis of
// Fusion Functions for Hybrid Retrieval" (ACM TOIS, 2023), which beats
// reciprocal rank fusion once its weight is tuned on a little labelled data.
type Blend struct {
	Systems []Ranker
	Weights []float64 // one per system
	Depth   int       // documents taken from each system by Rank (100 when 0, at least k)
}

// Rank returns the best k of the union of every system's top Depth.
func (b Blend) Rank(query string, k int) []int {
	docs, _ := b.RankScored(query, k)
	return docs
}

// RankScored is Rank with the blended score that ordered each document.
func (b Blend) RankScored(query string, k int) ([]int, []float64) {
	docs, scores, _ := b.RankParts(query, k)
	return docs, scores
}

// RankParts is RankScored with each system's own score of each document
// returned: parts[i][j] is system i's score of docs[j], as it scored it
// (not rescaled).
func (b Blend) RankParts(query string, k int) (docs []int, scores []float64, parts [][]float64) {
	depth := max(b.Depth, k)
	if b.Depth == 0 {
		depth = max(100, k)
	}
	var union []int
	seen := map[int]bool{}
	all := make([][]float64, len(b.Systems)) // the whole corpus's scores of an Exhaustive system
	for i, s := range b.Systems {
		var top []int
		if ex, ok := s.(Exhaustive); ok {
			all[i] = ex.ScoreAll(query)
			top = ex.Top(all[i], depth)
		} else {
			top = s.Rank(query, depth)
		}
		for _, d := range top {
			if !seen[d] {
				seen[d] = true
				union = append(union, d)
			}
		}
	}
	blended := make([]float64, len(union))
	sys := b.blend(query, union, blended, all)
	idx := make([]int, len(union))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int {
		switch {
		case blended[x] > blended[y]:
			return -1
		case blended[x] < blended[y]:
			return 1
		}
		return union[x] - union[y]
	})
	n := min(k, len(idx))
	docs, scores, parts = make([]int, n), make([]float64, n), make([][]float64, len(b.Systems))
	for i := range parts {
		parts[i] = make([]float64, n)
	}
	for i, j := range idx[:n] {
		docs[i], scores[i] = union[j], blended[j]
		for s := range parts {
			parts[s][i] = sys[s][j]
		}
	}
	return docs, scores, parts
}

// Score writes the blended score of each document of docs: the weighted
// sum of every system's score rescaled to [0, 1] over docs. A system that
// scores all of docs alike adds nothing.
func (b Blend) Score(query string, docs []int, scores []float64) {
	b.blend(query, docs, scores, make([][]float64, len(b.Systems)))
}

// blend is Score with the scores of the whole corpus of some systems
// already computed: all[i] non-nil for those, read instead of calling
// their Score. It returns each system's scores of docs.
func (b Blend) blend(query string, docs []int, scores []float64, all [][]float64) [][]float64 {
	if len(b.Weights) != len(b.Systems) {
		panic(fmt.Sprintf("retrieve: Blend of %d systems with %d weights", len(b.Systems), len(b.Weights)))
	}
	clear(scores[:len(docs)])
	sys := make([][]float64, len(b.Systems))
	if len(docs) == 0 {
		return sys
	}
	for i, s := range b.Systems {
		sys[i] = make([]float64, len(docs))
		if all[i] != nil {
			for j, d := range docs {
				sys[i][j] = all[i][d]
			}
		} else {
			s.Score(query, docs, sys[i])
		}
		AddRescaled(scores[:len(docs)], sys[i], b.Weights[i])
	}
	return sys
}

// AddRescaled adds w times scores, rescaled to [0, 1] (min–max: the lowest
// 0, the highest 1), into dst. Scores all alike add nothing. It panics if
// dst is shorter than scores.
func AddRescaled(dst, scores []float64, w float64) {
	if len(scores) == 0 {
		return
	}
	lo, hi := slices.Min(scores), slices.Max(scores)
	if !(hi > lo) {
		return
	}
	for j, v := range scores {
		dst[j] += w * (v - lo) / (hi - lo)
	}
}

// Exhaustive is a Ranker that scores the whole corpus for a query in one
// pass (BM25, Dense): Rank(query, k) is Top(ScoreAll(query), k), and Score
// reads ScoreAll. A Blend asks it once per query instead of twice (its
// ranking, then its scores of the other systems' candidates).
type Exhaustive interface {
	Ranker
	ScoreAll(query string) []float64 // the score of every document
	Top(scores []float64, k int) []int
}

// Hybrid says how the hybrid first stage combines BM25 and the dual
// encoder. The zero value is the default: a Blend with BM25 weighed
// DefaultBM25Weight.
type Hybrid struct {
	RRF        bool    // reciprocal rank fusion (Fusion) instead of a Blend
	BM25Weight float64 // the Blend's weight of BM25, in (0, 1); the encoder gets the rest (0: DefaultBM25Weight)
	// Translation, when not nil, expands BM25's queries (Translated)
	// with TranslateAlpha; nil or an alpha of 0: BM25 as it is.
	Translation    *Translation
	TranslateAlpha float64
}

// DefaultTranslateAlpha is the weight of the translated terms in BM25's
// queries of the hybrid over pairs (Translation.Expand's alpha): the best
// of 0.1, 0.2 and 0.3 on the validation pairs.
const DefaultTranslateAlpha = 0.2

// Validate returns an error for a weight outside [0, 1) or a translation
// weight that is negative or not finite.
func (h Hybrid) Validate() error {
	if !(h.BM25Weight >= 0 && h.BM25Weight < 1) {
		return fmt.Errorf("bm25 weight %v: want a value in (0, 1) (the encoder gets the rest)", h.BM25Weight)
	}
	if !(h.TranslateAlpha >= 0) || math.IsInf(h.TranslateAlpha, 0) {
		return fmt.Errorf("translate alpha %v: want a finite value >= 0", h.TranslateAlpha)
	}
	return nil
}

// Lexical returns the hybrid's lexical part over an index: the index, or
// with a Translation and an alpha above 0 the index with its queries
// expanded (Translated).
func (h Hybrid) Lexical(index TermScorer) Ranker {
	if h.Translation == nil || h.TranslateAlpha == 0 {
		return index
	}
	return Translated{Index: index, Table: h.Translation, Alpha: h.TranslateAlpha}
}

// weight returns BM25's weight in a Blend.
func (h Hybrid) weight() float64 {
	if h.BM25Weight == 0 {
		return DefaultBM25Weight
	}
	return h.BM25Weight
}

// ScoredRanker is a Ranker that also returns the scores that ordered its
// hits (Fusion, Blend).
type ScoredRanker interface {
	Ranker
	RankScored(query string, k int) ([]int, []float64)
}

// Ranker returns the hybrid of a BM25 and a dense Ranker over one corpus;
// a BM25 that is a TermScorer has its queries expanded as Lexical says.
func (h Hybrid) Ranker(bm25, dense Ranker) ScoredRanker {
	if ts, ok := bm25.(TermScorer); ok {
		bm25 = h.Lexical(ts)
	}
	if h.RRF {
		return Fusion{Systems: []Ranker{bm25, dense}}
	}
	w := h.weight()
	return Blend{Systems: []Ranker{bm25, dense}, Weights: []float64{w, 1 - w}}
}

// String describes the hybrid in words.
func (h Hybrid) String() string {
	var s string
	if h.RRF {
		s = "reciprocal rank fusion of BM25 and the encoder"
	} else {
		s = fmt.Sprintf("BM25 and the encoder's scores, each rescaled to [0, 1] over the candidates, weighed %.2g and %.2g", h.weight(), 1-h.weight())
	}
	if h.Translation != nil && h.TranslateAlpha > 0 {
		s += fmt.Sprintf("; BM25's queries expanded by a term translation table of %d terms, weighed %.2g", h.Translation.Len(), h.TranslateAlpha)
	}
	return s
}
