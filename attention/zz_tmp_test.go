package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func BenchmarkZZBig(b *testing.B) {
	for _, D := range []int{64, 128} {
		c := &Config{B: 1, Hq: 8, Hkv: 8, M: 4096, N: 4096, D: D, Dv: D}
		rng := rand.New(rand.NewPCG(1, 2))
		mk := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			return x
		}
		q, k, v := mk(c.Hq*c.M*D), mk(c.Hkv*c.N*D), mk(c.Hkv*c.N*D)
		o, lse := make([]float32, len(q)), make([]float32, c.Hq*c.M)
		b.Run(fmt.Sprintf("D=%d", D), func(b *testing.B) {
			for b.Loop() {
				FlashForward(o, lse, q, k, v, c)
			}
			b.ReportMetric(4*float64(c.M)*float64(c.N)*float64(D)*8*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
