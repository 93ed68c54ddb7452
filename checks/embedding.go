package checks

import (
	"fmt"

	"github.com/attnlab/attnlab/nn"
)

// EmbeddingOps is an Embedding forward and backward in precision T, with
// the signatures of nn.Embedding's methods taken as method expressions.
type EmbeddingOps[T nn.Float] struct {
	Forward  func(e nn.Embedding[T], out []T, tokens []int, table []T)
	Backward func(e nn.Embedding[T], dtable, dout []T, tokens []int)
}

// EmbeddingImpl is a token embedding: its float64 and float32 paths.
type EmbeddingImpl struct {
	EmbeddingOps[float64]
	F32 EmbeddingOps[float32]
}

func embeddingOps[T nn.Float]() EmbeddingOps[T] {
	return EmbeddingOps[T]{Forward: nn.Embedding[T].Forward, Backward: nn.Embedding[T].Backward}
}

// EmbeddingReference is nn.Embedding.
var EmbeddingReference = EmbeddingImpl{embeddingOps[float64](), embeddingOps[float32]()}

// embeddingCase differentiates out with respect to the table (V, D).
func embeddingCase[T nn.Float](ops EmbeddingOps[T], V, D int, tokens []int, seed uint64) Case[T] {
	e := nn.Embedding[T]{V: V, D: D}
	table := randT[T](seed, V*D, 1)
	return Case[T]{
		Name:     shape("V", V, "D", D, "tokens", len(tokens), "repeats", len(tokens)-embeddingDistinct(tokens)),
		Inputs:   []Input[T]{{"table", table}},
		Out:      len(tokens) * D,
		Forward:  func(out []T) error { ops.Forward(e, out, tokens, table); return nil },
		Backward: func(g [][]T, dout []T) error { ops.Backward(e, g[0], dout, tokens); return nil },
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

// embeddingTokens returns n tokens (i²·7 + i) mod V: repeated, and (for n
// well below V) leaving rows unused.
func embeddingTokens(n, V int) []int {
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = (i*i*7 + i) % V
	}
	return tokens
}

// embeddingCases repeat tokens in every case, so a scatter that overwrites a
// row instead of adding to it is measured; all but the smallest leave rows
// unused, whose gradient must stay zero.
func embeddingCases[T nn.Float](ops EmbeddingOps[T], big bool) []Case[T] {
	if big {
		tokens := make([]int, 200)
		for i := range tokens {
			tokens[i] = (i * i * 7) % 97 // 97 is prime: 49 distinct rows, each about four times
		}
		return []Case[T]{embeddingCase(ops, 100, 32, tokens, 4)}
	}
	return []Case[T]{
		embeddingCase(ops, 1, 1, []int{0, 0}, 1),
		embeddingCase(ops, 5, 3, []int{1, 3, 1, 1, 4, 3}, 2),
		embeddingCase(ops, 7, 4, []int{6, 0, 6, 2}, 3),
	}
}

// embeddingLookupTokens are the tokens of lookup, from a vocabulary of
// embeddingLookupV: repeats and the boundary tokens 0 and V−1.
var (
	embeddingLookupTokens              = []int{8, 0, 3, 3, 8, 1}
	embeddingLookupV, embeddingLookupD = 9, 5
)

// Embedding returns the suite of Embedding.
func Embedding() Suite[EmbeddingImpl] {
	spec := gradSpec[EmbeddingImpl]{op: "Embedding", ref: EmbeddingReference, dirs: 4,
		cases:   func(i EmbeddingImpl, big bool) []Case[float64] { return embeddingCases(i.EmbeddingOps, big) },
		cases32: func(i EmbeddingImpl, big bool) []Case[float32] { return embeddingCases(i.F32, big) }}
	return Suite[EmbeddingImpl]{
		Guide: OpGuide{
			What: "Token embedding: a row lookup in a table (V, D).",
			Forward: []Step{
				{Eq: "out[i] = table[tokens[i]]", Shape: "tokens [n], table [V,D] → out [n,D]", Why: "a copy"},
			},
			Backward: []Step{
				{Eq: "dtable[tokens[i]] += dout[i]", Shape: "dtable [V,D]",
					Why: "a scatter-add: a token that occurs twice gets the sum of both rows' gradients"},
			},
		},
		Checks: append(spec.checks(),
			Check[EmbeddingImpl]{Name: "lookup", Kind: Semantic, Run: embeddingLookup,
				Claim: "out[i,:] is a bit-exact copy of table[tokens[i],:], for repeated and boundary tokens 0 and V−1",
				Limit: "the forward only; finite differences tie the backward to it",
				Long: Long{
					Tests:  "out[i,:] is a bit-exact copy of table[tokens[i],:], with repeated tokens and the boundary tokens 0 and V−1",
					Shapes: fmt.Sprintf("tokens %v, table [%d,%d]", embeddingLookupTokens, embeddingLookupV, embeddingLookupD),
					Proves: "the forward is a lookup",
					Cannot: "the backward: finite differences tie it to this forward",
				}},
		),
		At: func(impl EmbeddingImpl, s Sizes, seed uint64) Case[float64] {
			return embeddingCase(impl.EmbeddingOps, s.Dim, s.D, embeddingTokens(s.B*s.T, s.Dim), seed)
		},
		At32: func(impl EmbeddingImpl, s Sizes, seed uint64) Case[float32] {
			return embeddingCase(impl.F32, s.Dim, s.D, embeddingTokens(s.B*s.T, s.Dim), seed)
		},
		Reads: "B·T tokens (i²·7 + i) mod Dim, repeated, from a vocabulary of Dim rows of width D",
	}
}

func embeddingLookup(impl EmbeddingImpl) Result {
	V, D, tokens := embeddingLookupV, embeddingLookupD, embeddingLookupTokens
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
		return measured(fail("tokens %v: %s", tokens, msg), d)
	}
	return pass("tokens %v: every row copied bit for bit", tokens)
}
