package nn_test

import (
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// TestEmbeddingChecks runs the lab's checks on nn.Embedding: finite differences, the
// accumulation contract, float32 agreement and the semantic checks (package
// lab proves each of them can fail, on the faults).
func TestEmbeddingChecks(t *testing.T) { runChecks(t, checks.Embedding(), checks.EmbeddingReference) }

func TestEmbeddingForward(t *testing.T) {
	// table rows 0: (1, 2), 1: (3, 4), 2: (5, 6); tokens (2, 0, 2) pick rows 2, 0, 2.
	e := nn.Embedding[float64]{V: 3, D: 2}
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
	e := nn.Embedding[float64]{V: 3, D: 2}
	dtable := make([]float64, 6)
	e.Backward(dtable, []float64{1, 10, 2, 20, 4, 40}, []int{2, 0, 2})
	near(t, "dtable", dtable, []float64{2, 20, 0, 0, 5, 50}, 0)
}

func TestEmbeddingFloat32(t *testing.T) {
	const v, d = 11, 7
	tokens := []int{3, 10, 0, 3, 5}
	r := newRand(5)
	table, dout := randn(r, v*d, 1), randn(r, len(tokens)*d, 1)
	out, dtable := make([]float64, len(tokens)*d), make([]float64, v*d)
	nn.Embedding[float64]{V: v, D: d}.Forward(out, tokens, table)
	nn.Embedding[float64]{V: v, D: d}.Backward(dtable, dout, tokens)
	out32, dtable32 := make([]float32, len(tokens)*d), make([]float32, v*d)
	nn.Embedding[float32]{V: v, D: d}.Forward(out32, tokens, to32(table))
	nn.Embedding[float32]{V: v, D: d}.Backward(dtable32, to32(dout), tokens)
	agree(t, "out", out, out32, 1e-7)
	agree(t, "dtable", dtable, dtable32, 1e-6)
}

func TestEmbeddingPanics(t *testing.T) {
	e := nn.Embedding[float64]{V: 3, D: 2}
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
