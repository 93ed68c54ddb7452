package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/attnlab/attnlab/attention"
)

// VariantNames are the attention variants measured against plain
// attention: sinks (one logit per head), ALiBi (a slope per head) and
// softcap (c = 30, a tanh per score).
var VariantNames = []string{"sinks", "alibi", "softcap"}

// variantConfig is the fused kernel's workload of the variant rows,
// causal float32 fwd+bwd at n = 1024, H = 8, D = 64, with variant on.
func variantConfig(variant string) *attention.Config {
	const n, H, D = 1024, 8, 64
	c := &attention.Config{B: 1, Hq: H, Hkv: H, M: n, N: n, D: D, Dv: D, Causal: true}
	switch variant {
	case "sinks":
		c.Sinks = make([]float64, H)
		for h := range c.Sinks {
			c.Sinks[h] = 0.5 - float64(h)/H
		}
	case "alibi":
		for h := range H {
			c.Alibi = append(c.Alibi, math.Exp2(-float64(h+1)))
		}
	case "softcap":
		c.Softcap = 30
	}
	return c
}

// variantRows times plain attention and each variant interleaved, one
// run of each per round, until the budget of every row is spent (at least
// 3 rounds after a warm-up round), and reports each variant's median over
// the rounds of its time divided by the plain run's in the same round:
// the machine's drift and noise hit both sides of each ratio alike.
func variantRows(ctx context.Context, budget time.Duration) []Row {
	names := append([]string{"plain"}, VariantNames...)
	runs := make([]func(), len(names))
	for x, v := range names {
		runs[x] = attentionOf[float32](variantConfig(v))
	}
	ratios := make([][]float64, len(VariantNames))
	deadline := time.Now().Add(budget * time.Duration(len(names)))
	for round := 0; ctx.Err() == nil && (round < 4 || time.Now().Before(deadline)); round++ {
		times := make([]float64, len(names))
		for x, run := range runs {
			start := time.Now()
			run()
			times[x] = time.Since(start).Seconds()
		}
		if round == 0 {
			continue // warm-up
		}
		for x := range VariantNames {
			ratios[x] = append(ratios[x], times[x+1]/times[0])
		}
	}
	var rows []Row
	for x, v := range VariantNames {
		r := math.NaN()
		if len(ratios[x]) > 0 {
			slices.Sort(ratios[x])
			r = ratios[x][len(ratios[x])/2]
		}
		rows = append(rows, Row{Group: "attention variants", Case: fmt.Sprintf("float32 n=1024 D=64 causal +%s", v),
			Unit: "× plain", DType: "float32", Ours: r})
	}
	return rows
}
