package checks

import (
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

// EmbeddingImpl is an Embedding forward and backward in float64, with the
// signatures of nn.Embedding's methods taken as method expressions.
type EmbeddingImpl struct {
	Forward  func(e nn.Embedding[float64], out []float64, tokens []int, table []float64)
	Backward func(e nn.Embedding[float64], dtable, dout []float64, tokens []int)
}

// EmbeddingReference is nn.Embedding.
var EmbeddingReference = EmbeddingImpl{Forward: nn.Embedding[float64].Forward, Backward: nn.Embedding[float64].Backward}

// embeddingDiff differentiates out with respect to the table (V, D).
func embeddingDiff(impl EmbeddingImpl, V, D int, tokens []int, seed uint64) Diff {
	e := nn.Embedding[float64]{V: V, D: D}
	table := randn(seed, V*D, 1)
	return Diff{
		Name:     shape("V", V, "D", D, "tokens", len(tokens), "repeats", len(tokens)-embeddingDistinct(tokens)),
		Inputs:   []gradcheck.Param{{Name: "table", X: table}},
		Out:      len(tokens) * D,
		Forward:  func(out []float64) { impl.Forward(e, out, tokens, table) },
		Backward: func(g [][]float64, dout []float64) { impl.Backward(e, g[0], dout, tokens) },
	}
}

// embeddingDistinct counts the distinct tokens.
func embeddingDistinct(tokens []int) int {
	seen := map[int]bool{}
	for _, t := range tokens {
		seen[t] = true
	}
	return len(seen)
}

// Embedding returns the checks of Embedding. Every case repeats tokens, so
// a scatter that overwrites a row instead of adding to it is measured; all
// but the smallest leave rows unused, whose gradient must stay zero.
func Embedding() []Check[EmbeddingImpl] {
	small := func(impl EmbeddingImpl) []Diff {
		return []Diff{
			embeddingDiff(impl, 1, 1, []int{0, 0}, 1),
			embeddingDiff(impl, 5, 3, []int{1, 3, 1, 1, 4, 3}, 2),
			embeddingDiff(impl, 7, 4, []int{6, 0, 6, 2}, 3),
		}
	}
	big := func(impl EmbeddingImpl) []Diff {
		tokens := make([]int, 200)
		for i := range tokens {
			tokens[i] = (i * i * 7) % 97 // 97 is prime: 49 distinct rows, each about four times
		}
		return []Diff{embeddingDiff(impl, 100, 32, tokens, 4)}
	}
	return append(gradientChecks("Embedding", small, big),
		Check[EmbeddingImpl]{Name: "lookup", Kind: Semantic, Run: embeddingLookup,
			Claim: "out[i,:] is a bit-exact copy of table[tokens[i],:], for repeated and boundary tokens 0 and V−1",
			Limit: "the forward only; finite differences tie the backward to it"},
	)
}

func embeddingLookup(impl EmbeddingImpl) Result {
	const V, D = 9, 5
	tokens := []int{8, 0, 3, 3, 8, 1}
	e := nn.Embedding[float64]{V: V, D: D}
	table := randn(160, V*D, 1)
	out := make([]float64, len(tokens)*D)
	if err := protect(func() error { impl.Forward(e, out, tokens, table); return nil }); err != nil {
		return errored(err, "%v")
	}
	want := make([]float64, 0, len(out))
	for _, t := range tokens {
		want = append(want, table[t*D:(t+1)*D]...)
	}
	if d, msg := compare(0, pair{"out", out, want}); msg != "" {
		res := fail("tokens %v: %s", tokens, msg)
		res.Error = d
		return res
	}
	return pass("tokens %v: every row copied bit for bit", tokens)
}
