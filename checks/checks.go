package checks

import (
	"fmt"
	"math"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/gradcheck"
)

// Tolerances. Finite differences use the 4-point stencil, whose error at
// ε = 1e-3 is about ε⁴ + u/ε ≈ 1e-12 on these O(1) values (the lab's ε
// sweep measures it), so 1e-8 relative leaves a wide margin and still
// catches any wrong term: the checks use this fixed tolerance
// (gradcheck.Options.Fixed) and spare the evaluations of gradcheck's own
// error estimate. Identities that hold exactly in real arithmetic are held
// to a few hundred ulps.
const (
	fdRel     = 1e-8
	fdAbs     = 1e-11
	identical = 1e-12
)

// All returns every check of attention, finite-difference checks first.
func All() []Check[Impl] {
	return []Check[Impl]{
		{Name: "fd-elements", Kind: Gradient, Run: fdElements,
			Claim: "dQ, dK, dV equal central differences of L = Σ O ⊙ G, every element (MQA cache chunk; GQA with padding, segments, window)",
			Limit: "agreement with the forward as written: a forward that reads the wrong keys has a matching, equally wrong backward"},
		{Name: "fd-directions", Kind: Gradient, Run: fdDirections,
			Claim: "uᵀ∇L equals (L(x+εu) − L(x−εu))/2ε for random directions u over all of q, k, v (B=2, Hq=8, Hkv=2, M=24, N=40)",
			Limit: "a few directions: an error confined to a tiny set of elements may hide; the element check covers small shapes"},
		{Name: "first-row-grad", Kind: Semantic, Run: firstRowGrad,
			Claim: "a loss on query row 0 only gives dK, dV exactly zero for every key row 0 may not see, and non-zero for those it sees",
			Limit: "tests what row 0 reaches; other rows are covered by the visibility check"},
		{Name: "future-invariance", Kind: Semantic, Run: futureInvariance,
			Claim: "changing the queries, keys and values of tokens after position t leaves outputs at positions ≤ t bit-identical",
			Limit: "a causal property of the forward only"},
		{Name: "visibility", Kind: Semantic, Run: visibility,
			Claim: "output row i changes when value j changes exactly when the mask rule says key j is visible to query i (padding, segments, window, cache offset)",
			Limit: "probes the forward's dependence, not the gradient's values"},
		{Name: "conventions", Kind: Semantic, Run: conventions,
			Claim: "position, bottom-right and top-left causal masks agree when M == N and differ as documented when M ≠ N",
			Limit: "checks where the implementation looks, not the numbers it computes there"},
		{Name: "chunked-equals-full", Kind: Semantic, Run: chunkedEqualsFull,
			Claim: "running 7 tokens in chunks of 1, 2+2+2+1, 3+3+1, 5+2 against the cache gives the full pass's outputs",
			Limit: "the attention step only; the model's KV cache is checked where it is built"},
		{Name: "padding-invariance", Kind: Semantic, Run: paddingInvariance,
			Claim: "left or right padding leaves real tokens' outputs and gradients unchanged; pads get zero output and zero gradient",
			Limit: "one sequence length and two amounts of padding"},
		{Name: "packing-equals-separate", Kind: Semantic, Run: packingEqualsSeparate,
			Claim: "two documents packed with segment ids and restarting positions give the outputs and gradients of separate runs",
			Limit: "segments as given; it cannot tell whether the caller assigned them right"},
		{Name: "gqa-equals-mha", Kind: Semantic, Run: gqaEqualsMHA,
			Claim: "GQA (Hq=6, Hkv=2) equals MHA on physically repeated K, V: same O and dQ, and dK, dV equal the group sums",
			Limit: "the contiguous head mapping of repeat_kv is taken as the definition"},
		{Name: "ds-rowsum", Kind: Semantic, Run: dsRowSum,
			Claim: "each row of dS sums to zero, seen through Σⱼ dKⱼ = scale · Σᵢ (Σⱼ dSᵢⱼ) qᵢ = 0 for every key/value head",
			Limit: "a sum: errors that cancel within a row are left to finite differences"},
		{Name: "shift-invariance", Kind: Semantic, Run: shiftInvariance,
			Claim: "adding c to every key adds scale·(qᵢ·c) to row i of S: O unchanged, lse shifted by that constant (scores near 800, past exp's range)",
			Limit: "one large shift; it shows the max is subtracted, not that the rest is right"},
		{Name: "delta-identity", Kind: Semantic, Run: deltaIdentity,
			Claim: "with P recomputed as exp(S − lse): rows of P sum to 1 and rowsum(dO ⊙ O) = rowsum(P ⊙ dP)",
			Limit: "checks that O and lse are consistent, the identity a fused backward relies on"},
		{Name: "accumulates", Kind: Contract, Run: accumulates,
			Claim: "backward adds into dQ, dK, dV: with buffers pre-filled, after − before equals a fresh run",
			Limit: "the contract of the buffers, not the values"},
		{Name: "empty-row", Kind: Contract, Run: emptyRow,
			Claim: "a valid query with no visible key is an error naming batch and row; a padding query gives zero output and no gradient",
			Limit: "the error path only"},
	}
}

// ByName returns the check of attention called name.
func ByName(name string) (Check[Impl], bool) {
	for _, c := range All() {
		if c.Name == name {
			return c, true
		}
	}
	return Check[Impl]{}, false
}

// lossAndGrads returns L = Σ O ⊙ G as a function of t's tensors (read at call
// time, so a checker can perturb them in place) and the analytic gradients.
func lossAndGrads(impl Impl, c *attention.Config, t tensors) (func() float64, outputs, error) {
	out, err := call(impl, c, t)
	if err != nil {
		return nil, out, err
	}
	fwd := tensors{q: t.q, k: t.k, v: t.v}
	loss := func() float64 {
		o, err := call(impl, c, fwd)
		if err != nil {
			return math.NaN()
		}
		var l float64
		for i, g := range t.do {
			l += o.o[i] * g
		}
		return l
	}
	return loss, out, nil
}

func params(t tensors, out outputs) []gradcheck.Param {
	return []gradcheck.Param{{Name: "q", X: t.q, Grad: out.dq}, {Name: "k", X: t.k, Grad: out.dk}, {Name: "v", X: t.v, Grad: out.dv}}
}

func fdElements(impl Impl) Result {
	var worst gradcheck.Report
	n := 0
	for x, c := range []*attention.Config{cacheChunk(), mixed()} {
		t := random(c, uint64(10+x))
		loss, out, err := lossAndGrads(impl, c, t)
		if err != nil {
			return errored(err, "%v")
		}
		r := gradcheck.Check(loss, params(t, out), gradcheck.Options{Precise: true, Abs: fdAbs, Rel: fdRel, Fixed: true})
		n += r.Checked
		if err := r.Err(); err != nil {
			res := fail("%v", err)
			res.Error = r.MaxRel
			return res
		}
		if r.MaxRel >= worst.MaxRel {
			worst = r
		}
	}
	res := pass("%d elements, max rel %.1e, max abs %.1e, ε = %g (4-point)", n, worst.MaxRel, worst.MaxAbs, worst.Eps)
	res.Error = worst.MaxRel
	return res
}

func fdDirections(impl Impl) Result {
	c := large()
	t := random(c, 20)
	loss, out, err := lossAndGrads(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	// A directional derivative uᵀ∇L sums thousands of terms that partly
	// cancel, so its error is measured against ‖∇L‖ (|uᵀ∇L| <= ‖∇L‖ for a
	// unit u), not against its own, possibly tiny, value.
	var norm float64
	for _, g := range [][]float64{out.dq, out.dk, out.dv} {
		for _, x := range g {
			norm += x * x
		}
	}
	norm = math.Sqrt(norm)
	r := gradcheck.Directional(loss, params(t, out), 6, gradcheck.Options{Precise: true, Abs: fdRel * norm, Rel: fdRel, Seed: 7, Fixed: true})
	rel := r.MaxAbs / norm
	res := pass("%d directions over %d inputs, max |error| / ‖∇L‖ = %.1e, ε = %g (4-point)", r.Checked, len(t.q)+len(t.k)+len(t.v), rel, r.Eps)
	if err := r.Err(); err != nil {
		res = fail("%v", err)
	}
	res.Error = rel
	return res
}

func firstRowGrad(impl Impl) Result {
	c := &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 3, N: 7, D: 4, Dv: 3, Causal: true}
	t := random(c, 30)
	for bh := range c.B * c.Hq { // the loss reads query row 0 only
		clear(t.do[(bh*c.M+1)*c.Dv : (bh+1)*c.M*c.Dv])
	}
	out, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	for g := range c.B * c.Hkv {
		for j := range c.N {
			seen := c.Visible(0, 0, j)
			for x := range c.Dv {
				got := out.dv[(g*c.N+j)*c.Dv+x]
				if !seen && got != 0 {
					return fail("key %d (position %d) is after row 0 (position %d) yet dV = %.3g", j, c.KeyPos(0, j), c.QueryPos(0, 0), got)
				}
				if seen && x == 0 && got == 0 && out.dv[(g*c.N+j)*c.Dv+1] == 0 {
					return fail("key %d is visible to row 0 yet got no dV", j)
				}
			}
			for x := range c.D {
				if got := out.dk[(g*c.N+j)*c.D+x]; !seen && got != 0 {
					return fail("key %d (position %d) is after row 0 (position %d) yet dK = %.3g", j, c.KeyPos(0, j), c.QueryPos(0, 0), got)
				}
			}
		}
	}
	return pass("row 0 at position %d: keys 0..%d get gradient, keys %d..%d exactly zero", c.QueryPos(0, 0), c.QueryPos(0, 0), c.QueryPos(0, 0)+1, c.N-1)
}

func futureInvariance(impl Impl) Result {
	c := &attention.Config{B: 2, Hq: 4, Hkv: 2, M: 6, N: 6, D: 4, Dv: 3, Causal: true}
	t := random(c, 40)
	t.do = nil
	base, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	const cut = 2 // tokens at positions > cut change
	u := random(c, 41)
	u.do = nil
	for bh := range c.B * c.Hq {
		copy(u.q[bh*c.M*c.D:(bh*c.M+cut+1)*c.D], t.q[bh*c.M*c.D:])
	}
	for bg := range c.B * c.Hkv {
		copy(u.k[bg*c.N*c.D:(bg*c.N+cut+1)*c.D], t.k[bg*c.N*c.D:])
		copy(u.v[bg*c.N*c.Dv:(bg*c.N+cut+1)*c.Dv], t.v[bg*c.N*c.Dv:])
	}
	alt, err := call(impl, c, u)
	if err != nil {
		return errored(err, "%v")
	}
	changed := false
	for bh := range c.B * c.Hq {
		for i := range c.M {
			for x := range c.Dv {
				at := (bh*c.M+i)*c.Dv + x
				if i <= cut && alt.o[at] != base.o[at] {
					return fail("output at position %d (batch·head %d) changed from %.17g to %.17g when only later tokens changed", i, bh, base.o[at], alt.o[at])
				}
				changed = changed || alt.o[at] != base.o[at]
			}
		}
	}
	if !changed {
		return fail("changing later tokens changed no output at all: the probe is void")
	}
	return pass("outputs at positions 0..%d bit-identical after tokens %d..%d changed", cut, cut+1, c.N-1)
}

// probe returns, for each batch item, the M×N matrix of keys whose value
// reaches each output row, found by perturbing one value row at a time.
func probe(impl Impl, c *attention.Config, t tensors) ([][][]bool, error) {
	t.do = nil
	base, err := call(impl, c, t)
	if err != nil {
		return nil, err
	}
	seen := make([][][]bool, c.B)
	for b := range seen {
		seen[b] = make([][]bool, c.M)
		for i := range seen[b] {
			seen[b][i] = make([]bool, c.N)
		}
	}
	for j := range c.N {
		u := t
		u.v = clone(t.v)
		for bg := range c.B * c.Hkv {
			for x := range c.Dv {
				u.v[(bg*c.N+j)*c.Dv+x] += 1 + float64(x)
			}
		}
		alt, err := call(impl, c, u)
		if err != nil {
			return nil, err
		}
		for b := range c.B {
			for h := range c.Hq {
				for i := range c.M {
					row := ((b*c.Hq+h)*c.M + i) * c.Dv
					for x := range c.Dv {
						if alt.o[row+x] != base.o[row+x] {
							seen[b][i][j] = true
						}
					}
				}
			}
		}
	}
	return seen, nil
}

// sameVisibility compares a probed visibility with the rule of c.
func sameVisibility(seen [][][]bool, c *attention.Config) string {
	for b := range c.B {
		for i := range c.M {
			for j := range c.N {
				if want := c.Visible(b, i, j); seen[b][i][j] != want {
					verb := "reads"
					if want {
						verb = "does not read"
					}
					return fmt.Sprintf("batch %d: query %d (position %d) %s key %d (position %d); the %s rule says visible=%v\n%s",
						b, i, c.QueryPos(b, i), verb, j, c.KeyPos(b, j), c.Convention, want, drawPair(seen[b], c.Visibility(b)))
				}
			}
		}
	}
	return ""
}

// drawPair draws a probed and a wanted mask side by side, 1 for visible.
func drawPair(got, want [][]bool) string {
	var sb strings.Builder
	sb.WriteString("  seen     want")
	for i := range got {
		sb.WriteString("\n  ")
		for _, m := range [][]bool{got[i], want[i]} {
			for _, v := range m {
				sb.WriteByte("01"[b2i(v)])
			}
			sb.WriteString("    ")
		}
	}
	return sb.String()
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

func visibility(impl Impl) Result {
	for x, c := range []*attention.Config{mixed(), cacheChunk()} {
		seen, err := probe(impl, c, random(c, uint64(50+x)))
		if err != nil {
			return errored(err, "%v")
		}
		if msg := sameVisibility(seen, c); msg != "" {
			return fail("%s", firstLine(msg))
		}
	}
	return pass("probed visibility equals the rule on 2 configurations (%d query rows)", mixed().B*mixed().M+cacheChunk().M)
}

func conventions(impl Impl) Result {
	square := &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 4, N: 4, D: 3, Dv: 2, Causal: true}
	chunk := &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 2, N: 5, D: 3, Dv: 2, Causal: true}
	// A cache with two empty slots (3 real tokens, then the new one at slot 5)
	// and a window of 2: positions count tokens, bottom-right counts slots.
	gappy := &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 1, N: 6, D: 3, Dv: 2, Causal: true, Window: 2,
		KValid: []bool{true, true, true, false, false, true}, KPos: []int{0, 1, 2, 3, 3, 3}, QPos: []int{3}}
	probed := map[string][][]bool{}
	for _, base := range []struct {
		name string
		c    *attention.Config
	}{{"M=N=4", square}, {"M=2,N=5", chunk}, {"gappy cache", gappy}} {
		for conv := attention.Positions; conv <= attention.TopLeft; conv++ {
			c := *base.c
			c.Convention = conv
			seen, err := probe(impl, &c, random(&c, 60))
			if err != nil {
				return errored(err, "%s, %s: %v", base.name, conv)
			}
			if msg := sameVisibility(seen, &c); msg != "" {
				return fail("%s: %s", base.name, firstLine(msg))
			}
			probed[base.name+"/"+conv.String()] = seen[0]
		}
	}
	// What the documentation says of the three, checked on what was probed.
	eq := func(a, b string) bool { return fmt.Sprint(probed[a]) == fmt.Sprint(probed[b]) }
	switch {
	case !eq("M=N=4/position", "M=N=4/bottom-right") || !eq("M=N=4/position", "M=N=4/top-left"):
		return fail("M == N: the three conventions should agree")
	case !eq("M=2,N=5/position", "M=2,N=5/bottom-right"):
		return fail("M=2, N=5 with default positions: position and bottom-right should agree")
	case eq("M=2,N=5/position", "M=2,N=5/top-left"):
		return fail("M=2, N=5: top-left should hide the cache from the chunk")
	case eq("gappy cache/position", "gappy cache/bottom-right"):
		return fail("gappy cache with a window: bottom-right should count slots, not positions")
	}
	return pass("agree at M=N=4; at M=2,N=5 top-left hides the cache; with empty cache slots and a window bottom-right differs from position")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func chunkedEqualsFull(impl Impl) Result {
	full := &attention.Config{B: 2, Hq: 4, Hkv: 2, M: 7, N: 7, D: 4, Dv: 3, Causal: true}
	t := random(full, 70)
	t.do = nil
	want, err := call(impl, full, t)
	if err != nil {
		return errored(err, "full pass: %v")
	}
	var worst float64
	for _, sizes := range [][]int{{1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 1}, {3, 3, 1}, {5, 2}, {7}} {
		start := 0
		for _, m := range sizes {
			c := *full
			c.M, c.N = m, start+m // the chunk's queries against the cache so far
			chunk := tensors{
				q: headRows(t.q, c.B, c.Hq, full.M, c.D, start, start+m),
				k: headRows(t.k, c.B, c.Hkv, full.N, c.D, 0, start+m),
				v: headRows(t.v, c.B, c.Hkv, full.N, c.Dv, 0, start+m),
			}
			got, err := call(impl, &c, chunk)
			if err != nil {
				return errored(err, "chunks %v, chunk at %d: %v", sizes, start)
			}
			d, msg := compare(identical, pair{"o", got.o, headRows(want.o, c.B, c.Hq, full.M, c.Dv, start, start+m)})
			worst = max(worst, d)
			if msg != "" {
				res := fail("chunks %v, chunk at %d (M=%d, N=%d): %s", sizes, start, c.M, c.N, msg)
				res.Error = d
				return res
			}
			start += m
		}
	}
	res := pass("5 chunkings of 7 tokens match the full pass, max error %.1e", worst)
	res.Error = worst
	return res
}

// embedRows places the H heads of L rows of width W, taken from an unpadded
// B=1 run, at row offset off of a run of T rows whose other rows come from
// filler.
func embedRows(x []float64, H, L, W, T, off int, filler []float64) []float64 {
	out := clone(filler)
	for h := range H {
		copy(out[(h*T+off)*W:(h*T+off+L)*W], x[h*L*W:(h+1)*L*W])
	}
	return out
}

func paddingInvariance(impl Impl) Result {
	const L, pad = 5, 2
	plain := &attention.Config{B: 1, Hq: 4, Hkv: 2, M: L, N: L, D: 3, Dv: 2, Causal: true}
	t := random(plain, 80)
	want, err := call(impl, plain, t)
	if err != nil {
		return errored(err, "unpadded: %v")
	}
	var worst float64
	for _, side := range []string{"left", "right"} {
		const T = L + pad
		off := 0
		if side == "left" {
			off = pad
		}
		valid := make([]bool, T)
		for i := off; i < off+L; i++ {
			valid[i] = true
		}
		pos := attention.PositionsFromValidity(valid, 1, T)
		c := &attention.Config{B: 1, Hq: 4, Hkv: 2, M: T, N: T, D: 3, Dv: 2, Causal: true,
			QValid: valid, KValid: valid, QPos: pos, KPos: pos}
		noise := random(c, 81) // what the pads hold, dO of pad rows included
		u := tensors{
			q:  embedRows(t.q, c.Hq, L, c.D, T, off, noise.q),
			k:  embedRows(t.k, c.Hkv, L, c.D, T, off, noise.k),
			v:  embedRows(t.v, c.Hkv, L, c.Dv, T, off, noise.v),
			do: embedRows(t.do, c.Hq, L, c.Dv, T, off, noise.do),
		}
		got, err := call(impl, c, u)
		if err != nil {
			return errored(err, "%s padding: %v", side)
		}
		zero := func(n int) []float64 { return make([]float64, n) }
		d, msg := compare(identical,
			pair{"o", headRows(got.o, 1, c.Hq, T, c.Dv, off, off+L), want.o},
			pair{"dq", headRows(got.dq, 1, c.Hq, T, c.D, off, off+L), want.dq},
			pair{"dk", headRows(got.dk, 1, c.Hkv, T, c.D, off, off+L), want.dk},
			pair{"dv", headRows(got.dv, 1, c.Hkv, T, c.Dv, off, off+L), want.dv},
		)
		padFrom, padTo := 0, pad
		if side == "right" {
			padFrom, padTo = L, T
		}
		if msg == "" {
			_, msg = compare(0,
				pair{"pad o", headRows(got.o, 1, c.Hq, T, c.Dv, padFrom, padTo), zero(c.Hq * pad * c.Dv)},
				pair{"pad dq", headRows(got.dq, 1, c.Hq, T, c.D, padFrom, padTo), zero(c.Hq * pad * c.D)},
				pair{"pad dk", headRows(got.dk, 1, c.Hkv, T, c.D, padFrom, padTo), zero(c.Hkv * pad * c.D)},
				pair{"pad dv", headRows(got.dv, 1, c.Hkv, T, c.Dv, padFrom, padTo), zero(c.Hkv * pad * c.Dv)},
			)
		}
		worst = max(worst, d)
		if msg != "" {
			res := fail("%s padding by %d: %s", side, pad, msg)
			res.Error = d
			return res
		}
	}
	res := pass("left and right padding by %d: real tokens match, max error %.1e; pads exactly zero", pad, worst)
	res.Error = worst
	return res
}

func packingEqualsSeparate(impl Impl) Result {
	lens := []int{3, 4}
	const T = 7
	packed := &attention.Config{B: 1, Hq: 4, Hkv: 2, M: T, N: T, D: 3, Dv: 2, Causal: true,
		QSeg: []int{0, 0, 0, 1, 1, 1, 1}, KSeg: []int{0, 0, 0, 1, 1, 1, 1},
		QPos: []int{0, 1, 2, 0, 1, 2, 3}, KPos: []int{0, 1, 2, 0, 1, 2, 3}}
	t := random(packed, 90)
	got, err := call(impl, packed, t)
	if err != nil {
		return errored(err, "packed: %v")
	}
	var worst float64
	start := 0
	for d, L := range lens {
		c := &attention.Config{B: 1, Hq: 4, Hkv: 2, M: L, N: L, D: 3, Dv: 2, Causal: true}
		rows := func(x []float64, H, W int) []float64 { return headRows(x, 1, H, T, W, start, start+L) }
		doc := tensors{q: rows(t.q, c.Hq, c.D), k: rows(t.k, c.Hkv, c.D), v: rows(t.v, c.Hkv, c.Dv), do: rows(t.do, c.Hq, c.Dv)}
		want, err := call(impl, c, doc)
		if err != nil {
			return errored(err, "document %d alone: %v", d)
		}
		e, msg := compare(identical,
			pair{"o", rows(got.o, c.Hq, c.Dv), want.o}, pair{"dq", rows(got.dq, c.Hq, c.D), want.dq},
			pair{"dk", rows(got.dk, c.Hkv, c.D), want.dk}, pair{"dv", rows(got.dv, c.Hkv, c.Dv), want.dv})
		worst = max(worst, e)
		if msg != "" {
			res := fail("document %d (tokens %d..%d): %s", d, start, start+L-1, msg)
			res.Error = e
			return res
		}
		start += L
	}
	res := pass("documents of 3 and 4 tokens packed equal separate runs, max error %.1e", worst)
	res.Error = worst
	return res
}

func gqaEqualsMHA(impl Impl) Result {
	gqa := &attention.Config{B: 2, Hq: 6, Hkv: 2, M: 3, N: 5, D: 4, Dv: 3, Causal: true}
	t := random(gqa, 100)
	got, err := call(impl, gqa, t)
	if err != nil {
		return errored(err, "GQA: %v")
	}
	mha := *gqa
	mha.Hkv = gqa.Hq
	group := gqa.Hq / gqa.Hkv
	repeat := func(x []float64, W int) []float64 { // (B, Hkv, N, W) -> (B, Hq, N, W), head h copies h / group
		out := make([]float64, 0, gqa.B*gqa.Hq*gqa.N*W)
		for b := range gqa.B {
			for h := range gqa.Hq {
				g := b*gqa.Hkv + h/group
				out = append(out, x[g*gqa.N*W:(g+1)*gqa.N*W]...)
			}
		}
		return out
	}
	sumGroups := func(x []float64, W int) []float64 { // (B, Hq, N, W) -> (B, Hkv, N, W)
		out := make([]float64, gqa.B*gqa.Hkv*gqa.N*W)
		for b := range gqa.B {
			for h := range gqa.Hq {
				dst := (b*gqa.Hkv + h/group) * gqa.N * W
				src := (b*gqa.Hq + h) * gqa.N * W
				for x2 := range gqa.N * W {
					out[dst+x2] += x[src+x2]
				}
			}
		}
		return out
	}
	want, err := call(impl, &mha, tensors{q: t.q, k: repeat(t.k, gqa.D), v: repeat(t.v, gqa.Dv), do: t.do})
	if err != nil {
		return errored(err, "MHA on repeated K/V: %v")
	}
	d, msg := compare(identical,
		pair{"o", got.o, want.o}, pair{"lse", got.lse, want.lse}, pair{"dq", got.dq, want.dq},
		pair{"dk", got.dk, sumGroups(want.dk, gqa.D)}, pair{"dv", got.dv, sumGroups(want.dv, gqa.Dv)})
	res := pass("O, lse, dQ and group-summed dK, dV agree, max error %.1e", d)
	if msg != "" {
		res = fail("%s", msg)
	}
	res.Error = d
	return res
}

func dsRowSum(impl Impl) Result {
	var worst float64
	for x, c := range []*attention.Config{mixed(), cacheChunk()} {
		t := random(c, uint64(110+x))
		out, err := call(impl, c, t)
		if err != nil {
			return errored(err, "%v")
		}
		var scale float64
		for _, g := range out.dk {
			scale = max(scale, math.Abs(g))
		}
		for bg := range c.B * c.Hkv {
			for e := range c.D {
				var s float64
				for j := range c.N {
					s += out.dk[(bg*c.N+j)*c.D+e]
				}
				rel := math.Abs(s) / max(scale, 1e-300)
				if math.IsNaN(rel) {
					rel = math.Inf(1)
				}
				worst = max(worst, rel)
				if rel > identical {
					res := fail("Σⱼ dK[batch·head %d, j, %d] = %.3g, not 0 (%.1e of max|dK|): rows of dS do not sum to zero", bg, e, s, rel)
					res.Error = rel
					return res
				}
			}
		}
	}
	res := pass("Σⱼ dKⱼ = 0 for every key/value head, worst %.1e of max|dK|", worst)
	res.Error = worst
	return res
}

func shiftInvariance(impl Impl) Result {
	c := mixed()
	t := random(c, 120)
	t.do = nil
	base, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	// Choose c per key/value head so that scale·(q·c) is near 800 for every
	// query: exp(800) overflows float64, so only a softmax that subtracts
	// the row maximum survives.
	scale := c.ScaleValue()
	u := t
	u.k = clone(t.k)
	shift := make([]float64, c.B*c.Hkv*c.D)
	for bg := range c.B * c.Hkv {
		for e := range c.D {
			shift[bg*c.D+e] = 800 / scale / float64(c.D) * float64(1+e%2)
		}
		for j := range c.N {
			for e := range c.D {
				u.k[(bg*c.N+j)*c.D+e] += shift[bg*c.D+e]
			}
		}
	}
	alt, err := call(impl, c, u)
	if err != nil {
		return errored(err, "%v")
	}
	wantLSE := clone(base.lse)
	group := c.Hq / c.Hkv
	for b := range c.B {
		for h := range c.Hq {
			g := b*c.Hkv + h/group
			for i := range c.M {
				bhi := (b*c.Hq+h)*c.M + i
				if !c.QueryValid(b, i) {
					continue
				}
				var qc float64
				for e := range c.D {
					qc += t.q[bhi*c.D+e] * shift[g*c.D+e]
				}
				wantLSE[bhi] += scale * qc
			}
		}
	}
	d, msg := compare(1e-9, pair{"o", alt.o, base.o}, pair{"lse", alt.lse, wantLSE})
	res := pass("scores shifted by up to ~%.0f: O unchanged and lse shifted exactly, max error %.1e", 1600.0, d)
	if msg != "" {
		res = fail("%s", msg)
	}
	res.Error = d
	return res
}

func deltaIdentity(impl Impl) Result {
	c := mixed()
	t := random(c, 130)
	out, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	scale := c.ScaleValue()
	group := c.Hq / c.Hkv
	var worst float64
	for b := range c.B {
		for h := range c.Hq {
			g := b*c.Hkv + h/group
			for i := range c.M {
				bhi := (b*c.Hq+h)*c.M + i
				if !c.QueryValid(b, i) {
					continue
				}
				var psum, pdp, doo float64
				for j := range c.N {
					if !c.Visible(b, i, j) {
						continue
					}
					var s, dp float64
					for e := range c.D {
						s += t.q[bhi*c.D+e] * t.k[(g*c.N+j)*c.D+e]
					}
					for e := range c.Dv {
						dp += t.do[bhi*c.Dv+e] * t.v[(g*c.N+j)*c.Dv+e]
					}
					p := math.Exp(s*scale - out.lse[bhi])
					psum += p
					pdp += p * dp
				}
				for e := range c.Dv {
					doo += t.do[bhi*c.Dv+e] * out.o[bhi*c.Dv+e]
				}
				e1, _ := diff([]float64{psum}, []float64{1})
				e2, _ := diff([]float64{doo}, []float64{pdp})
				worst = max(worst, e1, e2)
				if e1 > identical {
					res := fail("batch %d head %d row %d: exp(S − lse) sums to %.12g, not 1", b, h, i, psum)
					res.Error = e1
					return res
				}
				if e2 > identical {
					res := fail("batch %d head %d row %d: rowsum(dO ⊙ O) = %.12g but rowsum(P ⊙ dP) = %.12g", b, h, i, doo, pdp)
					res.Error = e2
					return res
				}
			}
		}
	}
	res := pass("every valid row: Σ P = 1 and rowsum(dO ⊙ O) = rowsum(P ⊙ dP), max error %.1e", worst)
	res.Error = worst
	return res
}

func accumulates(impl Impl) Result {
	c := mixed()
	t := random(c, 140)
	fresh, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	pre := random(c, 141) // sentinels
	sq, sk, sv := pre.q, pre.k, pre.v
	dq, dk, dv := clone(sq), clone(sk), clone(sv)
	o := make([]float64, len(fresh.o))
	lse := make([]float64, len(fresh.lse))
	if err := protect(func() error { return impl(o, lse, dq, dk, dv, t.q, t.k, t.v, t.do, c) }); err != nil {
		return errored(err, "%v")
	}
	sub := func(a, b []float64) []float64 {
		out := clone(a)
		for i := range out {
			out[i] -= b[i]
		}
		return out
	}
	d, msg := compare(identical, pair{"dq", sub(dq, sq), fresh.dq}, pair{"dk", sub(dk, sk), fresh.dk}, pair{"dv", sub(dv, sv), fresh.dv})
	res := pass("after − before equals a fresh backward for dQ, dK, dV, max error %.1e", d)
	if msg != "" {
		res = fail("%s (pre-filled buffer overwritten?)", msg)
	}
	res.Error = d
	return res
}

func emptyRow(impl Impl) Result {
	// Batch 1, query row 2 is in a segment no key belongs to.
	bad := &attention.Config{B: 2, Hq: 2, Hkv: 1, M: 3, N: 3, D: 2, Dv: 2, Causal: true,
		QSeg: []int{0, 0, 0, 0, 0, 5}, KSeg: []int{0, 0, 0, 0, 0, 0}}
	_, err := call(impl, bad, random(bad, 150))
	rejected := fmt.Sprint(err)
	switch {
	case err == nil:
		return fail("a valid row with no visible key was accepted")
	case !strings.Contains(err.Error(), "batch 1") || !strings.Contains(err.Error(), "row 2"):
		return fail("error does not name batch 1, row 2: %v", err)
	}
	// Batch 0, query row 1 is padding: zero output, no gradient, no error.
	padded := &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 3, N: 3, D: 2, Dv: 2, Causal: true,
		QValid: []bool{true, false, true}}
	out, err := call(impl, padded, random(padded, 151))
	if err != nil {
		return errored(err, "a padding query row was rejected: %v")
	}
	for h := range padded.Hq {
		for x := range padded.Dv {
			if v := out.o[(h*padded.M+1)*padded.Dv+x]; v != 0 {
				return fail("padding query row 1, head %d: output %.3g, want 0", h, v)
			}
		}
		for x := range padded.D {
			if v := out.dq[(h*padded.M+1)*padded.D+x]; v != 0 {
				return fail("padding query row 1, head %d: dQ %.3g, want 0", h, v)
			}
		}
	}
	return pass("rejected: %q; padding row: zero output and dQ", rejected)
}

// AgreesWith returns a check that an implementation computes what ref
// computes, forward and every gradient, on configurations covering every
// mask feature and shapes that cross a 64-wide tile.
func AgreesWith(refName string, ref Impl) Check[Impl] {
	return Check[Impl]{Name: "agrees-with-" + refName, Kind: Semantic,
		Claim: "O, lse, dQ, dK, dV equal the " + refName + "'s on 7 configurations (every mask feature, the three conventions, M = 1, sizes past a 64-tile)",
		Limit: "agreement, not correctness: the reference is proven by the other checks",
		Run: func(impl Impl) Result {
			cfgs := []*attention.Config{cacheChunk(), mixed(), large(),
				{B: 1, Hq: 4, Hkv: 1, M: 1, N: 130, D: 8, Dv: 8, Causal: true, Window: 70},
				{B: 2, Hq: 2, Hkv: 2, M: 65, N: 65, D: 5, Dv: 3},
				{B: 1, Hq: 2, Hkv: 1, M: 70, N: 131, D: 4, Dv: 4, Causal: true, Convention: attention.BottomRight},
				{B: 1, Hq: 2, Hkv: 1, M: 70, N: 131, D: 4, Dv: 4, Causal: true, Convention: attention.TopLeft},
			}
			var worst float64
			for x, c := range cfgs {
				t := random(c, uint64(160+x))
				want, err := call(ref, c, t)
				if err != nil {
					return errored(err, refName+": %v")
				}
				got, err := call(impl, c, t)
				if err != nil {
					return errored(err, "%v")
				}
				d, msg := compare(identical, pair{"o", got.o, want.o}, pair{"lse", got.lse, want.lse},
					pair{"dq", got.dq, want.dq}, pair{"dk", got.dk, want.dk}, pair{"dv", got.dv, want.dv})
				worst = max(worst, d)
				if msg != "" {
					res := fail("configuration %d (B=%d Hq=%d Hkv=%d M=%d N=%d): %s", x, c.B, c.Hq, c.Hkv, c.M, c.N, msg)
					res.Error = d
					return res
				}
			}
			res := pass("7 configurations, max error %.1e", worst)
			res.Error = worst
			return res
		}}
}
