package dense

import (
	"fmt"
	"testing"

	"github.com/attnlab/attnlab/model"
)

func benchEncoder(b *testing.B) *Encoder[float32] {
	cfg := model.Config{HiddenSize: 128, IntermediateSize: 344, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 4,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 4096, MaxPositionEmbeddings: 256, TieWordEmbeddings: true}
	m, err := model.New[float32](cfg)
	if err != nil {
		b.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	return &Encoder[float32]{Model: m, Params: p}
}

// BenchmarkEncoder times a forward and backward of B sequences of T tokens
// and reports tokens per second.
func BenchmarkEncoder(b *testing.B) {
	e := benchEncoder(b)
	for _, s := range []struct{ B, T int }{{1, 32}, {1, 64}, {1, 128}, {1, 256}, {4, 32}} {
		b.Run(fmt.Sprintf("B=%d/T=%d", s.B, s.T), func(b *testing.B) {
			a := e.NewActs(s.B, s.T)
			seqs := make([][]int, s.B)
			for i := range seqs {
				for t := range s.T {
					seqs[i] = append(seqs[i], (i*31+t*7)%4096)
				}
			}
			g := e.Model.NewParams()
			dOut := make([]float32, s.B*s.T*128)
			for i := range dOut {
				dOut[i] = float32(i%7) * 1e-3
			}
			for b.Loop() {
				if err := e.Forward(a, seqs); err != nil {
					b.Fatal(err)
				}
				e.Backward(g, a, dOut)
			}
			b.ReportMetric(float64(b.N*s.B*s.T)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
