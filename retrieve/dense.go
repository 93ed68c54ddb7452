package retrieve

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/internal/vec"
)

// An Encoder maps a text to a vector. A dual encoder is a pair of them, one
// for queries and one for documents (or one used for both).
type Encoder interface {
	// Dim returns the length of the vectors.
	Dim() int
	// Encode writes the vector of text into dst[:Dim()].
	Encode(dst []float32, text string)
}

// Flat is an exhaustive index of N vectors of D float32s: a search computes
// every dot product.
type Flat struct {
	D    int
	Vecs []float32 // (N, D) row-major: vector i is Vecs[i*D : (i+1)*D]
}

// NewFlat encodes docs with enc; vector i of the index is docs[i]'s.
func NewFlat(enc Encoder, docs []string) *Flat {
	D := enc.Dim()
	f := &Flat{D: D, Vecs: make([]float32, len(docs)*D)}
	for i, d := range docs {
		enc.Encode(f.Vecs[i*D:(i+1)*D], d)
	}
	return f
}

// Len returns the number of vectors.
func (f *Flat) Len() int {
	if f.D == 0 {
		return 0
	}
	return len(f.Vecs) / f.D
}

// CheckUnit returns an error unless every vector is finite and of unit
// length within tol (a cosine index stores unit vectors; a NaN scores no
// document and a zero vector scores every one 0). The error names the first
// bad vector, and for vectors of norm 0 how many there are.
func (f *Flat) CheckUnit(tol float64) error {
	if i := vec.NonFinite(f.Vecs); i >= 0 {
		return fmt.Errorf("vector %d holds %v (element %d); the embeddings must be finite", i/f.D, f.Vecs[i], i%f.D)
	}
	zero, first := 0, -1
	for i := range f.Len() {
		x := f.Vecs[i*f.D : (i+1)*f.D]
		n := math.Sqrt(float64(vec.Dot32(x, x)))
		if n == 0 {
			if zero++; first < 0 {
				first = i
			}
			continue
		}
		if math.Abs(n-1) > tol {
			return fmt.Errorf("vector %d has norm %.6g, want unit vectors", i, n)
		}
	}
	if zero > 0 {
		return fmt.Errorf("%d of %d vectors are zero (the first is vector %d); they would score every query 0", zero, f.Len(), first)
	}
	return nil
}

// Dots writes the dot product of q with vector docs[i] into dst[i]:
//
//	dst[i] = Σ_j q[j] · Vecs[docs[i]*D + j]
//
// It panics if len(q) != D or dst is shorter than docs.
func (f *Flat) Dots(dst []float64, q []float32, docs []int) {
	if len(q) != f.D || len(dst) < len(docs) {
		panic(fmt.Sprintf("retrieve: Flat.Dots: len(q) = %d, D = %d, len(dst) = %d, len(docs) = %d", len(q), f.D, len(dst), len(docs)))
	}
	for i, d := range docs {
		dst[i] = float64(vec.Dot32(q, f.Vecs[d*f.D:(d+1)*f.D]))
	}
}

// Search returns the k vectors with the largest dot product with q, largest
// first, equal products by increasing index. For cosine similarity, store
// and search unit vectors (see Normalize). It panics if len(q) != D.
func (f *Flat) Search(q []float32, k int) []int {
	return TopK(f.DotsAll(q), k)
}

// DotsAll returns the dot product of q with every vector, in index order.
// It panics if len(q) != D.
func (f *Flat) DotsAll(q []float32) []float64 {
	if len(q) != f.D {
		panic(fmt.Sprintf("retrieve: Flat.DotsAll: len(q) = %d, D = %d", len(q), f.D))
	}
	scores := make([]float64, f.Len())
	for i := range scores {
		scores[i] = float64(vec.Dot32(q, f.Vecs[i*f.D:(i+1)*f.D]))
	}
	return scores
}

// Normalize scales x to unit Euclidean length; a zero vector is left as is.
func Normalize(x []float32) {
	n := math.Sqrt(float64(vec.Dot32(x, x)))
	if n > 0 {
		vec.Scale32(float32(1/n), x)
	}
}

// Dense is the Ranker of a dual encoder: queries encoded by Query, searched
// in an index of document vectors.
type Dense struct {
	Query Encoder
	Index *Flat
}

// Rank returns the k documents whose vectors have the largest dot product
// with the query's.
func (d Dense) Rank(query string, k int) []int {
	q := make([]float32, d.Query.Dim())
	d.Query.Encode(q, query)
	return d.Index.Search(q, k)
}

// ScoreAll returns the dot product of the query's vector with every
// document's (Exhaustive).
func (d Dense) ScoreAll(query string) []float64 {
	q := make([]float32, d.Query.Dim())
	d.Query.Encode(q, query)
	return d.Index.DotsAll(q)
}

// Top returns the documents of Rank from the scores of ScoreAll (Exhaustive).
func (d Dense) Top(scores []float64, k int) []int { return TopK(scores, k) }

// Score writes the dot products of the query's vector with those of docs.
func (d Dense) Score(query string, docs []int, scores []float64) {
	q := make([]float32, d.Query.Dim())
	d.Query.Encode(q, query)
	d.Index.Dots(scores, q, docs)
}
