package model

import (
	"testing"

	"github.com/attnlab/attnlab/gradcheck"
)

func tinyConfig(tied bool) Config {
	return Config{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 11, MaxPositionEmbeddings: 64, TieWordEmbeddings: tied}
}

// TestModelGrad checks every parameter gradient of a 2-layer GQA model
// against finite differences, with left padding in one row and two packed
// documents in the other, tied and untied embeddings.
func TestModelGrad(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m, err := New[float64](tinyConfig(tied))
		if err != nil {
			t.Fatal(err)
		}
		p := m.NewParams()
		m.Init(p, 0.5, 1) // larger than 0.02 so every path carries signal
		b := &Batch{B: 2, T: 5,
			Tokens: []int{0, 3, 7, 1, 9, 2, 4, 4, 10, 5},
			Valid:  []bool{false, true, true, true, true, true, true, true, true, true},
			Seg:    []int{0, 0, 0, 0, 0, 0, 0, 1, 1, 1}}
		a := m.NewActs(b.B, b.T)
		loss := func() float64 {
			l, _, err := m.Forward(a, p, b)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		loss()
		g := m.NewParams()
		m.Backward(g, p, a, b)
		var params []gradcheck.Param
		gt := m.Tensors(g)
		for i, pt := range m.Tensors(p) {
			params = append(params, gradcheck.Param{Name: pt.Name, X: pt.Data, Grad: gt[i].Data})
		}
		r := gradcheck.Check(loss, params, gradcheck.Options{Precise: true, Eps: 2e-4, Rel: 1e-8})
		if err := r.Err(); err != nil {
			t.Errorf("tied=%v: %v", tied, err)
		}
		t.Logf("tied=%v: %d elements, max rel %.1e, norm rel %.1e", tied, r.Checked, r.MaxRel, r.NormRel)
	}
}
