package rerank

import (
	"cmp"
	"slices"
	"sync"

	"github.com/attnlab/attnlab/retrieve"
)

// DefaultFuseWeight is the weight of the first stage's score when a
// search fuses it with the reranker's (Ranker.FuseWeight): the better of
// 0.5 and 0.7 on the validation pairs of the standard library and of the
// Debian packages, with the shipped models.
const DefaultFuseWeight = 0.7

// Ranker is a two-stage retrieve.Ranker: a first-stage system (BM25, a dual
// encoder or their fusion) proposes candidates and the cross-encoder
// re-orders the best Depth of them. Scores are cached per (query,
// document), so the whole-corpus and CodeSearchNet protocols of
// retrieve.Evaluate share the work where their candidates overlap. It is
// safe for concurrent use.
type Ranker struct {
	Model *Model
	First retrieve.Ranker
	Codes []string // the corpus: document i is Codes[i]
	Depth int      // first-stage candidates re-scored

	// Fuse orders the re-scored candidates by reciprocal rank fusion
	// (k = 60) of their first-stage rank and their cross-encoder rank
	// instead of by the cross-encoder alone: the reranker votes with the
	// first stage rather than overruling it.
	Fuse bool
	// FuseWeight, when above 0, fuses scores instead of ranks: the first
	// stage's and the cross-encoder's, each rescaled to [0, 1] over the
	// re-scored candidates (retrieve.Blend's rule), weighed FuseWeight and
	// 1 − FuseWeight.
	FuseWeight float64

	codes sync.Map // document → []int, its tokens
	cache sync.Map // pairKey → float32
}

type pairKey struct {
	query string
	doc   int
}

// NewRanker returns the reranking of first's top depth candidates over the
// corpus codes.
func NewRanker(m *Model, first retrieve.Ranker, codes []string, depth int) *Ranker {
	return &Ranker{Model: m, First: first, Codes: codes, Depth: max(depth, 1)}
}

// scores returns the cross-encoder scores of docs for query, those not
// cached scored in one batch.
func (r *Ranker) scores(query string, docs []int) []float64 {
	out := make([]float64, len(docs))
	var todo []int // indices into docs
	var codes [][]int
	for i, d := range docs {
		if v, ok := r.cache.Load(pairKey{query, d}); ok {
			out[i] = float64(v.(float32))
			continue
		}
		c, ok := r.codes.Load(d)
		if !ok {
			c, _ = r.codes.LoadOrStore(d, r.Model.Tokens(r.Codes[d], r.Model.Settings.MaxCode))
		}
		todo, codes = append(todo, i), append(codes, c.([]int))
	}
	if len(todo) == 0 {
		return out
	}
	s, err := r.Model.ScoreBatch(r.Model.QueryTokens(query), codes)
	if err != nil {
		panic(err.Error()) // the tokenizer and model of one checkpoint agree on ids
	}
	for x, i := range todo {
		r.cache.Store(pairKey{query, docs[i]}, s[x])
		out[i] = float64(s[x])
	}
	return out
}

// final returns the scores that order candidates given best first by the
// first stage, whose scores are first: the cross-encoder's, or with Fuse
// the fusion of both ranks (or scores, FuseWeight).
func (r *Ranker) final(ce, first []float64) []float64 {
	if !r.Fuse || len(ce) == 0 {
		return ce
	}
	if r.FuseWeight > 0 {
		out := make([]float64, len(ce))
		retrieve.AddRescaled(out, first, r.FuseWeight)
		retrieve.AddRescaled(out, ce, 1-r.FuseWeight)
		return out
	}
	idx := make([]int, len(ce))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ce[b], ce[a]) })
	out := make([]float64, len(ce))
	for rank, i := range idx {
		out[i] = 1/(60+float64(i+1)) + 1/(60+float64(rank+1))
	}
	return out
}

// order sorts docs by score, best first; equal scores keep their order.
func order(docs []int, scores []float64) {
	idx := make([]int, len(docs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	d, s := slices.Clone(docs), slices.Clone(scores)
	for i, j := range idx {
		docs[i], scores[i] = d[j], s[j]
	}
}

// Rank re-scores the first stage's top Depth documents and returns the best
// k: the re-ordered candidates, then the first stage's order beyond Depth.
func (r *Ranker) Rank(query string, k int) []int {
	docs, _ := r.RankScored(query, k)
	return docs
}

// scoredRanker is a first stage that returns the scores that ordered its
// hits (retrieve.Fusion, retrieve.BM25 through Score).
type scoredRanker interface {
	RankScored(query string, k int) ([]int, []float64)
}

// RankScored is Rank with scores that follow its order: the re-ordered top
// Depth are scored by their new place, 1, 2, … above the best first-stage
// score below them, the rest keep their first-stage scores. The first
// stage runs once and each candidate is re-scored once.
func (r *Ranker) RankScored(query string, k int) ([]int, []float64) {
	n := max(k, r.Depth)
	var cands []int
	var first []float64
	if sr, ok := r.First.(scoredRanker); ok {
		c, s := sr.RankScored(query, n)
		cands, first = slices.Clone(c), slices.Clone(s)
	} else {
		cands = slices.Clone(r.First.Rank(query, n))
		first = make([]float64, len(cands))
		r.First.Score(query, cands, first)
	}
	d := min(r.Depth, len(cands))
	top := cands[:d]
	order(top, r.final(r.scores(query, top), first[:d]))
	var rest float64 // the best first-stage score below the cut
	if d < len(cands) {
		rest = first[d]
	}
	for place := range d {
		first[place] = rest + float64(d-place)
	}
	k = min(k, len(cands))
	return cands[:k], first[:k]
}

// Score scores docs as Rank would order them: the Depth documents the first
// stage scores highest are re-ordered as Rank re-orders them (equal scores
// keep the first stage's order) and scored by their new place, 1, 2, …
// above the best first-stage score below them; the rest keep their
// first-stage scores.
func (r *Ranker) Score(query string, docs []int, scores []float64) {
	r.First.Score(query, docs, scores)
	if len(docs) == 0 {
		return
	}
	idx := make([]int, len(docs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	n := min(r.Depth, len(docs))
	top := make([]int, n)
	for i, j := range idx[:n] {
		top[i] = docs[j]
	}
	var rest float64 // the best first-stage score below the cut
	if n < len(docs) {
		rest = scores[idx[n]]
	}
	at := slices.Clone(idx[:n]) // positions in docs, in first-stage order
	first := make([]float64, n)
	for i, j := range at {
		first[i] = scores[j]
	}
	order(at, r.final(r.scores(query, top), first))
	for place, j := range at {
		scores[j] = rest + float64(n-place)
	}
}

// Rerank re-orders the first Depth of the first stage's candidates cands
// (best first, first their first-stage scores) in place, together with
// first, by the cross-encoder's scores (with Fuse, fused with the first
// stage's), and returns how many it re-ordered and, in their new order,
// the score that ordered each (final) and the cross-encoder's own (ce).
// The rest keep their places and first-stage scores.
func (r *Ranker) Rerank(query string, cands []int, first []float64) (n int, final, ce []float64) {
	n = min(r.Depth, len(cands))
	top := cands[:n]
	ce = r.scores(query, top)
	final = r.final(ce, first[:n])
	if !r.Fuse {
		final = slices.Clone(ce)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(final[b], final[a]) })
	d, f, c, s := slices.Clone(top), slices.Clone(final), slices.Clone(ce), slices.Clone(first[:n])
	for i, j := range idx {
		top[i], final[i], ce[i], first[i] = d[j], f[j], c[j], s[j]
	}
	return n, final, ce
}
