package faults

import (
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// Embedding returns the faults of Embedding: nn.Embedding with a broken
// backward.
func Embedding() []Fault[checks.EmbeddingImpl] {
	ref := checks.EmbeddingReference
	return []Fault[checks.EmbeddingImpl]{
		{Name: "embedding-scatter-assigned", Impl: with(ref, func(i *checks.EmbeddingImpl) { i.Backward = embeddingScatterAssigned }),
			Breaks: "dtable[tokens[i],:] = dout[i,:]: a repeated token keeps only its last occurrence's gradient"},
		{Name: "embedding-row-by-position", Impl: with(ref, func(i *checks.EmbeddingImpl) { i.Backward = embeddingRowByPosition }),
			Breaks: "the gradient of output row i goes to table row i mod V, the token's position, instead of row tokens[i]"},
		{Name: "embedding-dtable-assigned", FDBlind: true, Impl: with(ref, func(i *checks.EmbeddingImpl) { i.Backward = embeddingDTableAssigned }),
			Breaks: "dtable cleared before the scatter: with a tied LM head, the head's gradient in the same buffer is lost"},
	}
}

func embeddingScatterAssigned(e nn.Embedding[float64], dtable, dout []float64, tokens []int) {
	D := e.D
	for i, tok := range tokens {
		copy(dtable[tok*D:(tok+1)*D], dout[i*D:(i+1)*D]) // += belongs here
	}
}

func embeddingRowByPosition(e nn.Embedding[float64], dtable, dout []float64, tokens []int) {
	D := e.D
	for i := range tokens {
		row := i % e.V // tokens[i] belongs here
		for j := range D {
			dtable[row*D+j] += dout[i*D+j]
		}
	}
}

func embeddingDTableAssigned(e nn.Embedding[float64], dtable, dout []float64, tokens []int) {
	clear(dtable)
	e.Backward(dtable, dout, tokens)
}
