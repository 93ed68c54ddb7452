package faults

import (
	"math"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
)

// Variants returns the faults of softcap, ALiBi and sinks: the reference
// with one stage replaced.
func Variants() []Fault[checks.Impl] {
	return []Fault[checks.Impl]{
		{Name: "sink-out-of-backward", Note: "The forward is right; the backward renormalises P over the keys as if there were no sink, so dQ, dK, dV are the derivatives of another function: finite differences see it.",
			Impl: sinkOutOfBackward(), Breaks: "the backward's probabilities leave the sink out of the denominator (forward right)"},
		{Name: "dsink-sign", Note: "Only dσ is off; nothing but finite differences looks at it.",
			Impl: stages(func(s *st) { s.SinkGrad = sinkGradFlipped }), Breaks: "dσ = +Σ P_sink · rowsum(dO ⊙ O): the sign of the sink's gradient flipped"},
		{Name: "softcap-no-factor", Note: "The forward is capped, the backward passes dS through as if it were not: finite differences see the missing chain factor.",
			Impl: stages(func(s *st) { s.GradLogits = noSoftcapFactor }), Breaks: "softcap's factor 1 − tanh²(s/c) dropped from the backward"},
		{Name: "sink-ignored", Note: "The sink is left out of both passes: a self-consistent plain attention, so finite differences pass; the sink's share (sink-weight) and limit (sink-limit, dσ = 0 expected only at σ → −∞) catch it.", FDBlind: true,
			Impl: stages(func(s *st) { s.Softmax, s.SinkGrad = softmaxIgnoringSink, noSinkGrad }), Breaks: "the sink logit is not in the softmax's denominator, forward or backward"},
		{Name: "softcap-after-mask", Note: "A mask written as −∞ scores, then capped: −∞ becomes −c and every hidden key gets weight. Both passes agree on that function, so finite differences pass; the visibility probe under softcap catches it.", FDBlind: true,
			Impl:   stages(func(s *st) { s.Logits, s.Softmax, s.GradLogits = capAfterMask, softmaxOverAll, capAfterMaskGrad }),
			Breaks: "softcap applied after the mask: masked scores −∞ turned into a finite −c"},
		{Name: "alibi-by-slot", Note: "The bias from array indices, |i − j|, equals the positions' at M = N without a cache or padding: the same function in both passes, so finite differences pass; after a cache a chunk's queries get the wrong bias (alibi-chunked-equals-full), and padded or packed rows too (alibi-closed-form).", FDBlind: true,
			Impl: stages(func(s *st) { s.Logits = alibiBySlot }), Breaks: "ALiBi's distance from array slots (query i, key j) instead of logical positions"},
		{Name: "alibi-sign", Note: "Far keys weigh more instead of less; the bias does not depend on q or k, so finite differences pass. Only the closed form with q = 0 sees it.", FDBlind: true,
			Impl: stages(func(s *st) { s.Logits = alibiFlipped }), Breaks: "ALiBi's bias added instead of subtracted: s + m·|qpos − kpos|"},
	}
}

// sinkOutOfBackward runs the reference forward, then the reference
// backward on probabilities renormalised over the keys alone.
func sinkOutOfBackward() checks.Impl {
	s := attention.Reference[float64]()
	run := func(o, lse, dq, dk, dv, q, k, v, do []float64, c *attention.Config) error {
		p := make([]float64, c.B*c.Hq*c.M*c.N)
		if err := s.Forward(o, lse, p, q, k, v, c); err != nil {
			return err
		}
		if do == nil {
			return nil
		}
		for r := range c.B * c.Hq * c.M {
			row := p[r*c.N : (r+1)*c.N]
			var sum float64
			for _, x := range row {
				sum += x
			}
			for j := range row {
				if sum > 0 {
					row[j] /= sum // the sink's share forgotten
				}
			}
		}
		s.Backward(dq, dk, dv, do, q, k, v, p, c)
		return nil
	}
	return checks.Impl{Run: run, F32: checks.AttentionReference.F32, SinkGrad: s.SinkGrad}
}

func sinkGradFlipped(dsinks, o, lse, do []float64, c *attention.Config) {
	g := make([]float64, len(dsinks))
	attention.SinkGrad(g, o, lse, do, c)
	for h := range g {
		dsinks[h] -= g[h] // + instead of −
	}
}

// noSinkGrad is the sink's gradient of a function the sink is not in.
func noSinkGrad(dsinks, o, lse, do []float64, c *attention.Config) {}

func noSoftcapFactor(ds, s []float64, c *attention.Config, b, h, m, n int) {}

func softmaxIgnoringSink(p, lse, s []float64, vis []bool, m, n int, sink float64) {
	attention.Softmax(p, lse, s, vis, m, n, math.Inf(-1))
}

// capAfterMask writes the mask as −∞ scores and then caps every score:
// a hidden one becomes −c. ALiBi follows as in the reference.
func capAfterMask(s []float64, c *attention.Config, b, h, m, n int) {
	for i := range m {
		for j := range n {
			x := s[i*n+j]
			if !c.Visible(b, i, j) {
				x = math.Inf(-1)
			}
			if c.Softcap > 0 {
				x = c.Softcap * math.Tanh(x/c.Softcap)
			}
			s[i*n+j] = x
		}
	}
	alibi(s, c, b, h, m, n, -1, false)
}

// capAfterMaskGrad is the derivative of capAfterMask: a hidden score's
// logit is the constant −c.
func capAfterMaskGrad(ds, s []float64, c *attention.Config, b, h, m, n int) {
	attention.GradLogits(ds, s, c, b, h, m, n)
	for i := range m {
		for j := range n {
			if !c.Visible(b, i, j) {
				ds[i*n+j] = 0
			}
		}
	}
}

// softmaxOverAll is the softmax of every key, the mask already in the
// scores.
func softmaxOverAll(p, lse, s []float64, vis []bool, m, n int, sink float64) {
	all := make([]bool, len(vis))
	for x := range all {
		all[x] = true
	}
	attention.Softmax(p, lse, s, all, m, n, sink)
}

func alibiBySlot(s []float64, c *attention.Config, b, h, m, n int) {
	capOnly(s, c, b, h, m, n)
	alibi(s, c, b, h, m, n, -1, true)
}

func alibiFlipped(s []float64, c *attention.Config, b, h, m, n int) {
	capOnly(s, c, b, h, m, n)
	alibi(s, c, b, h, m, n, +1, false)
}

// capOnly is the reference's Logits without ALiBi.
func capOnly(s []float64, c *attention.Config, b, h, m, n int) {
	d := *c
	d.Alibi = nil
	attention.Logits(s, &d, b, h, m, n)
}

// alibi adds sign · slope · distance, the distance from positions or, with
// slots, from array indices.
func alibi(s []float64, c *attention.Config, b, h, m, n int, sign float64, slots bool) {
	if c.Alibi == nil {
		return
	}
	for i := range m {
		for j := range n {
			d := c.QueryPos(b, i) - c.KeyPos(b, j)
			if slots {
				d = i - j
			}
			s[i*n+j] += sign * c.Alibi[h] * math.Abs(float64(d))
		}
	}
}
