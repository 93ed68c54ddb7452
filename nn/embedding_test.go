package nn

import (
	"fmt"
	"testing"
)

type embeddingBackward = func(dtable, dout []float64, tokens []int)

// embeddingFD builds an Embedding check over the table. The tokens repeat
// (2 three times) and leave row 5 unused, so that both the scatter-add and
// the rows that get nothing are checked.
func embeddingFD(e Embedding[float64], seed uint64, backward embeddingBackward) fdCase {
	tokens := []int{2, 0, 2, 4, 2, 1, 3, 0}
	r := newRand(seed)
	table := randn(r, e.V*e.D, 1)
	g := randn(r, len(tokens)*e.D, 1)
	out := make([]float64, len(tokens)*e.D)
	return fdCase{
		loss: func() float64 {
			e.Forward(out, tokens, table)
			return dot(out, g)
		},
		inputs:   []input{{"table", table}},
		backward: func(grads [][]float64) { backward(grads[0], g, tokens) },
	}
}

func TestEmbeddingForward(t *testing.T) {
	// table rows 0: (1, 2), 1: (3, 4), 2: (5, 6); tokens (2, 0, 2) pick rows 2, 0, 2.
	e := Embedding[float64]{V: 3, D: 2}
	out := make([]float64, 6)
	e.Forward(out, []int{2, 0, 2}, []float64{1, 2, 3, 4, 5, 6})
	near(t, "out", out, []float64{5, 6, 1, 2, 5, 6}, 0)

	// One token.
	out = make([]float64, 2)
	e.Forward(out, []int{1}, []float64{1, 2, 3, 4, 5, 6})
	near(t, "out n=1", out, []float64{3, 4}, 0)
}

// TestEmbeddingBackward checks the scatter-add by hand: token 2 occurs twice,
// so its row gets the sum of two gradient rows; row 1 is unused and stays 0.
func TestEmbeddingBackward(t *testing.T) {
	e := Embedding[float64]{V: 3, D: 2}
	dtable := make([]float64, 6)
	e.Backward(dtable, []float64{1, 10, 2, 20, 4, 40}, []int{2, 0, 2})
	near(t, "dtable", dtable, []float64{2, 20, 0, 0, 5, 50}, 0)
}

func TestEmbeddingGrad(t *testing.T) {
	for _, s := range []struct{ v, d int }{{6, 1}, {6, 5}, {7, 3}} {
		t.Run(fmt.Sprintf("V=%d/D=%d", s.v, s.d), func(t *testing.T) {
			e := Embedding[float64]{V: s.v, D: s.d}
			r := embeddingFD(e, 1, e.Backward).check()
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d elements, max rel %.2e, max abs %.2e (eps %g)", r.Checked, r.MaxRel, r.MaxAbs, r.Eps)
		})
	}
	t.Run("directional/V=53/D=17", func(t *testing.T) {
		e := Embedding[float64]{V: 53, D: 17}
		r := embeddingFD(e, 2, e.Backward).directional(8)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d directions, max rel %.2e", r.Checked, r.MaxRel)
	})
}

func TestEmbeddingAccumulates(t *testing.T) {
	e := Embedding[float64]{V: 6, D: 3}
	if err := embeddingFD(e, 3, e.Backward).accumulates(); err != nil {
		t.Error(err)
	}
}

func TestEmbeddingGradRejectsMutants(t *testing.T) {
	e := Embedding[float64]{V: 6, D: 3}
	const d = 3
	rejectMutants(t, e.Backward, []mutant[embeddingBackward]{
		{name: "scatter by assignment (a repeated token keeps only its last row)", backward: func(dtable, dout []float64, tokens []int) {
			for i, tok := range tokens {
				copy(dtable[tok*d:(tok+1)*d], dout[i*d:(i+1)*d])
			}
		}},
		{name: "row chosen by position instead of token", backward: func(dtable, dout []float64, tokens []int) {
			for i := range tokens {
				for j := range d {
					dtable[(i%6)*d+j] += dout[i*d+j]
				}
			}
		}},
		{name: "= instead of +=", byAccumulate: true, backward: func(dtable, dout []float64, tokens []int) {
			clear(dtable)
			e.Backward(dtable, dout, tokens)
		}},
	}, func(b embeddingBackward) fdCase { return embeddingFD(e, 4, b) })
}

func TestEmbeddingFloat32(t *testing.T) {
	const v, d = 11, 7
	tokens := []int{3, 10, 0, 3, 5}
	r := newRand(5)
	table, dout := randn(r, v*d, 1), randn(r, len(tokens)*d, 1)
	out, dtable := make([]float64, len(tokens)*d), make([]float64, v*d)
	Embedding[float64]{V: v, D: d}.Forward(out, tokens, table)
	Embedding[float64]{V: v, D: d}.Backward(dtable, dout, tokens)
	out32, dtable32 := make([]float32, len(tokens)*d), make([]float32, v*d)
	Embedding[float32]{V: v, D: d}.Forward(out32, tokens, to32(table))
	Embedding[float32]{V: v, D: d}.Backward(dtable32, to32(dout), tokens)
	agree(t, "out", out, out32, 1e-7)
	agree(t, "dtable", dtable, dtable32, 1e-6)
}

func TestEmbeddingPanics(t *testing.T) {
	e := Embedding[float64]{V: 3, D: 2}
	out := []float64{-1, -1, -1, -1}
	panics(t, "nn: Embedding.Forward: tokens[1] = 3 is outside [0, V) with V = 3", func() {
		e.Forward(out, []int{0, 3}, make([]float64, 6))
	})
	if out[0] != -1 {
		t.Errorf("Forward wrote output before rejecting a token")
	}
	panics(t, "nn: Embedding.Backward: tokens[0] = -1 is outside [0, V)", func() {
		e.Backward(make([]float64, 6), make([]float64, 2), []int{-1})
	})
	panics(t, "nn: Embedding.Forward: len(out) = 3, want len(tokens)*D = 4", func() {
		e.Forward(make([]float64, 3), []int{0, 1}, make([]float64, 6))
	})
}
