package train

import (
	"fmt"
	"testing"

	"github.com/attnlab/attnlab/model"
)

// BenchmarkTrainStep measures training throughput of attnlab train's default
// model (dim 128, 4 layers, 4/2 heads, ffn 352, vocabulary 2048, tied
// embeddings) on batches of 8 windows of 128 tokens, in tokens per second.
func BenchmarkTrainStep(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			benchTrainStep(b, model.Config{HiddenSize: 128, IntermediateSize: 352, NumHiddenLayers: 4,
				NumAttentionHeads: 4, NumKeyValueHeads: 2, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 2048,
				MaxPositionEmbeddings: 256, TieWordEmbeddings: true}, 128, 8, shards)
		})
	}
}

// BenchmarkTrainStepPretrain measures the pretraining preset's model (dim
// 192, 6 layers, 6/2 heads, ffn 512, vocabulary 4096) on its batches of 8
// windows of 512 tokens.
func BenchmarkTrainStepPretrain(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			benchTrainStep(b, model.Config{HiddenSize: 192, IntermediateSize: 512, NumHiddenLayers: 6,
				NumAttentionHeads: 6, NumKeyValueHeads: 2, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 4096,
				MaxPositionEmbeddings: 512, TieWordEmbeddings: true}, 512, 8, shards)
		})
	}
}

func benchTrainStep(b *testing.B, cfg model.Config, T, B, shards int) {
	m, err := model.New[float32](cfg)
	if err != nil {
		b.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	w := &Windows{T: T}
	for i := range 64 {
		toks, seg, valid := make([]int, T), make([]int, T), make([]bool, T)
		for j := range toks {
			toks[j], seg[j], valid[j] = (i*131+j*17)%cfg.VocabSize, j/200, true
		}
		w.Tokens, w.Seg, w.Valid = append(w.Tokens, toks), append(w.Seg, seg), append(w.Valid, valid)
	}
	tr, err := NewTrainer(m, p, w, Options{BatchSize: B, Accum: 1, Steps: 1 << 30,
		Schedule: Schedule{Peak: 1e-3, Min: 1e-4, Warmup: 10, Total: 1000}, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1, Seed: 1, Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := tr.TrainStep(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(B*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
