package retrieve

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// handDocs is the three-document corpus of TestBM25ByHand: lengths 2, 3 and
// 1 terms, so N = 3 and avgdl = 2.
var handDocs = []string{"alpha beta", "alpha alpha gamma", "delta"}

func TestBM25ByHand(t *testing.T) {
	x := NewBM25(handDocs)
	if x.Len() != 3 || x.AvgDocLen() != 2 || x.Vocabulary() != 4 || x.DocLen(1) != 3 {
		t.Fatalf("N %d, avgdl %g, V %d, |d1| %d; want 3, 2, 4, 3", x.Len(), x.AvgDocLen(), x.Vocabulary(), x.DocLen(1))
	}
	if x.DocFreq("alpha") != 2 || x.TermFreq("alpha", 1) != 2 || x.TermFreq("alpha", 2) != 0 || x.DocFreq("omega") != 0 {
		t.Fatalf("df/tf bookkeeping is wrong")
	}
	// idf(alpha) = ln(1 + (3−2+0.5)/(2+0.5)) = ln 1.6         = 0.47000362924573563
	// idf(gamma) = idf(delta) = ln(1 + (3−1+0.5)/(1+0.5))     = 0.9808292530117263
	// term weight  w(tf, |d|) = tf·2.2 / (tf + 1.2·(0.25 + 0.75·|d|/2))
	const idfAlpha, idfRare = 0.47000362924573563, 0.9808292530117263
	for _, c := range []struct {
		query string
		want  []float64
	}{
		// d0: w(1, 2) = 2.2/2.2 = 1; d1: w(2, 3) = 4.4/3.65.
		{"alpha", []float64{idfAlpha * 1, idfAlpha * 4.4 / 3.65, 0}},
		// A repeated query term counts twice.
		{"alpha Alpha", []float64{2 * idfAlpha, 2 * idfAlpha * 4.4 / 3.65, 0}},
		// d1: w(1, 3) = 2.2/2.65; d2: w(1, 1) = 2.2/1.75.
		{"gamma delta", []float64{0, idfRare * 2.2 / 2.65, idfRare * 2.2 / 1.75}},
		// Unknown and stop terms add nothing.
		{"the omega", []float64{0, 0, 0}},
	} {
		got := x.Scores(c.query)
		for d := range got {
			if math.Abs(got[d]-c.want[d]) > 1e-12 {
				t.Errorf("%q: doc %d scores %.15g, want %.15g", c.query, d, got[d], c.want[d])
			}
		}
	}
	// The same numbers, to 16 digits, from an independent calculation.
	if got := x.Scores("alpha")[1]; math.Abs(got-0.5665797174469143) > 1e-15 {
		t.Errorf("alpha, d1: %.16g", got)
	}
	if got := x.Scores("gamma delta"); math.Abs(got[1]-0.8142733421229427) > 1e-15 || math.Abs(got[2]-1.233042489500456) > 1e-15 {
		t.Errorf("gamma delta: %.16g", got)
	}

	for _, c := range []struct {
		query string
		k     int
		want  []int
	}{
		{"alpha", 10, []int{1, 0}}, // only matching documents
		{"gamma delta", 10, []int{2, 1}},
		{"gamma delta", 1, []int{2}},
		{"omega", 10, []int{}},
		{"alpha", 0, nil},
	} {
		if got := x.Rank(c.query, c.k); !slices.Equal(got, c.want) {
			t.Errorf("Rank(%q, %d) = %v, want %v", c.query, c.k, got, c.want)
		}
	}
	scores := make([]float64, 2)
	x.Score("gamma delta", []int{2, 0}, scores)
	if math.Abs(scores[0]-1.233042489500456) > 1e-15 || scores[1] != 0 {
		t.Errorf("Score over candidates [2 0] = %v", scores)
	}
}

// refBM25 scores every document directly from the formula, without an
// inverted index.
func refBM25(docs []string, query string) []float64 {
	const k1, b = 1.2, 0.75
	terms := make([][]string, len(docs))
	var total float64
	df := map[string]int{}
	for i, d := range docs {
		terms[i] = Terms(d)
		total += float64(len(terms[i]))
		seen := map[string]bool{}
		for _, t := range terms[i] {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	N := float64(len(docs))
	avgdl := total / N
	scores := make([]float64, len(docs))
	for i := range docs {
		for _, q := range Terms(query) {
			if df[q] == 0 {
				continue
			}
			tf := 0.0
			for _, t := range terms[i] {
				if t == q {
					tf++
				}
			}
			idf := math.Log(1 + (N-float64(df[q])+0.5)/(float64(df[q])+0.5))
			scores[i] += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(len(terms[i]))/avgdl))
		}
	}
	return scores
}

// refRank sorts documents with a positive score by decreasing score, then
// increasing index.
func refRank(scores []float64, k int) []int {
	var docs []int
	for i, s := range scores {
		if s > 0 {
			docs = append(docs, i)
		}
	}
	slices.SortStableFunc(docs, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	return docs[:min(k, len(docs))]
}

func TestBM25AgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("read write file buffer parse token scan encode decode http server client len cap")
	randomText := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	for _, n := range []int{1, 2, 17, 200} {
		docs := make([]string, n)
		for i := range docs {
			docs[i] = randomText(1 + rng.IntN(30))
		}
		x := NewBM25(docs)
		for q := range 20 {
			query := randomText(1 + q%5)
			want := refBM25(docs, query)
			got := x.Scores(query)
			for d := range want {
				if math.Abs(got[d]-want[d]) > 1e-12*math.Max(1, want[d]) {
					t.Fatalf("N=%d %q doc %d: %.15g, reference %.15g", n, query, d, got[d], want[d])
				}
			}
			// Equal scores must come out by index, so rank with the
			// index's own scores: the reference sums in another order.
			for _, k := range []int{1, 5, n + 3} {
				if r, w := x.Rank(query, k), refRank(got, k); !slices.Equal(r, w) {
					t.Fatalf("N=%d %q k=%d: Rank %v, reference %v", n, query, k, r, w)
				}
			}
		}
	}
}

func TestTopK(t *testing.T) {
	nan := math.NaN()
	s := []float64{0.5, -1, nan, 2, 0.5, 0, 2}
	for _, c := range []struct {
		k    int
		want []int
	}{
		{0, nil},
		{1, []int{3}},
		{3, []int{3, 6, 0}},
		{10, []int{3, 6, 0, 4, 5, 1}}, // NaN skipped; negative and zero kept
	} {
		if got := TopK(s, c.k); !slices.Equal(got, c.want) {
			t.Errorf("TopK(k=%d) = %v, want %v", c.k, got, c.want)
		}
	}
	if got := topK(s, 10, true); !slices.Equal(got, []int{3, 6, 0, 4}) {
		t.Errorf("positive-only top-k = %v", got)
	}
}

func ExampleBM25() {
	x := NewBM25([]string{
		"func ReadFile(name string) ([]byte, error)",
		"func WriteFile(name string, data []byte, perm FileMode) error",
		"func (b *Buffer) Len() int",
	})
	for _, d := range x.Rank("read a file", 3) {
		fmt.Printf("%d %.4f\n", d, x.Scores("read a file")[d])
	}
	// Output:
	// 0 1.4783
	// 1 0.5481
}
