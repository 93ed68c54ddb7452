package checks

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
)

// The variants of today's models on top of masked attention (see
// attention.Config): logit softcapping, ALiBi and attention sinks. Their
// checks run on implementations with a SinkGrad.

var (
	variantSlopes = []float64{0.5, 0.25, 0.125, 0.0625}
	variantSinks  = []float64{0.3, -0.5, 1.2, -1.0}
)

// WithVariants returns c with softcap (0: none) and, when asked, the
// checks' ALiBi slopes (1/2, 1/4, 1/8, 1/16, repeated) and sink logits for
// c's Hq heads: the variant configurations of the checks, and of conform's.
func WithVariants(c *attention.Config, softcap float64, alibi, sinks bool) *attention.Config {
	c.Softcap = softcap
	if alibi {
		c.Alibi = heads(variantSlopes, c.Hq)
	}
	if sinks {
		c.Sinks = heads(variantSinks, c.Hq)
	}
	return c
}

// heads repeats vals to n entries.
func heads(vals []float64, n int) []float64 {
	x := make([]float64, n)
	for h := range x {
		x[h] = vals[h%len(vals)]
	}
	return x
}

// variantChunk is a chunk of 3 queries after 4 cached keys, grouped-query
// heads, with the three variants together.
func variantChunk() *attention.Config {
	return WithVariants(&attention.Config{B: 1, Hq: 4, Hkv: 2, M: 3, N: 7, D: 4, Dv: 3, Causal: true}, 1.5, true, true)
}

// variantMixed is mixed (padding, packing, a window, GQA) with the three.
func variantMixed() *attention.Config { return WithVariants(mixed(), 2, true, true) }

// variantEmpty has a valid query row that sees no key (row 1: position 6,
// a window of 2 and keys up to position 3), defined with sinks as O = 0.
func variantEmpty() *attention.Config {
	return WithVariants(&attention.Config{B: 1, Hq: 2, Hkv: 1, M: 3, N: 4, D: 3, Dv: 2, Causal: true, Window: 2,
		QPos: []int{1, 6, 3}}, 1.5, true, true)
}

// variantEmptyRow is variantEmpty's row without a visible key.
const variantEmptyRow = 1

func variantLarge() *attention.Config { return WithVariants(large(), 3, true, true) }

// variantCase differentiates O with respect to q, k, v and the sinks: the
// backward is run's, then sinkGrad's.
func variantCase[T nn.Float](run AttentionFunc[T], sinkGrad func(dsinks, o, lse, do []T, c *attention.Config), c *attention.Config, seed uint64) Case[T] {
	t := random(c, seed)
	q, k, v := vec.Convert[T](t.q), vec.Convert[T](t.k), vec.Convert[T](t.v)
	sinks := vec.Convert[T](c.Sinks)
	lse := make([]T, c.B*c.Hq*c.M)
	out := make([]T, c.B*c.Hq*c.M*c.Dv)
	at := func() *attention.Config { // the sinks as they are now, perturbed or not
		d := *c
		d.Sinks = vec.Convert[float64](sinks)
		return &d
	}
	return Case[T]{
		Name:    describe(c),
		Inputs:  []Input[T]{{"q", q}, {"k", k}, {"v", v}, {"sinks", sinks}},
		Out:     len(out),
		Forward: func(o []T) error { return run(o, lse, nil, nil, nil, q, k, v, nil, at()) },
		Backward: func(g [][]T, do []T) error {
			if sinkGrad == nil {
				return fmt.Errorf("the implementation has no sink gradient")
			}
			d := at()
			if err := run(out, lse, g[0], g[1], g[2], q, k, v, do, d); err != nil {
				return err
			}
			return protect(func() error { sinkGrad(g[3], out, lse, do, d); return nil })
		},
	}
}

func variantCases(impl Impl, big bool) []Case[float64] {
	if big {
		return []Case[float64]{variantCase(impl.Run, impl.SinkGrad, variantLarge(), 30)}
	}
	return []Case[float64]{variantCase(impl.Run, impl.SinkGrad, variantChunk(), 31),
		variantCase(impl.Run, impl.SinkGrad, variantMixed(), 32), variantCase(impl.Run, impl.SinkGrad, variantEmpty(), 33)}
}

func variantCases32(impl Impl, big bool) []Case[float32] {
	g := attention.SinkGrad[float32]
	if big {
		return []Case[float32]{variantCase(impl.F32, g, variantLarge(), 30)}
	}
	return []Case[float32]{variantCase(impl.F32, g, variantChunk(), 31), variantCase(impl.F32, g, variantMixed(), 32),
		variantCase(impl.F32, g, variantEmpty(), 33)}
}

// variantsGuide explains the variants.
var variantsGuide = OpGuide{
	What: "Masked attention with the variants of 2024–2026 models: logit softcapping (Gemma 2), ALiBi's distance bias " +
		"(MPT, BLOOM) and learned attention sinks (one logit per head in every row's softmax denominator, with no value " +
		"row). Each is applied in this order to the scaled scores, before the mask; softcap and the slopes are fixed, " +
		"the sinks are learned.",
	Forward: []Step{
		{Eq: "S = Q Kᵀ · scale;  T = c · tanh(S / c);  T ← T − m_h · |qpos − kpos|",
			Shape: "[B,Hq,M,N]; m_h one slope per query head",
			Why:   "softcap bounds every logit by c; ALiBi penalises distance in logical positions, so a cache and left padding give the bias of the full pass"},
		{Eq: "P = exp(T) / (Σⱼ exp(Tⱼ) + exp(σ_h)) over the visible keys,  lse = log(Σⱼ exp(Tⱼ) + exp(σ_h)),  O = P V",
			Shape: "σ [Hq]; P [B,Hq,M,N]",
			Why:   "the sink takes part of every row's weight and contributes no value: rows may attend to nothing, and a row with no visible key is defined, O = 0"},
	},
	Backward: []Step{
		{Path: "sinks", Eq: "dσ_h = −Σ_{b,i} P_sink,i · rowsum(dO ⊙ O)ᵢ,  P_sink = exp(σ_h − lse)",
			Shape: "[Hq], summed over batch items and rows",
			Why:   "∂Oᵢ/∂σ = −P_sink,i Oᵢ: raising the sink scales every row's output down by its share"},
		{Path: "Q/K path", Eq: "dS = P ⊙ (dP − rowsum(P ⊙ dP));  dS ⊙= 1 − tanh²(S / c)",
			Shape: "[B,Hq,M,N]",
			Why:   "the sink has no value row, so dP has no entry for it and the row sum runs over the keys: plain attention's formula; softcap's chain factor is applied to the scores before the cap, ALiBi's constant passes the gradient unchanged"},
	},
	Notes: []string{
		"Finite differences see a wrong dσ, a dropped 1 − tanh² factor and a backward that forgets the sink; they cannot see a bias computed from the wrong positions, a flipped sign of the bias, a sink forgotten in both passes, or softcap applied after the mask (masked −∞ turned into −c): each of those is self-consistent, and a semantic check below catches it.",
	},
}

// Variants returns the suite of the variants: finite differences of every
// element (the sinks included) and the properties finite differences
// cannot see.
func Variants() Suite[Impl] {
	spec := gradSpec[Impl]{op: "attention with softcap, ALiBi and sinks (q, k, v, sinks)", ref: AttentionReference, dirs: 6,
		cases: variantCases, cases32: variantCases32}
	gen := spec.checks()
	gen[0].Limit = "agreement with the forward as written: a bias from the wrong positions, or a sink left out of both passes, has a matching backward"
	return Suite[Impl]{
		Guide: variantsGuide,
		Checks: append(gen,
			Check[Impl]{Name: "sink-limit", Kind: Semantic, Run: sinkLimit,
				Claim: "a sink of −10⁴ gives plain attention's O, lse and gradients bit for bit, and dσ = 0",
				Limit: "the limit only; the sink's weight at finite σ is sink-weight's",
				Long: Long{
					Tests:  "with every σ_h = −10⁴ the outputs and gradients are bit-identical (==) to those without sinks, and dσ is exactly 0",
					Shapes: describe(variantChunk()),
					Proves: "the sink enters only through the denominator: exp(σ − m) = 0 leaves everything else untouched",
					Cannot: "anything at finite σ",
				}},
			Check[Impl]{Name: "sink-weight", Kind: Semantic, Run: sinkWeight,
				Claim: "lse with the sink is logaddexp(lse without it, σ) and O is the plain O scaled by exp(lse₀ − lse); a larger σ shrinks every row",
				Limit: "the forward; the backward's sink is finite differences'",
				Long: Long{
					Tests:  fmt.Sprintf("against the same call without sinks: lse = log(e^lse₀ + e^σ) and O = O₀ · e^(lse₀ − lse) within %g; with σ + 1 every valid row's |O| is strictly smaller", identical),
					Shapes: describe(variantChunk()),
					Proves: "the sink is in the denominator of every row, forward and saved lse alike: a sink forgotten in both passes (consistent, so finite differences pass) fails here",
					Cannot: "the gradients",
				}},
			Check[Impl]{Name: "sink-empty-row", Kind: Semantic, Run: sinkEmptyRow,
				Claim: "with sinks, a valid row that sees no key is no error: O = 0, lse = σ, and a loss on it gives zero gradients and dσ = 0",
				Limit: "one empty row",
				Long: Long{
					Tests:  fmt.Sprintf("query row %d sees no key; O = 0 and lse = σ_h exactly, and with dO zero except on that row, dQ, dK, dV and dσ are exactly 0", variantEmptyRow),
					Shapes: describe(variantEmpty()),
					Proves: "the sink takes all the weight of an empty row, and nothing flows back from it",
					Cannot: "rows that see keys",
				}},
			Check[Impl]{Name: "softcap-limit", Kind: Semantic, Run: softcapLimit,
				Claim: "a softcap of 10⁶ gives plain attention's O, lse and gradients (within 1e-9)",
				Limit: "the limit; the cap's derivative is finite differences'",
				Long: Long{
					Tests:  "with c = 10⁶, c · tanh(s/c) differs from s by about s³/3c²; O, lse, dQ, dK, dV equal those without softcap within 1e-9",
					Shapes: describe(WithVariants(mixed(), 1e6, false, false)),
					Proves: "softcap is c · tanh(s / c) of the scaled score, not of something else",
					Cannot: "what happens near the cap",
				}},
			Check[Impl]{Name: "softcap-bound", Kind: Semantic, Run: softcapBound,
				Claim: "with scores in the hundreds and softcap c = 2, every row's lse lies in [log n − c, log n + c] for its n visible keys",
				Limit: "the forward",
				Long: Long{
					Tests:  "queries scaled by 50 make raw scores of ±100s; with c = 2 no logit may leave [−c, c], so lse ∈ [log n − c, log n + c] where n is the row's count of visible keys",
					Shapes: describe(WithVariants(mixed(), 2, false, false)),
					Proves: "the cap is applied to every visible score, and masked keys stay out of n",
					Cannot: "the gradients",
				}},
			Check[Impl]{Name: "softcap-mask", Kind: Semantic, Run: softcapMask,
				Claim: "under softcap, output row i changes when value j changes exactly when key j is visible to query i",
				Limit: "probes the forward's dependence",
				Long: Long{
					Tests:  "the visibility probe (perturb value row j, watch output row i) with softcap 1: a masked key must stay masked",
					Shapes: describe(WithVariants(mixed(), 1, false, false)),
					Proves: "softcap comes before the mask: a mask written as −∞ and then capped to −c would let every hidden key in, consistently in both passes",
					Cannot: "the values where it looks",
				}},
			Check[Impl]{Name: "alibi-limit", Kind: Semantic, Run: alibiLimit,
				Claim: "ALiBi slopes of 0 give plain attention's O, lse and gradients bit for bit",
				Limit: "the limit",
				Long: Long{
					Tests:  "with every slope 0 the outputs and gradients are bit-identical (==) to those without ALiBi",
					Shapes: describe(WithVariants(mixed(), 0, true, false)),
					Proves: "the bias is slope · distance and nothing else",
					Cannot: "the distance",
				}},
			Check[Impl]{Name: "alibi-closed-form", Kind: Semantic, Run: alibiClosedForm,
				Claim: "with q = 0 every raw score is 0, so Oᵢ = Σⱼ e^(−m_h|qposᵢ − kposⱼ|) vⱼ / Σⱼ e^(…) over the visible keys",
				Limit: "q = 0: the bias alone",
				Long: Long{
					Tests:  fmt.Sprintf("with q = 0, O equals the average of the visible values weighted by e^(−m_h · |qpos − kpos|), computed here from the positions, within %g", identical),
					Shapes: describe(WithVariants(mixed(), 0, true, false)),
					Proves: "the bias has the right sign (near keys weigh more), slope per query head and logical positions (padding and packing shift slots, not positions)",
					Cannot: "the bias with q ≠ 0; the combination with softcap (finite differences and chunking cover it)",
				}},
			Check[Impl]{Name: "alibi-chunked-equals-full", Kind: Semantic, Run: alibiChunked,
				Claim: "with ALiBi, softcap and sinks, the last 3 queries run as a chunk after a cache of 4 give the full pass's outputs",
				Limit: "one chunking",
				Long: Long{
					Tests:  fmt.Sprintf("run 7 tokens in one causal pass, then the last 3 as a chunk against the 4 cached keys; the chunk's O and lse equal the full pass's last rows within %g", identical),
					Shapes: describe(WithVariants(&attention.Config{B: 1, Hq: 4, Hkv: 2, M: 7, N: 7, D: 4, Dv: 3, Causal: true}, 1.5, true, true)),
					Proves: "the bias depends on logical positions: a bias from array slots (query i of a chunk at slot i) differs after a cache",
					Cannot: "other chunkings",
				}},
			Check[Impl]{Name: "window-keys", Kind: Semantic, Run: windowKeys,
				Claim: "with a window of 3 and the variants on, row i reads exactly keys max(0, i − 2) … i: W keys including the current one",
				Limit: "probes the forward",
				Long: Long{
					Tests:  "the visibility probe on a causal window of W = 3 keys: each row reads the W keys ending at its own position (attnlab's, Hugging Face's and llama.cpp's convention), not W + 1",
					Shapes: describe(windowConfig()),
					Proves: "the window's convention under softcap, ALiBi and sinks",
					Cannot: "the values",
				}},
		),
		At: func(impl Impl, s Sizes, seed uint64) Case[float64] {
			return variantCase(impl.Run, impl.SinkGrad, WithVariants(attentionSized(s), 3, true, true), seed)
		},
		At32: func(impl Impl, s Sizes, seed uint64) Case[float32] {
			return variantCase(impl.F32, attention.SinkGrad[float32], WithVariants(attentionSized(s), 3, true, true), seed)
		},
		Reads: "q [B,Hq,M,D], k [B,Hkv,N,D], v [B,Hkv,N,Dv], sinks [Hq]; with Causal the M queries follow a cache of N − M keys; Window; softcap 3 and ALiBi slopes 1/2, 1/4, 1/8, 1/16, …",
	}
}

// FlashVariants is Variants with agreement with the reference on the
// variants' configurations.
func FlashVariants() Suite[Impl] {
	s := Variants()
	s.Guide.Notes = append(s.Guide.Notes, "The fused kernel starts every row's running maximum and sum at the sink (m = σ, ℓ = 1), applies softcap (tanh through the vectorised exp) and ALiBi to each score tile before the mask, and multiplies the recomputed dS by 1 − (T/c)² in the backward.")
	s.Checks = append(s.Checks, variantsAgree)
	return s
}

func variantAgreeConfigs() []*attention.Config {
	return []*attention.Config{variantChunk(), variantMixed(), variantEmpty(), variantLarge(),
		WithVariants(&attention.Config{B: 1, Hq: 4, Hkv: 1, M: 1, N: 130, D: 8, Dv: 8, Causal: true, Window: 70}, 5, true, true),
		WithVariants(&attention.Config{B: 1, Hq: 2, Hkv: 1, M: 70, N: 131, D: 4, Dv: 4, Causal: true}, 0, true, true),
		WithVariants(&attention.Config{B: 2, Hq: 2, Hkv: 2, M: 65, N: 65, D: 5, Dv: 3}, 1, false, false),
		// ALiBi alone without a mask over several tiles: keys wholly
		// before, wholly after and astride a tile's queries
		WithVariants(&attention.Config{B: 1, Hq: 2, Hkv: 1, M: 130, N: 140, D: 4, Dv: 4}, 0, true, false)}
}

var variantsAgree = Check[Impl]{Name: "agrees-with-reference", Kind: Semantic,
	Claim: fmt.Sprintf("O, lse, dQ, dK, dV and dσ equal the reference's on %d configurations with the variants", len(variantAgreeConfigs())),
	Limit: "agreement, not correctness: the reference is proven by the other checks",
	Long: Long{
		Tests:  fmt.Sprintf("O, lse, dQ, dK, dV and dσ equal the reference's within %g", identical),
		Shapes: describeAll(variantAgreeConfigs()...),
		Proves: "the tiles, the sink's start of the online softmax and the vectorised tanh reproduce the reference to rounding",
		Cannot: "more than the reference",
	},
	Run: func(impl Impl) Result {
		var worst float64
		for x, c := range variantAgreeConfigs() {
			t := random(c, uint64(170+x))
			want, err := callVariant(AttentionReference, c, t)
			if err != nil {
				return errored(err, "reference: %v")
			}
			got, err := callVariant(impl, c, t)
			if err != nil {
				return errored(err, "%v")
			}
			d, msg := compare(identical, pair{"o", got.o, want.o}, pair{"lse", got.lse, want.lse},
				pair{"dq", got.dq, want.dq}, pair{"dk", got.dk, want.dk}, pair{"dv", got.dv, want.dv},
				pair{"dsinks", got.dsinks, want.dsinks})
			worst = max(worst, d)
			if msg != "" {
				return measured(fail("configuration %d (%s): %s", x, describe(c), msg), d)
			}
		}
		return measured(pass("%d configurations, max error %.1e", len(variantAgreeConfigs()), worst), worst)
	}}

// variantOutputs is what an implementation returned, the sinks' gradient
// included.
type variantOutputs struct {
	outputs
	dsinks []float64
}

// callVariant is call, then the sinks' gradient when c has sinks and t a dO.
func callVariant(impl Impl, c *attention.Config, t tensors) (variantOutputs, error) {
	out, err := call(impl, c, t)
	v := variantOutputs{outputs: out}
	if err != nil || c.Sinks == nil || t.do == nil {
		return v, err
	}
	if impl.SinkGrad == nil {
		return v, fmt.Errorf("the implementation has no sink gradient")
	}
	v.dsinks = make([]float64, c.Hq)
	err = protect(func() error { impl.SinkGrad(v.dsinks, out.o, out.lse, t.do, c); return nil })
	return v, err
}

// without returns a copy of c with edit applied.
func without(c *attention.Config, edit func(*attention.Config)) *attention.Config {
	d := *c
	edit(&d)
	return &d
}

// sameOutputs compares two calls' outputs and gradients within tol.
func sameOutputs(tol float64, got, want variantOutputs) (float64, string) {
	return compare(tol, pair{"o", got.o, want.o}, pair{"lse", got.lse, want.lse},
		pair{"dq", got.dq, want.dq}, pair{"dk", got.dk, want.dk}, pair{"dv", got.dv, want.dv})
}

func sinkLimit(impl Impl) Result {
	c := variantChunk()
	t := random(c, 180)
	deep := without(c, func(d *attention.Config) { d.Sinks = heads([]float64{-1e4}, c.Hq) })
	got, err := callVariant(impl, deep, t)
	if err != nil {
		return errored(err, "%v")
	}
	want, err := callVariant(impl, without(c, func(d *attention.Config) { d.Sinks = nil }), t)
	if err != nil {
		return errored(err, "without sinks: %v")
	}
	if d, msg := sameOutputs(0, got, want); msg != "" {
		return measured(fail("σ = −10⁴ is not plain attention: %s", msg), d)
	}
	for h, g := range got.dsinks {
		if g != 0 {
			return fail("dσ[%d] = %.3g at σ = −10⁴, want 0", h, g)
		}
	}
	return pass("σ = −10⁴ gives plain attention bit for bit, and dσ = 0")
}

func sinkWeight(impl Impl) Result {
	c := variantChunk()
	t := random(c, 181)
	t.do = nil
	got, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	plain, err := call(impl, without(c, func(d *attention.Config) { d.Sinks = nil }), t)
	if err != nil {
		return errored(err, "without sinks: %v")
	}
	lse, o := make([]float64, len(got.lse)), make([]float64, len(got.o))
	for x := range lse {
		h := x / c.M % c.Hq
		s := c.Sinks[h]
		mx := max(plain.lse[x], s)
		lse[x] = mx + math.Log(math.Exp(plain.lse[x]-mx)+math.Exp(s-mx))
		for e := range c.Dv {
			o[x*c.Dv+e] = plain.o[x*c.Dv+e] * math.Exp(plain.lse[x]-lse[x])
		}
	}
	d, msg := compare(impl.within(identical), pair{"lse", got.lse, lse}, pair{"o", got.o, o})
	if msg != "" {
		return measured(fail("the sink's share: %s", msg), d)
	}
	higher, err := call(impl, without(c, func(d *attention.Config) {
		d.Sinks = append([]float64(nil), c.Sinks...)
		for h := range d.Sinks {
			d.Sinks[h]++
		}
	}), t)
	if err != nil {
		return errored(err, "σ + 1: %v")
	}
	for x := range got.lse {
		if norm(higher.o[x*c.Dv:(x+1)*c.Dv]) >= norm(got.o[x*c.Dv:(x+1)*c.Dv]) {
			return fail("row %d of batch·head %d: |O| did not shrink when σ grew by 1", x%c.M, x/c.M)
		}
	}
	return measured(pass("lse = logaddexp(lse₀, σ), O = O₀ e^(lse₀ − lse), error %.1e; σ + 1 shrinks every row", d), d)
}

func norm(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

func sinkEmptyRow(impl Impl) Result {
	c := variantEmpty()
	t := random(c, 182)
	for x := range t.do { // the loss reads the empty row only
		if x/c.Dv%c.M != variantEmptyRow {
			t.do[x] = 0
		}
	}
	got, err := callVariant(impl, c, t)
	if err != nil {
		return errored(err, "an empty row with sinks: %v")
	}
	for h := range c.Hq {
		row := h*c.M + variantEmptyRow
		for e := range c.Dv {
			if v := got.o[row*c.Dv+e]; v != 0 {
				return fail("head %d, empty row %d: O[%d] = %.3g, want 0", h, variantEmptyRow, e, v)
			}
		}
		if got.lse[row] != c.Sinks[h] {
			return fail("head %d, empty row %d: lse = %.6g, want σ = %g", h, variantEmptyRow, got.lse[row], c.Sinks[h])
		}
	}
	for _, g := range []struct {
		name string
		x    []float64
	}{{"dq", got.dq}, {"dk", got.dk}, {"dv", got.dv}, {"dsinks", got.dsinks}} {
		for x, v := range g.x {
			if v != 0 {
				return fail("a loss on the empty row only gives %s[%d] = %.3g, want 0", g.name, x, v)
			}
		}
	}
	return pass("row %d sees no key: O = 0, lse = σ, and no gradient flows back from it", variantEmptyRow)
}

func softcapLimit(impl Impl) Result {
	c := WithVariants(mixed(), 1e6, false, false)
	t := random(c, 183)
	got, err := callVariant(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	want, err := callVariant(impl, mixed(), t)
	if err != nil {
		return errored(err, "without softcap: %v")
	}
	d, msg := sameOutputs(max(1e-9, impl.Precision), got, want)
	return compared(d, msg, "softcap 10⁶ equals plain attention within %.1e", d)
}

func softcapBound(impl Impl) Result {
	const capAt = 2.0
	c := WithVariants(mixed(), capAt, false, false)
	t := random(c, 184)
	for x := range t.q {
		t.q[x] *= 50
	}
	t.do = nil
	got, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	var worst float64
	for b := range c.B {
		for h := range c.Hq {
			for i := range c.M {
				n := 0
				for j := range c.N {
					if c.Visible(b, i, j) {
						n++
					}
				}
				if n == 0 {
					continue
				}
				lse, base := got.lse[(b*c.Hq+h)*c.M+i], math.Log(float64(n))
				over := math.Abs(lse-base) - capAt
				worst = max(worst, math.Abs(lse-base))
				if !(over <= impl.within(identical)*(1+math.Abs(lse))) {
					return fail("batch %d, head %d, row %d: lse = %.6g with %d visible keys, outside [%.4g, %.4g]: a logit left [−%g, %g]",
						b, h, i, lse, n, base-capAt, base+capAt, capAt, capAt)
				}
			}
		}
	}
	return pass("with raw scores in the hundreds, |lse − log n| ≤ %g (largest %.3g)", capAt, worst)
}

func softcapMask(impl Impl) Result {
	c := WithVariants(mixed(), 1, false, false)
	seen, err := probe(impl, c, random(c, 185))
	if err != nil {
		return errored(err, "%v")
	}
	if msg := sameVisibility(seen, c); msg != "" {
		return fail("under softcap: %s", msg)
	}
	return pass("under softcap every row reads exactly its visible keys")
}

func alibiLimit(impl Impl) Result {
	c := WithVariants(mixed(), 0, true, false)
	c.Alibi = make([]float64, c.Hq)
	t := random(c, 186)
	got, err := callVariant(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	want, err := callVariant(impl, mixed(), t)
	if err != nil {
		return errored(err, "without ALiBi: %v")
	}
	if d, msg := sameOutputs(0, got, want); msg != "" {
		return measured(fail("slopes 0 are not plain attention: %s", msg), d)
	}
	return pass("slopes 0 give plain attention bit for bit")
}

func alibiClosedForm(impl Impl) Result {
	c := WithVariants(mixed(), 0, true, false)
	t := random(c, 187)
	clear(t.q)
	t.do = nil
	got, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	want := make([]float64, len(got.o))
	G := c.Hq / c.Hkv
	for b := range c.B {
		for h := range c.Hq {
			kvh := h / G
			for i := range c.M {
				var sum float64
				row := want[((b*c.Hq+h)*c.M+i)*c.Dv:][:c.Dv]
				for j := range c.N {
					if !c.Visible(b, i, j) {
						continue
					}
					w := math.Exp(-c.Alibi[h] * math.Abs(float64(c.QueryPos(b, i)-c.KeyPos(b, j))))
					sum += w
					for e := range c.Dv {
						row[e] += w * t.v[((b*c.Hkv+kvh)*c.N+j)*c.Dv+e]
					}
				}
				for e := range row {
					if sum > 0 {
						row[e] /= sum
					}
				}
			}
		}
	}
	d, msg := compare(impl.within(identical), pair{"o", got.o, want})
	return compared(d, msg, "with q = 0, O is the distance-weighted average of the visible values, error %.1e", d)
}

func alibiChunked(impl Impl) Result {
	full := WithVariants(&attention.Config{B: 1, Hq: 4, Hkv: 2, M: 7, N: 7, D: 4, Dv: 3, Causal: true}, 1.5, true, true)
	t := random(full, 188)
	t.do = nil
	all, err := call(impl, full, t)
	if err != nil {
		return errored(err, "%v")
	}
	const from = 4
	chunk := without(full, func(d *attention.Config) { d.M = full.M - from })
	u := t
	u.q = headRows(t.q, full.B, full.Hq, full.M, full.D, from, full.M)
	part, err := call(impl, chunk, u)
	if err != nil {
		return errored(err, "the chunk: %v")
	}
	d, msg := compare(impl.within(identical), pair{"o", part.o, headRows(all.o, full.B, full.Hq, full.M, full.Dv, from, full.M)},
		pair{"lse", part.lse, headRows(all.lse, full.B, full.Hq, full.M, 1, from, full.M)})
	return compared(d, msg, "a chunk after a cache of %d equals the full pass, error %.1e", from, d)
}

func windowConfig() *attention.Config {
	return WithVariants(&attention.Config{B: 1, Hq: 2, Hkv: 1, M: 8, N: 8, D: 3, Dv: 2, Causal: true, Window: 3}, 2, true, true)
}

func windowKeys(impl Impl) Result {
	c := windowConfig()
	seen, err := probe(impl, c, random(c, 189))
	if err != nil {
		return errored(err, "%v")
	}
	for i := range c.M {
		n := 0
		for j := range c.N {
			if seen[0][i][j] {
				n++
			}
		}
		if want := min(c.Window, i+1); n != want {
			return fail("row %d reads %d keys, want %d (a window of %d keys including the current one)\n%s", i, n, want, c.Window, drawPair(seen[0], c.Visibility(0)))
		}
	}
	if msg := sameVisibility(seen, c); msg != "" {
		return fail("%s", msg)
	}
	return pass("each row reads the %d keys ending at its own position", c.Window)
}
