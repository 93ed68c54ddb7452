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
	}
}

func embeddingScatterAssigned(e nn.Embedding[float64], dtable, dout []float64, tokens []int) {
	D := e.D
	for i, tok := range tokens {
		copy(dtable[tok*D:(tok+1)*D], dout[i*D:(i+1)*D]) // += belongs here
	}
}
