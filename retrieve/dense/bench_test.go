package dense

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/train"
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

// BenchmarkTrainStepChunk times an optimiser step of 64 pairs with one hard
// negative each (192 sequences of 8 to 120 tokens) on a small encoder,
// keeping every sequence's activations (chunk=0) or 8 at a time. MiB-peak is
// the most heap in use after a step and a garbage collection: the
// activations a step used stay for the next one, so it is their peak.
func BenchmarkTrainStepChunk(b *testing.B) {
	cfg := model.Config{HiddenSize: 64, IntermediateSize: 172, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 4,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 512, MaxPositionEmbeddings: 128, TieWordEmbeddings: true}
	d := &Data{}
	for i := range 256 {
		code := make([]int, 24+(i*37)%97)
		for t := range code {
			code[t] = (i*31 + t*7) % 512
		}
		d.Codes = append(d.Codes, code)
		d.Queries = append(d.Queries, code[:8+i%17])
		d.Keys = append(d.Keys, fmt.Sprint(i))
		d.QueryText = append(d.QueryText, fmt.Sprint(i))
		d.Negatives = append(d.Negatives, []int{(i + 1) % 256})
	}
	for _, chunk := range []int{0, 8} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			m, err := model.New[float32](cfg)
			if err != nil {
				b.Fatal(err)
			}
			p := m.NewParams()
			m.Init(p, 0.02, 1)
			tr, err := NewTrainer(&Encoder[float32]{Model: m, Params: p}, d, Options{Batch: 64, HardNegatives: 1, Tau: 0.05, Symmetric: true,
				Schedule: train.Schedule{Peak: 1e-3, Min: 1e-4, Warmup: 10, Total: 1000}, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Clip: 1, Seed: 1, Chunk: chunk})
			if err != nil {
				b.Fatal(err)
			}
			// a first step makes the activations that later steps reuse
			if _, err := tr.TrainStep(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var peak uint64
			var ms runtime.MemStats
			for b.Loop() {
				if _, err := tr.TrainStep(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
				b.StartTimer()
			}
			b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
		})
	}
}
