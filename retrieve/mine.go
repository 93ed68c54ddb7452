package retrieve

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// CodeKey returns the key under which two code documents count as the same
// document: the text with every run of white space made one space, the
// comparison BuildDataset uses to drop duplicates.
func CodeKey(code string) string { return strings.Join(strings.Fields(code), " ") }

// UniqueCode returns pairs without those whose code (by CodeKey) is that
// of an earlier pair, the first copy kept, in order, and how many were
// dropped. In an evaluation where the gold of query i is document i, a
// second copy of a document ties with the gold (and a repeated pair counts
// its query twice): the measure would depend on the order of the file.
func UniqueCode(pairs []Pair) ([]Pair, int) {
	seen := make(map[string]bool, len(pairs))
	out := make([]Pair, 0, len(pairs))
	for _, p := range pairs {
		k := CodeKey(p.Code)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, p)
	}
	return out, len(pairs) - len(out)
}

// MineOptions controls MineHardNegatives. The zero value means the
// defaults.
type MineOptions struct {
	K       int     // hard negatives kept per query (default 1)
	Depth   int     // BM25 results examined per query (default 20)
	Margin  float64 // drop candidates scoring at least (1 − Margin)·the gold's score (default 0.05; negative: keep all)
	Workers int     // goroutines (default GOMAXPROCS)
}

// MineStats counts what MineHardNegatives examined and dropped.
type MineStats struct {
	Queries  int // queries mined
	Kept     int // hard negatives kept
	Same     int // candidates dropped: code identical to the gold's up to white space
	Near     int // candidates dropped: BM25 score within the margin of the gold's
	Short    int // queries left with fewer than K negatives
	GoldMiss int // queries whose gold is not among the Depth results (mined all the same)
}

// MineHardNegatives returns, for query i of pairs (whose gold is document
// i, as in a dataset split), up to K documents of the same split that BM25
// ranks highest for the query and that are not its gold: the hard
// negatives of dual-encoder training [DPR, 4]. Mining happens once, with
// BM25 over the split's code.
//
// BM25's best non-gold results are also the likeliest false negatives:
// another function that does what the query says. Two filters remove the
// detectable ones: a candidate whose code equals the gold's up to white
// space, and a candidate whose BM25 score is at least (1 − Margin) times
// the gold's (NV-Retriever's "TopK-PercPos" rule, with BM25 as the teacher):
// a lexical match that close to the gold's is more often a second answer
// than a near miss. A gold that shares no term with its query (score 0)
// gives no such evidence, and its candidates are kept.
func MineHardNegatives(pairs []Pair, opt MineOptions) ([][]int, MineStats) {
	if opt.K <= 0 {
		opt.K = 1
	}
	if opt.Depth <= 0 {
		opt.Depth = 20
	}
	if opt.Margin == 0 {
		opt.Margin = 0.05
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	codes := make([]string, len(pairs))
	keys := make([]string, len(pairs))
	for i, p := range pairs {
		codes[i], keys[i] = p.Code, CodeKey(p.Code)
	}
	bm := NewBM25(codes)
	negs := make([][]int, len(pairs))
	stats := make([]MineStats, opt.Workers)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range opt.Workers {
		wg.Go(func() {
			st := &stats[w]
			gold := make([]float64, 1)
			for i := range next {
				q := pairs[i].Query
				cand := bm.Rank(q, opt.Depth+1)
				bm.Score(q, []int{i}, gold)
				scores := make([]float64, len(cand))
				bm.Score(q, cand, scores)
				for x, d := range cand {
					if len(negs[i]) == opt.K {
						break
					}
					switch {
					case d == i: // the gold
					case keys[d] == keys[i]:
						st.Same++
					case opt.Margin >= 0 && gold[0] > 0 && scores[x] >= (1-opt.Margin)*gold[0]:
						st.Near++
					default:
						negs[i] = append(negs[i], d)
					}
				}
				if !slices.Contains(cand, i) {
					st.GoldMiss++
				}
				if len(negs[i]) < opt.K {
					st.Short++
				}
				st.Kept += len(negs[i])
			}
		})
	}
	for i := range pairs {
		next <- i
	}
	close(next)
	wg.Wait()
	total := MineStats{Queries: len(pairs)}
	for _, s := range stats {
		total.Kept += s.Kept
		total.Same += s.Same
		total.Near += s.Near
		total.Short += s.Short
		total.GoldMiss += s.GoldMiss
	}
	return negs, total
}

// MineRanked returns, for query i of pairs (whose gold is document i), up
// to k hard negatives from r's top depth over the pairs' code: documents r
// ranks high for the query that are not its answer, in r's order. Likely
// false negatives are dropped: code equal to the gold's up to white space,
// and the code of another pair with the same query text. The queries are
// mined on GOMAXPROCS goroutines; when ctx is done, those not yet started
// are skipped and ctx's error is returned.
func MineRanked(ctx context.Context, r Ranker, pairs []Pair, k, depth int) ([][]int, error) {
	keys := make([]string, len(pairs))
	for i, p := range pairs {
		keys[i] = CodeKey(p.Code)
	}
	out := make([][]int, len(pairs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				p := pairs[i]
				for _, d := range r.Rank(p.Query, depth) {
					if len(out[i]) == k {
						break
					}
					if d == i || keys[d] == keys[i] || pairs[d].Query == p.Query {
						continue
					}
					out[i] = append(out[i], d)
				}
			}
		})
	}
	var err error
	for i := range pairs {
		if err = ctx.Err(); err != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out, err
}

// MergeNegatives interleaves lists of negatives per pair (the first of
// each list, then the second of each, …) without repeats.
func MergeNegatives(lists ...[][]int) [][]int {
	n := 0
	for _, l := range lists {
		n = max(n, len(l))
	}
	out := make([][]int, n)
	for i := range out {
		seen := map[int]bool{}
		for r := 0; ; r++ {
			more := false
			for _, l := range lists {
				if i < len(l) && r < len(l[i]) {
					more = true
					if d := l[i][r]; !seen[d] {
						seen[d] = true
						out[i] = append(out[i], d)
					}
				}
			}
			if !more {
				break
			}
		}
	}
	return out
}
