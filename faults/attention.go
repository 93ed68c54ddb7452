package faults

import (
	"math"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
)

// Attention returns the faults of attention: the reference with one stage
// replaced.
func Attention() []Fault[checks.Impl] {
	return []Fault[checks.Impl]{
		{Name: "softmax-no-rowsum", Note: "The row sum is what makes dS rows sum to zero; without it the backward is no longer the derivative of the forward, so finite differences and ds-rowsum both see it. This is the experiment the design notes suggest first.", Impl: stages(func(s *st) { s.GradS = gradSWithoutRowSum }),
			Breaks: "softmax backward uses dS = P ⊙ dP, dropping − rowsum(P ⊙ dP)"},
		{Name: "mask-dropped", Note: "Forward and backward both lose the mask, so the backward is still the exact derivative of the (wrong) forward: finite differences pass. Only properties of the task catch it: future keys get gradient from row 0, the past changes with the future. The lab shows this on purpose.", FDBlind: true, Impl: stages(func(s *st) { s.Visible = everythingVisible }),
			Breaks: "no mask in forward or backward: every query reads every key, the future included"},
		{Name: "tril-chunk", Note: "tril(ones(M, N)) is a legal M×N mask, so shapes reveal nothing; the chunk's first query sees only the first key. Finite differences fail only because some rows of the test configurations are left with no key at all and the forward errors.", FDBlind: true, Impl: stages(func(s *st) { s.Visible = trilVisible }),
			Breaks: "causal mask built as tril(ones(M, N)): a chunk after a cache loses most of its history"},
		{Name: "dq-no-scale", Note: "Only dQ is off, by the factor √D: the forward is untouched, so only finite differences can see it.", Impl: stages(func(s *st) { s.GradQ = gradQWithoutScale }),
			Breaks: "dQ = dS K, the 1/√D factor forgotten"},
		{Name: "dv-uses-p", Note: "P instead of Pᵀ has the right shape only when M = N; the test shapes make the mismatch visible.", Impl: stages(func(s *st) { s.GradV = gradVWithP }),
			Breaks: "dV computed with P instead of Pᵀ"},
		{Name: "gqa-mod-mapping", Note: "h % Hkv interleaves the groups; used in forward and backward alike it is self-consistent, so only the comparison with repeated heads catches it.", FDBlind: true, Impl: stages(func(s *st) { s.KVHead = kvHeadModulo }),
			Breaks: "query head h reads KV head h % Hkv instead of h / (Hq/Hkv)"},
		{Name: "dkdv-overwrite", Note: "With Hq/Hkv query heads per KV head, = keeps only the last head's contribution.", Impl: stages(func(s *st) { s.GradK, s.GradV = gradKAssign, gradVAssign }),
			Breaks: "dK, dV of a shared KV head overwritten by each query head of the group instead of accumulated"},
		{Name: "padding-keys-visible", Note: "Consistent in both passes: only the padding and visibility checks see it.", FDBlind: true, Impl: stages(func(s *st) { s.Visible = padKeysVisible }),
			Breaks: "padding keys left visible (k_valid ignored)"},
		{Name: "segments-ignored", Note: "Consistent in both passes: only packing and visibility checks see it.", FDBlind: true, Impl: stages(func(s *st) { s.Visible = segmentsIgnored }),
			Breaks: "packed documents attend to each other (segment ids ignored)"},
		{Name: "window-off-by-one", Note: "One key too many per row, consistent in both passes.", FDBlind: true, Impl: stages(func(s *st) { s.Visible = windowOffByOne }),
			Breaks: "sliding window keeps keys with qpos − kpos <= window: one key too many"},
		{Name: "causal-strict", Note: "The first token sees nothing, which makes the forward error on most configurations.", FDBlind: true, Impl: stages(func(s *st) { s.Visible = causalStrict }),
			Breaks: "causal mask kpos < qpos: a token cannot see itself, and the first token sees nothing"},
		{Name: "softmax-no-max", Note: "Mathematically identical; only scores past exp's range (the shift check) overflow.", FDBlind: true, Impl: stages(func(s *st) { s.Softmax = softmaxWithoutMax }),
			Breaks: "softmax exponentiates raw scores without subtracting the row maximum: overflow on large scores"},
		{Name: "lse-without-max", Note: "O is right; only lse is wrong, which a fused backward recomputing P from lse would notice.", FDBlind: true, Impl: stages(func(s *st) { s.Softmax = softmaxLSEWithoutMax }),
			Breaks: "saved log-sum-exp forgets the row maximum (log Σ exp(S − max)); a fused backward would recompute a wrong P"},
		{Name: "grads-assigned", Note: "Finite differences run on zeroed buffers, where = and += agree; only the accumulation contract catches it.", FDBlind: true, Impl: stages(func(s *st) { s.GradQ = gradQAssign }),
			Breaks: "dQ written with = instead of +=: a caller's accumulated gradient is lost"},
	}
}

type st = attention.Stages[float64]

// stages returns the reference attention with the changes of edit applied
// to its float64 stages; the float32 path stays the reference's.
func stages(edit func(*st)) checks.Impl {
	s := attention.Reference[float64]()
	edit(&s)
	return checks.Impl{Run: s.Run, F32: checks.AttentionReference.F32, SinkGrad: s.SinkGrad}
}

func gradSWithoutRowSum(ds, p, dp []float64, m, n int) {
	for x := range m * n {
		ds[x] = p[x] * dp[x] // the − rowsum(P ⊙ dP) term is missing
	}
}

func everythingVisible(c *attention.Config, b, i, j int) bool { return true }

func trilVisible(c *attention.Config, b, i, j int) bool {
	d := *c
	d.Convention = attention.TopLeft // j <= i, whatever the cache holds
	return d.Visible(b, i, j)
}

func gradQWithoutScale(dq, ds, k []float64, m, n, d int, scale float64) {
	attention.GradQ(dq, ds, k, m, n, d, 1)
}

func gradVWithP(dv, p, do []float64, m, n, dvd int) {
	// dV[j] += Σᵢ P[j,i] dO[i]: P read as if it were Pᵀ (only the square part exists)
	for j := range min(m, n) {
		for i := range min(m, n) {
			for x := range dvd {
				dv[j*dvd+x] += p[j*n+i] * do[i*dvd+x]
			}
		}
	}
}

func kvHeadModulo(h, hq, hkv int) int { return h % hkv }

func gradKAssign(dk, ds, q []float64, m, n, d int, scale float64) {
	clear(dk[:n*d])
	attention.GradK(dk, ds, q, m, n, d, scale)
}

func gradVAssign(dv, p, do []float64, m, n, dvd int) {
	clear(dv[:n*dvd])
	attention.GradV(dv, p, do, m, n, dvd)
}

func padKeysVisible(c *attention.Config, b, i, j int) bool {
	d := *c
	d.KValid = nil
	return d.Visible(b, i, j)
}

func segmentsIgnored(c *attention.Config, b, i, j int) bool {
	d := *c
	d.QSeg, d.KSeg = nil, nil
	return d.Visible(b, i, j)
}

func windowOffByOne(c *attention.Config, b, i, j int) bool {
	d := *c
	if d.Window > 0 {
		d.Window++
	}
	return d.Visible(b, i, j)
}

func causalStrict(c *attention.Config, b, i, j int) bool {
	if c.Causal && c.Convention == attention.Positions && c.KeyPos(b, j) == c.QueryPos(b, i) {
		return false
	}
	return c.Visible(b, i, j)
}

func softmaxWithoutMax(p, lse, s []float64, vis []bool, m, n int, sink float64) {
	for i := range m {
		sum := math.Exp(sink) // 0 without a sink
		for j := range n {
			p[i*n+j] = 0
			if vis[i*n+j] {
				p[i*n+j] = math.Exp(s[i*n+j]) // no max subtracted
				sum += p[i*n+j]
			}
		}
		if sum == 0 { // a padding query: nothing visible
			lse[i] = math.Inf(1)
			continue
		}
		for j := range n {
			p[i*n+j] /= sum
		}
		lse[i] = math.Log(sum)
	}
}

func softmaxLSEWithoutMax(p, lse, s []float64, vis []bool, m, n int, sink float64) {
	attention.Softmax(p, lse, s, vis, m, n, sink)
	for i := range m {
		mx := math.Inf(-1)
		for j := range n {
			if vis[i*n+j] {
				mx = max(mx, s[i*n+j])
			}
		}
		if !math.IsInf(mx, -1) {
			lse[i] -= mx // saved as log Σ exp(S − max)
		}
	}
}

func gradQAssign(dq, ds, k []float64, m, n, d int, scale float64) {
	clear(dq[:m*d])
	attention.GradQ(dq, ds, k, m, n, d, scale)
}
