package model

import (
	"fmt"
	"testing"
)

// BenchmarkDecodeStep measures one decoding step (a token per row, B = 1,
// greedy: no sampling) against a KV cache holding ctx tokens, for attnlab
// train's default model and the pretraining preset's, float32, random
// weights; ns/op is the time of a token.
func BenchmarkDecodeStep(b *testing.B) {
	for _, tc := range []struct {
		name string
		c    Config
	}{
		{"default", Config{HiddenSize: 128, IntermediateSize: 352, NumHiddenLayers: 4, NumAttentionHeads: 4, NumKeyValueHeads: 2,
			RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 2048, MaxPositionEmbeddings: 512, TieWordEmbeddings: true}},
		{"pretrain", Config{HiddenSize: 192, IntermediateSize: 512, NumHiddenLayers: 6, NumAttentionHeads: 6, NumKeyValueHeads: 2,
			RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 4096, MaxPositionEmbeddings: 512, TieWordEmbeddings: true}},
	} {
		for _, ctx := range []int{32, 256} {
			b.Run(fmt.Sprintf("%s/ctx=%d", tc.name, ctx), func(b *testing.B) {
				m, err := New[float32](tc.c)
				if err != nil {
					b.Fatal(err)
				}
				p := m.NewParams()
				m.Init(p, 0.02, 1)
				cache := m.NewCache(1, ctx+1)
				logits := make([]float32, ctx*tc.c.VocabSize)
				prompt := make([]int, ctx)
				for i := range prompt {
					prompt[i] = (i * 37) % tc.c.VocabSize
				}
				tok := []int{1}
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					cache.Reset()
					if err := m.Step(logits[:ctx*tc.c.VocabSize], cache, p, prompt, nil, ctx); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := m.Step(logits[:tc.c.VocabSize], cache, p, tok, nil, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}
