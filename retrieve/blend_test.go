package retrieve

import (
	"context"
	"math"
	"slices"
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
}
