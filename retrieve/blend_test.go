package retrieve

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestBlendByHand(t *testing.T) {
	// The systems of TestFusionByHand: a ranks 0 1 2 3 by small steps, b
	// puts document 2 far ahead of the others.
	a := &fixedRanker{score: [][]float64{{4, 3, 2, 1}}}
	b := &fixedRanker{score: [][]float64{{1, 1, 5, 0}}}
	bl := Blend{Systems: []Ranker{a, b}, Weights: []float64{0.3, 0.7}}
	// Over the union {0, 1, 2, 3} a rescales to 1, 2/3, 1/3, 0 and b to
	// 0.2, 0.2, 1, 0:
	//   0: 0.3 + 0.14 = 0.44   1: 0.2 + 0.14 = 0.34   2: 0.1 + 0.7 = 0.8   3: 0
	// Reciprocal rank fusion put document 0 first (TestFusionByHand); the
	// blend sees how far ahead b puts document 2.
	docs, scores := bl.RankScored("0", 4)
	if !slices.Equal(docs, []int{2, 0, 1, 3}) {
		t.Errorf("Blend.RankScored documents %v, want [2 0 1 3]", docs)
	}
	want := []float64{0.8, 0.44, 0.34, 0}
	for i := range want {
		if math.Abs(scores[i]-want[i]) > 1e-15 {
			t.Errorf("Blend.RankScored score %d = %.16g, want %.16g", i, scores[i], want[i])
		}
	}
	if got := bl.Rank("0", 2); !slices.Equal(got, []int{2, 0}) {
		t.Errorf("Blend.Rank(2) = %v, want [2 0]", got)
	}
	// Score rescales over the documents given: over {3, 1}, a gives 0, 1
	// and b 0, 1; over {0, 1}, b scores both 1 and adds nothing.
	s := make([]float64, 2)
	bl.Score("0", []int{3, 1}, s)
	if math.Abs(s[0]) > 1e-15 || math.Abs(s[1]-1) > 1e-15 {
		t.Errorf("Blend.Score over {3, 1} = %v, want [0 1]", s)
	}
	bl.Score("0", []int{0, 1}, s)
	if math.Abs(s[0]-0.3) > 1e-15 || s[1] != 0 {
		t.Errorf("Blend.Score over {0, 1} = %v, want [0.3 0]", s)
	}
	// equal blended scores come out by document index
	tie := Blend{Systems: []Ranker{&fixedRanker{score: [][]float64{{1, 2, 2, 0}}}}, Weights: []float64{1}}
	if got := tie.Rank("0", 3); !slices.Equal(got, []int{1, 2, 0}) {
		t.Errorf("ties: %v, want [1 2 0]", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a blend with a weight missing did not panic")
		}
	}()
	Blend{Systems: []Ranker{a, b}, Weights: []float64{1}}.Score("0", []int{0}, s)
}

// TestHybridSystem: the hybrid system is a Blend with BM25 weighed
// DefaultBM25Weight unless Systems.Hybrid says otherwise.
func TestHybridSystem(t *testing.T) {
	pairs := []Pair{{Query: "a", Code: "func A() {}"}, {Query: "b", Code: "func B() {}"}}
	dense := &fixedRanker{score: [][]float64{{1, 0}}}
	for _, c := range []struct {
		h    Hybrid
		want Ranker
	}{
		{Hybrid{}, Blend{Weights: []float64{DefaultBM25Weight, 1 - DefaultBM25Weight}}},
		{Hybrid{BM25Weight: 0.5}, Blend{Weights: []float64{0.5, 0.5}}},
		{Hybrid{RRF: true}, Fusion{}},
	} {
		s := NewSystems(pairs)
		s.Hybrid = c.h
		s.Dense = func(context.Context) (Ranker, error) { return dense, nil }
		sys, err := s.Get(context.Background(), "hybrid")
		if err != nil {
			t.Fatal(err)
		}
		switch want := c.want.(type) {
		case Blend:
			got, ok := sys.Ranker.(Blend)
			if !ok || !slices.Equal(got.Weights, want.Weights) || len(got.Systems) != 2 || got.Systems[1] != Ranker(dense) {
				t.Errorf("%+v: hybrid is %#v, want a Blend of bm25 and dense weighed %v", c.h, sys.Ranker, want.Weights)
			}
		case Fusion:
			if _, ok := sys.Ranker.(Fusion); !ok {
				t.Errorf("%+v: hybrid is %T, want Fusion", c.h, sys.Ranker)
			}
		}
	}
	for _, w := range []float64{-0.1, 1, math.NaN()} {
		if (Hybrid{BM25Weight: w}).Validate() == nil {
			t.Errorf("weight %v accepted", w)
		}
	}
	// bm25-translated is BM25 with the hybrid's table, and the hybrid's
	// lexical part; without a table it is refused by name
	s := NewSystems(pairs)
	s.Dense = func(context.Context) (Ranker, error) { return dense, nil }
	if _, err := s.Get(context.Background(), BM25Translated); err == nil || !strings.Contains(err.Error(), "needs a term translation table") {
		t.Errorf("bm25-translated without a table: %v", err)
	}
	tab := &Translation{To: map[string][]WeightedTerm{"a": {{"b", 1}}}}
	s = NewSystems(pairs)
	s.Hybrid = Hybrid{Translation: tab, TranslateAlpha: 0.5}
	s.Dense = func(context.Context) (Ranker, error) { return dense, nil }
	tr, err := s.Get(context.Background(), BM25Translated)
	if err != nil {
		t.Fatal(err)
	}
	bm, _ := s.Get(context.Background(), "bm25")
	hy, _ := s.Get(context.Background(), "hybrid")
	want := Translated{Index: bm.Ranker.(*BM25), Table: tab, Alpha: 0.5}
	if tr.Ranker != Ranker(want) || hy.Ranker.(Blend).Systems[0] != Ranker(want) {
		t.Errorf("bm25-translated is %#v and the hybrid's lexical part %#v, want %#v", tr.Ranker, hy.Ranker.(Blend).Systems[0], want)
	}
}

// opaque hides a Ranker's other methods (Exhaustive), so that a Blend
// ranks and scores through Rank and Score alone.
type opaque struct{ Ranker }

// TestBlendExhaustive: a Blend of BM25 and a dense Ranker, which score
// the whole corpus once per query (Exhaustive), ranks and scores as the
// Blend of the same systems asked through Rank and Score; and an
// Exhaustive system's Top of ScoreAll is its Rank.
func TestBlendExhaustive(t *testing.T) {
	codes := []string{
		"func ReadFile(name string) ([]byte, error)", "func WriteFile(name string, data []byte) error",
		"func (b *Buffer) Len() int { return len(b.buf) }", "func Open(name string) (*File, error)",
		"func ReadAll(r Reader) ([]byte, error)", "func (f *File) Close() error",
		"func Contains(s, substr string) bool", "func (b *Buffer) Write(p []byte) (int, error)",
	}
	bm := NewBM25(codes)
	dn := Dense{Query: hashEncoder{D: 16}, Index: NewFlat(hashEncoder{D: 16}, codes)}
	fast := Blend{Systems: []Ranker{bm, dn}, Weights: []float64{0.3, 0.7}, Depth: 3}
	slow := Blend{Systems: []Ranker{opaque{bm}, opaque{dn}}, Weights: []float64{0.3, 0.7}, Depth: 3}
	for _, q := range []string{"read a file", "length of the buffer", "close", "nothing in common"} {
		for _, ex := range []Exhaustive{bm, dn} {
			if got, want := ex.Top(ex.ScoreAll(q), 5), ex.Rank(q, 5); !slices.Equal(got, want) {
				t.Errorf("%q: %T: Top(ScoreAll) %v, Rank %v", q, ex, got, want)
			}
		}
		d1, s1 := fast.RankScored(q, 5)
		d2, s2 := slow.RankScored(q, 5)
		if !slices.Equal(d1, d2) || !slices.Equal(s1, s2) {
			t.Errorf("%q: exhaustive %v %v, through Rank and Score %v %v", q, d1, s1, d2, s2)
		}
	}
}
