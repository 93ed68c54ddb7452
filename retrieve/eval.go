package retrieve

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"
)

// A Ranker is a retrieval system over a fixed corpus whose documents are
// numbered from 0. BM25, Dense and Fusion are Rankers; a reranker is one
// that scores candidates with a slower model. Implementations must be safe
// for concurrent use, since Evaluate calls them from several goroutines.
type Ranker interface {
	// Rank returns at most k documents for query, best first.
	Rank(query string, k int) []int
	// Score writes the score of document docs[i] for query into scores[i];
	// higher is better.
	Score(query string, docs []int, scores []float64)
}

// MaxWorkers bounds EvalOptions.Workers as a command takes it: far more
// goroutines than any machine has cores.
const MaxWorkers = 1 << 10

// EvalOptions controls Evaluate. The zero value means the defaults.
type EvalOptions struct {
	Candidates int    // CodeSearchNet candidate set: the gold and Candidates−1 distractors (default 1000)
	Seed       uint64 // seed of the distractor draw (default 1)
	Workers    int    // goroutines (default GOMAXPROCS; never more than the queries)
	NoCSN      bool   // skip the CodeSearchNet protocol (its metrics stay 0)
	// Progress, when not nil, is called from Evaluate's goroutine with the
	// queries handed to the workers so far (each is done or running), and
	// with all of them at the end.
	Progress func(done int) `json:"-"`
}

// Metrics are the results of Evaluate. The whole-corpus metrics look at the
// top 10 of Rank; the CodeSearchNet ones at the Score of each query's
// candidate set.
type Metrics struct {
	Queries int `json:"queries"`
	Docs    int `json:"docs"`

	MRR10    float64 `json:"mrr10"`  // mean of 1/rank, 0 beyond rank 10
	Recall1  float64 `json:"r1"`     // fraction of queries with the gold at rank 1
	Recall5  float64 `json:"r5"`     // … within the top 5
	Recall10 float64 `json:"r10"`    // … within the top 10
	NDCG10   float64 `json:"ndcg10"` // mean of 1/log2(1+rank), 0 beyond rank 10 (one relevant document: the ideal DCG is 1)

	CSNMRR        float64 `json:"csn_mrr"`        // mean of 1/rank among the candidates
	CSNCandidates int     `json:"csn_candidates"` // candidate set size used (less than asked when the corpus is small)

	Ranks    []int `json:"-"` // per query: rank of the gold in Rank(query, 10), 0 when absent
	CSNRanks []int `json:"-"` // per query: rank of the gold among its candidates

	RankMean time.Duration `json:"query_mean_ns"` // wall time of one Rank call
	RankP50  time.Duration `json:"query_p50_ns"`
	RankP95  time.Duration `json:"query_p95_ns"`
}

// Evaluate measures r on the task where query i is answered by document i
// of a corpus of nDocs documents (the corpus may hold more documents than
// there are queries; the others are distractors only).
//
// Whole-corpus metrics (MRR@10, Recall@1/5/10, nDCG@10) rank all nDocs
// documents with r.Rank. The CodeSearchNet protocol [Husain et al. 2019]
// scores the gold together with Candidates−1 distractors drawn uniformly
// from the other documents, with a generator seeded by (Seed, i), so every
// system sees the same candidate sets; the gold's rank is 1 plus the number
// of distractors scoring at least as high, so ties count against the system
// (as CodeSearchNet's own evaluation does).
//
// When ctx is done, the queries not yet started are skipped and ctx's error
// is returned. It panics if len(queries) > nDocs.
func Evaluate(ctx context.Context, r Ranker, queries []string, nDocs int, opt EvalOptions) (Metrics, error) {
	if len(queries) > nDocs {
		panic(fmt.Sprintf("retrieve: Evaluate: %d queries but %d documents", len(queries), nDocs))
	}
	if opt.Candidates <= 0 {
		opt.Candidates = 1000
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	opt.Workers = min(opt.Workers, max(len(queries), 1))
	m := Metrics{
		Queries: len(queries), Docs: nDocs,
		CSNCandidates: min(opt.Candidates, nDocs),
		Ranks:         make([]int, len(queries)),
		CSNRanks:      make([]int, len(queries)),
	}
	if len(queries) == 0 {
		return m, nil
	}
	times := make([]time.Duration, len(queries))
	next := make(chan int)
	var wg sync.WaitGroup
	for range opt.Workers {
		wg.Go(func() {
			cand := make([]int, m.CSNCandidates)
			scores := make([]float64, m.CSNCandidates)
			for i := range next {
				start := time.Now()
				top := r.Rank(queries[i], 10)
				times[i] = time.Since(start)
				if at := slices.Index(top, i); at >= 0 {
					m.Ranks[i] = at + 1
				}
				if opt.NoCSN {
					continue
				}
				cand[0] = i
				distractors(cand[1:], i, nDocs, opt.Seed)
				r.Score(queries[i], cand, scores)
				rank := 1
				for _, s := range scores[1:] {
					// a NaN on either side counts against the system
					if !(s < scores[0]) {
						rank++
					}
				}
				m.CSNRanks[i] = rank
			}
		})
	}
	for i := range queries {
		if ctx.Err() != nil {
			break
		}
		next <- i
		if opt.Progress != nil {
			opt.Progress(i)
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return m, err
	}
	if opt.Progress != nil {
		opt.Progress(len(queries))
	}

	for i := range queries {
		if k := m.Ranks[i]; k > 0 {
			m.MRR10 += 1 / float64(k)
			m.NDCG10 += 1 / math.Log2(1+float64(k))
			m.Recall1 += b2f(k <= 1)
			m.Recall5 += b2f(k <= 5)
			m.Recall10 += 1
		}
		if !opt.NoCSN {
			m.CSNMRR += 1 / float64(m.CSNRanks[i])
		}
	}
	q := float64(len(queries))
	m.MRR10, m.NDCG10, m.CSNMRR = m.MRR10/q, m.NDCG10/q, m.CSNMRR/q
	m.Recall1, m.Recall5, m.Recall10 = m.Recall1/q, m.Recall5/q, m.Recall10/q

	var total time.Duration
	for _, t := range times {
		total += t
	}
	slices.Sort(times)
	m.RankMean = total / time.Duration(len(times))
	m.RankP50 = times[len(times)/2]
	m.RankP95 = times[min(len(times)-1, len(times)*95/100)]
	return m, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// distractors fills dst with distinct documents of [0, n) other than gold,
// drawn uniformly by Floyd's algorithm from a generator seeded by (seed,
// gold). It panics if len(dst) > n−1.
func distractors(dst []int, gold, n int, seed uint64) {
	m := len(dst)
	rng := rand.New(rand.NewPCG(seed, uint64(gold)))
	// Floyd: a uniform m-subset of [0, n−1), then shift values ≥ gold up by
	// one to skip the gold.
	taken := make(map[int]bool, m)
	k := 0
	for j := n - 1 - m; j < n-1; j++ {
		t := rng.IntN(j + 1)
		if taken[t] {
			t = j
		}
		taken[t] = true
		dst[k] = t
		k++
	}
	for i, v := range dst {
		if v >= gold {
			dst[i] = v + 1
		}
	}
}

// RRF fuses ranked lists by reciprocal rank fusion [Cormack et al. 2009]: a
// document's fused score is
//
//	Σ_lists 1/(k + rank),  rank = 1 for the head of a list,
//
// with nothing added by a list that lacks the document. It returns every
// document of the lists by decreasing fused score, equal scores by
// increasing document index. k = 60 is the customary value.
func RRF(k float64, lists ...[]int) []int {
	docs, _ := rrf(k, lists...)
	return docs
}

// rrf is RRF with the fused score of each document it returns.
func rrf(k float64, lists ...[]int) ([]int, []float64) {
	score := map[int]float64{}
	for _, l := range lists {
		for r, d := range l {
			score[d] += 1 / (k + float64(r+1))
		}
	}
	docs := make([]int, 0, len(score))
	for d := range score {
		docs = append(docs, d)
	}
	slices.SortFunc(docs, func(a, b int) int {
		if score[a] != score[b] {
			if score[a] > score[b] {
				return -1
			}
			return 1
		}
		return a - b
	})
	scores := make([]float64, len(docs))
	for i, d := range docs {
		scores[i] = score[d]
	}
	return docs, scores
}

// Fusion is a hybrid Ranker: reciprocal rank fusion of several Rankers over
// the same corpus.
type Fusion struct {
	Systems []Ranker
	K       float64 // RRF constant (60 when 0)
	Depth   int     // documents taken from each system by Rank (100 when 0, at least k)
}

func (f Fusion) k() float64 {
	if f.K == 0 {
		return 60
	}
	return f.K
}

// Rank fuses the top Depth documents of every system.
func (f Fusion) Rank(query string, k int) []int {
	docs, _ := f.RankScored(query, k)
	return docs
}

// RankScored is Rank with the fused score that ordered each document (Score
// instead fuses the ranks within the documents it is given).
func (f Fusion) RankScored(query string, k int) ([]int, []float64) {
	depth := max(f.Depth, k)
	if f.Depth == 0 {
		depth = max(100, k)
	}
	lists := make([][]int, len(f.Systems))
	for i, s := range f.Systems {
		lists[i] = s.Rank(query, depth)
	}
	docs, scores := rrf(f.k(), lists...)
	n := min(k, len(docs))
	return docs[:n], scores[:n]
}

// Score ranks docs by each system's Score and fuses those ranks. Equal
// scores share the best rank of their group, so the order of docs does not
// matter.
func (f Fusion) Score(query string, docs []int, scores []float64) {
	clear(scores[:len(docs)])
	sys := make([]float64, len(docs))
	order := make([]int, len(docs))
	for _, s := range f.Systems {
		s.Score(query, docs, sys)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case sys[a] > sys[b]:
				return -1
			case sys[a] < sys[b]:
				return 1
			}
			return 0
		})
		rank := 0
		for j, i := range order {
			if j == 0 || sys[i] != sys[order[j-1]] {
				rank = j + 1
			}
			scores[i] += 1 / (f.k() + float64(rank))
		}
	}
}
