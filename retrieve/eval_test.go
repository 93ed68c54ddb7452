package retrieve

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// fixedRanker ranks a corpus by a fixed score table: score[q][d], where the
// query text is the decimal index q.
type fixedRanker struct {
	score [][]float64

	mu   sync.Mutex
	cand map[int][]int // candidate sets seen by Score, by query
}

func (f *fixedRanker) Rank(query string, k int) []int {
	q, _ := strconv.Atoi(query)
	return TopK(f.score[q], k)
}

func (f *fixedRanker) Score(query string, docs []int, scores []float64) {
	q, _ := strconv.Atoi(query)
	for i, d := range docs {
		scores[i] = f.score[q][d]
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cand == nil {
		f.cand = map[int][]int{}
	}
	f.cand[q] = slices.Clone(docs)
}

// rankerWithOrders makes a fixedRanker over n documents in which query q
// ranks the documents in orders[q] first, in that order, and the rest after
// them by index.
func rankerWithOrders(n int, orders [][]int) *fixedRanker {
	f := &fixedRanker{}
	for _, o := range orders {
		s := make([]float64, n)
		for d := range s {
			s[d] = float64(n - d) // the rest: by index
		}
		for j, d := range o {
			s[d] = float64(1000 - j)
		}
		f.score = append(f.score, s)
	}
	return f
}

func queryNames(n int) []string {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = strconv.Itoa(i)
	}
	return qs
}

func TestEvaluateByHand(t *testing.T) {
	// 12 documents, 4 queries; the gold of query q is document q.
	//   q0: gold first                           → rank 1
	//   q1: document 5, then the gold            → rank 2
	//   q2: ten other documents, then the gold   → rank 11, beyond the top 10
	//   q3: six other documents, then the gold   → rank 7
	r := rankerWithOrders(12, [][]int{
		{0},
		{5, 1},
		{0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 2},
		{0, 1, 2, 4, 5, 6, 3},
	})
	m := evaluate(r, queryNames(4), 12, EvalOptions{Candidates: 12})
	want := Metrics{
		Queries: 4, Docs: 12,
		MRR10:    (1 + 1.0/2 + 0 + 1.0/7) / 4,
		Recall1:  1.0 / 4,
		Recall5:  2.0 / 4,
		Recall10: 3.0 / 4,
		// 1/log2(1+rank): 1, 1/log2 3 = 0.6309…, 0, 1/log2 8 = 1/3
		NDCG10: (1 + 1/math.Log2(3) + 0 + 1.0/3) / 4,
		// With all 12 documents as candidates the ranks are 1, 2, 11, 7.
		CSNMRR:        (1 + 1.0/2 + 1.0/11 + 1.0/7) / 4,
		CSNCandidates: 12,
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"MRR@10", m.MRR10, want.MRR10},
		{"R@1", m.Recall1, want.Recall1},
		{"R@5", m.Recall5, want.Recall5},
		{"R@10", m.Recall10, want.Recall10},
		{"nDCG@10", m.NDCG10, want.NDCG10},
		{"CSN MRR", m.CSNMRR, want.CSNMRR},
	} {
		if math.Abs(c.got-c.want) > 1e-15 {
			t.Errorf("%s = %.16g, want %.16g", c.name, c.got, c.want)
		}
	}
	if !slices.Equal(m.Ranks, []int{1, 2, 0, 7}) || !slices.Equal(m.CSNRanks, []int{1, 2, 11, 7}) {
		t.Errorf("ranks %v, CSN ranks %v", m.Ranks, m.CSNRanks)
	}
	if m.Queries != 4 || m.Docs != 12 || m.CSNCandidates != 12 || m.RankMean <= 0 || m.RankP95 < m.RankP50 {
		t.Errorf("metrics %+v", m)
	}
}

func TestEvaluateCSNCandidates(t *testing.T) {
	const n = 50
	orders := make([][]int, 20)
	a := rankerWithOrders(n, orders)
	b := rankerWithOrders(n, orders)
	ma := evaluate(a, queryNames(20), n, EvalOptions{Candidates: 5, Seed: 7})
	evaluate(b, queryNames(20), n, EvalOptions{Candidates: 5, Seed: 7, Workers: 1})
	if ma.CSNCandidates != 5 {
		t.Errorf("CSNCandidates %d, want 5", ma.CSNCandidates)
	}
	for q := range 20 {
		c := a.cand[q]
		if len(c) != 5 || c[0] != q {
			t.Fatalf("query %d: candidates %v, want 5 with the gold first", q, c)
		}
		if !slices.Equal(c, b.cand[q]) {
			t.Errorf("query %d: two systems saw different candidates %v and %v", q, c, b.cand[q])
		}
	}
	// The candidate set is capped by the corpus.
	if m := evaluate(a, queryNames(3), 3, EvalOptions{}); m.CSNCandidates != 3 {
		t.Errorf("3 documents: %d candidates", m.CSNCandidates)
	}
}

func TestEvaluateTiesCountAgainst(t *testing.T) {
	// Every document scores the same: the whole-corpus order is by index,
	// and among candidates the gold is ranked below all its ties.
	flat := &fixedRanker{score: [][]float64{make([]float64, 8), make([]float64, 8)}}
	m := evaluate(flat, queryNames(2), 8, EvalOptions{})
	if !slices.Equal(m.Ranks, []int{1, 2}) || !slices.Equal(m.CSNRanks, []int{8, 8}) {
		t.Errorf("ranks %v, CSN ranks %v; want [1 2] and [8 8]", m.Ranks, m.CSNRanks)
	}
	// A NaN score counts against the system on either side.
	nan := &fixedRanker{score: [][]float64{{math.NaN(), 1, 2}, {1, 1, math.NaN()}}}
	if m := evaluate(nan, queryNames(2), 3, EvalOptions{}); !slices.Equal(m.CSNRanks, []int{3, 3}) {
		t.Errorf("NaN: CSN ranks %v, want [3 3]", m.CSNRanks)
	}
}

func TestEvaluatePanicsOnMoreQueriesThanDocuments(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("no panic")
		}
	}()
	evaluate(&fixedRanker{}, queryNames(3), 2, EvalOptions{})
}

func TestDistractors(t *testing.T) {
	const n, m = 10, 3
	count := make([]int, n)
	for seed := range uint64(9000) {
		dst := make([]int, m)
		distractors(dst, 4, n, seed+1)
		again := make([]int, m)
		distractors(again, 4, n, seed+1)
		if !slices.Equal(dst, again) {
			t.Fatalf("seed %d: draws differ: %v, %v", seed+1, dst, again)
		}
		seen := map[int]bool{}
		for _, d := range dst {
			if d < 0 || d >= n || d == 4 || seen[d] {
				t.Fatalf("seed %d: bad draw %v", seed+1, dst)
			}
			seen[d] = true
			count[d]++
		}
	}
	// Uniform: each of the 9 other documents is drawn 9000·3/9 = 3000 times;
	// the binomial standard deviation is √(27000·(1/9)·(8/9)) ≈ 52.
	for d, c := range count {
		if d != 4 && math.Abs(float64(c)-3000) > 300 {
			t.Errorf("document %d drawn %d times, want about 3000", d, c)
		}
	}
	all := make([]int, n-1)
	distractors(all, 0, n, 1)
	slices.Sort(all)
	if !slices.Equal(all, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("all distractors: %v", all)
	}
}

func TestRRFByHand(t *testing.T) {
	// k = 60:
	//   doc 1: 1/61 + 1/62 = 0.0325216…
	//   doc 3: 1/63 + 1/61 = 0.0322662…
	//   doc 2: 1/62        = 0.0161290…
	if got := RRF(60, []int{1, 2, 3}, []int{3, 1}); !slices.Equal(got, []int{1, 3, 2}) {
		t.Errorf("RRF = %v, want [1 3 2]", got)
	}
	// With k = 0 a list head scores 1, as much as two second places
	// (1/2 + 1/2): all four documents tie and come out by index.
	if got := RRF(0, []int{7, 5}, []int{9, 5}, []int{6}); !slices.Equal(got, []int{5, 6, 7, 9}) {
		t.Errorf("RRF k=0 = %v, want [5 6 7 9]", got)
	}
	if got := RRF(60); len(got) != 0 {
		t.Errorf("RRF of nothing = %v", got)
	}
}

func TestFusionByHand(t *testing.T) {
	// Two systems over 4 documents, one query ("0").
	a := &fixedRanker{score: [][]float64{{4, 3, 2, 1}}} // order 0 1 2 3
	b := &fixedRanker{score: [][]float64{{1, 1, 5, 0}}} // order 2, then 0 and 1 tied, 3
	f := Fusion{Systems: []Ranker{a, b}, K: 60}
	// Rank (depth 100 covers everything; TopK breaks b's tie by index):
	//   a: 0 1 2 3 → 1/61 1/62 1/63 1/64;  b: 2 0 1 3 → 1/61 1/62 1/63 1/64
	//   0: 1/61+1/62  1: 1/62+1/63  2: 1/63+1/61  3: 2/64
	//   0 = 0.032522 > 2 = 0.032266 > 1 = 0.032002 > 3 = 0.03125
	if got := f.Rank("0", 3); !slices.Equal(got, []int{0, 2, 1}) {
		t.Errorf("Fusion.Rank = %v, want [0 2 1]", got)
	}
	// RankScored gives the fused scores that made that order (Score, below,
	// fuses the ranks within the documents it is given, which differ).
	docs, fused := f.RankScored("0", 3)
	wantFused := []float64{1.0/61 + 1.0/62, 1.0/63 + 1.0/61, 1.0/62 + 1.0/63}
	if !slices.Equal(docs, []int{0, 2, 1}) {
		t.Errorf("Fusion.RankScored documents %v, want [0 2 1]", docs)
	}
	for i := range wantFused {
		if math.Abs(fused[i]-wantFused[i]) > 1e-15 {
			t.Errorf("Fusion.RankScored score %d = %.16g, want %.16g", i, fused[i], wantFused[i])
		}
	}
	// Score shares ranks among ties: in b, documents 0 and 1 both have rank 2.
	scores := make([]float64, 4)
	f.Score("0", []int{3, 1, 0, 2}, scores)
	want := []float64{
		1.0/64 + 1.0/64, // doc 3: rank 4 in a, 4 in b
		1.0/62 + 1.0/62, // doc 1: rank 2 in a, 2 (tied) in b
		1.0/61 + 1.0/62, // doc 0: rank 1 in a, 2 (tied) in b
		1.0/63 + 1.0/61, // doc 2: rank 3 in a, 1 in b
	}
	for i := range want {
		if math.Abs(scores[i]-want[i]) > 1e-15 {
			t.Errorf("Fusion.Score[%d] = %.16g, want %.16g", i, scores[i], want[i])
		}
	}
}

func ExampleRRF() {
	bm25 := []int{4, 1, 7}
	dense := []int{1, 9, 4}
	fmt.Println(RRF(60, bm25, dense))
	// Output: [1 4 9 7]
}

func ExampleEvaluate() {
	pairs := []Pair{
		{Query: "reads a whole file", Code: "func ReadFile(name string) ([]byte, error)"},
		// No term in common ("bytes" is not "byte"): a miss that a dense
		// encoder is meant to fix.
		{Query: "saves bytes to disk", Code: "func WriteFile(name string, data []byte) error"},
		{Query: "number of bytes in the buffer", Code: "func (b *Buffer) Len() int { return len(b.buf) }"},
	}
	var queries, codes []string
	for _, p := range pairs {
		queries, codes = append(queries, p.Query), append(codes, p.Code)
	}
	m := evaluate(NewBM25(codes), queries, len(codes), EvalOptions{})
	fmt.Printf("MRR@10 %.4f, R@1 %.4f, ranks %v\n", m.MRR10, m.Recall1, m.Ranks)
	// Output: MRR@10 0.6667, R@1 0.6667, ranks [1 0 1]
}

// evaluate is Evaluate without a deadline.
func evaluate(r Ranker, queries []string, nDocs int, opt EvalOptions) Metrics {
	m, err := Evaluate(context.Background(), r, queries, nDocs, opt)
	if err != nil {
		panic(err)
	}
	return m
}
