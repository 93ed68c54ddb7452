package retrieve

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// hashEncoder is a stand-in for a trained encoder: the unit-length count
// vector of a text's Terms hashed into D buckets.
type hashEncoder struct{ D int }

func (h hashEncoder) Dim() int { return h.D }

func (h hashEncoder) Encode(dst []float32, text string) {
	clear(dst[:h.D])
	for _, t := range Terms(text) {
		f := fnv.New32a()
		f.Write([]byte(t))
		dst[f.Sum32()%uint32(h.D)]++
	}
	Normalize(dst[:h.D])
}

func TestFlatSearchAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ N, D int }{{1, 1}, {7, 3}, {100, 17}, {64, 64}} {
		f := &Flat{D: c.D, Vecs: make([]float32, c.N*c.D)}
		for i := range f.Vecs {
			f.Vecs[i] = float32(rng.NormFloat64())
		}
		q := make([]float32, c.D)
		for i := range q {
			q[i] = float32(rng.NormFloat64())
		}
		ref := make([]float64, c.N)
		for i := range ref {
			var s float64
			for j := range q {
				s += float64(q[j]) * float64(f.Vecs[i*c.D+j])
			}
			ref[i] = s
		}
		all := make([]int, c.N)
		for i := range all {
			all[i] = i
		}
		dots := make([]float64, c.N)
		f.Dots(dots, q, all)
		for i := range ref {
			if math.Abs(dots[i]-ref[i]) > 1e-5*(1+math.Abs(ref[i])) {
				t.Fatalf("N=%d D=%d: dot %d = %g, reference %g", c.N, c.D, i, dots[i], ref[i])
			}
		}
		// Rank by the kernel's own dots: the reference sums in another order.
		if got, want := f.Search(q, 5), TopK(dots, 5); !slices.Equal(got, want) {
			t.Errorf("N=%d D=%d: Search %v, want %v", c.N, c.D, got, want)
		}
		if f.Len() != c.N {
			t.Errorf("Len %d, want %d", f.Len(), c.N)
		}
	}
}

func TestFlatPanicsOnDimension(t *testing.T) {
	f := &Flat{D: 3, Vecs: make([]float32, 6)}
	for name, call := range map[string]func(){
		"Search": func() { f.Search(make([]float32, 2), 1) },
		"Dots":   func() { f.Dots(make([]float64, 2), make([]float32, 4), []int{0, 1}) },
		"dst":    func() { f.Dots(make([]float64, 1), make([]float32, 3), []int{0, 1}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			call()
		}()
	}
}

func TestNormalize(t *testing.T) {
	x := []float32{3, 4}
	Normalize(x)
	if math.Abs(float64(x[0])-0.6) > 1e-7 || math.Abs(float64(x[1])-0.8) > 1e-7 {
		t.Errorf("Normalize(3, 4) = %v", x)
	}
	z := []float32{0, 0}
	Normalize(z)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("Normalize(0) = %v", z)
	}
}

// TestDenseAndHybridPlugIn runs a dense system and its fusion with BM25
// through Evaluate, the way trained encoders will be.
func TestDenseAndHybridPlugIn(t *testing.T) {
	docs := []string{
		"func ReadFile(name string) ([]byte, error)",
		"func WriteFile(name string, data []byte) error",
		"func (b *Buffer) Len() int",
		"func ParseInt(s string, base int) (int64, error)",
	}
	queries := []string{"read file", "write file data", "buffer len", "parse int base"}
	enc := hashEncoder{D: 64}
	dense := Dense{Query: enc, Index: NewFlat(enc, docs)}
	hybrid := Fusion{Systems: []Ranker{NewBM25(docs), dense}}
	for name, r := range map[string]Ranker{"dense": dense, "hybrid": hybrid} {
		m := evaluate(r, queries, len(docs), EvalOptions{})
		if m.MRR10 != 1 || m.CSNMRR != 1 {
			t.Errorf("%s: MRR@10 %g, CSN MRR %g; want 1 on this easy corpus", name, m.MRR10, m.CSNMRR)
		}
	}
}
