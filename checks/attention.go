package checks

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
)

// AttentionFunc is an attention implementation in precision T. It computes
// o (B, Hq, M, Dv) and lse (B, Hq, M) from q, k and v; when do is not nil
// it then adds the gradients into dq, dk and dv. Layout and semantics are
// those of package attention; attention.Stages.Run and attention.FlashRun
// have this signature.
type AttentionFunc[T nn.Float] func(o, lse, dq, dk, dv, q, k, v, do []T, c *attention.Config) error

// Impl is an attention implementation: its float64 path, which every check
// but float32 runs, and its float32 path.
type Impl struct {
	Run AttentionFunc[float64]
	F32 AttentionFunc[float32]
	// Precision is the relative rounding of what Run returns, when it is
	// coarser than float64's: an implementation under test that computes
	// in float32 only answers the float64 checks in float32 numbers. The
	// checks that compare two of its answers allow this much; 0 for a
	// float64 implementation.
	Precision float64
	// NoGrad: the implementation computes no gradients. The checks that
	// need them are not run on it; float32 and empty-row test the forward
	// alone.
	NoGrad bool
	// SinkGrad adds the gradient of the sink logits (Config.Sinks) into
	// dsinks from the forward's o and lse and dO; nil for an
	// implementation without sinks. The variant checks need it.
	SinkGrad func(dsinks, o, lse, do []float64, c *attention.Config)
}

// within is the tolerance tol of a comparison of two answers of impl,
// widened to impl's precision.
func (impl Impl) within(tol float64) float64 { return max(tol, impl.Precision) }

// ForwardOnly reports whether impl computes no gradients (NoGrad).
func (impl Impl) ForwardOnly() bool { return impl.NoGrad }

// AttentionReference is the readable reference attention of package
// attention, in both precisions.
var AttentionReference = Impl{Run: attention.Reference[float64]().Run, F32: attention.Reference[float32]().Run,
	SinkGrad: attention.SinkGrad[float64]}

// FlashAttention is the fused kernel, attention.FlashRun, in both
// precisions: its float32 path runs the SIMD tile products and the
// vectorised exp.
var FlashAttention = Impl{Run: attention.FlashRun[float64], F32: attention.FlashRun[float32],
	SinkGrad: attention.SinkGrad[float64]}

// tensors holds the inputs of one attention call.
type tensors struct {
	q, k, v, do []float64
}

// outputs holds what an implementation returned.
type outputs struct {
	o, lse, dq, dk, dv []float64
}

// random returns inputs for c drawn from N(0, 1) with a fixed seed; do is a
// fixed random G, so the scalar loss Σ O ⊙ G weighs every output element.
func random(c *attention.Config, seed uint64) tensors {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	return tensors{
		q:  fill(c.B * c.Hq * c.M * c.D),
		k:  fill(c.B * c.Hkv * c.N * c.D),
		v:  fill(c.B * c.Hkv * c.N * c.Dv),
		do: fill(c.B * c.Hq * c.M * c.Dv),
	}
}

// call runs impl's float64 path on fresh zeroed buffers; do may be nil for
// a forward only. A panic inside impl is returned as an error.
func call(impl Impl, c *attention.Config, t tensors) (out outputs, err error) {
	out = outputs{
		o:   make([]float64, c.B*c.Hq*c.M*c.Dv),
		lse: make([]float64, c.B*c.Hq*c.M),
		dq:  make([]float64, len(t.q)),
		dk:  make([]float64, len(t.k)),
		dv:  make([]float64, len(t.v)),
	}
	err = protect(func() error {
		return impl.Run(out.o, out.lse, out.dq, out.dk, out.dv, t.q, t.k, t.v, t.do, c)
	})
	return out, err
}

// headRows copies rows [from, to) of every (batch, head) block of a tensor
// laid out (B, H, T, W) into a new (B, H, to-from, W) tensor.
func headRows(x []float64, B, H, T, W, from, to int) []float64 {
	out := make([]float64, 0, B*H*(to-from)*W)
	for bh := range B * H {
		out = append(out, x[(bh*T+from)*W:(bh*T+to)*W]...)
	}
	return out
}

// batchRows is headRows for per-token data laid out (B, T).
func batchRows[E any](x []E, B, T, from, to int) []E {
	if x == nil {
		return nil
	}
	out := make([]E, 0, B*(to-from))
	for b := range B {
		out = append(out, x[b*T+from:b*T+to]...)
	}
	return out
}

// describe names an attention configuration: its sizes and each mask
// feature it has.
func describe(c *attention.Config) string {
	s := shape("B", c.B, "Hq", c.Hq, "Hkv", c.Hkv, "M", c.M, "N", c.N, "D", c.D, "Dv", c.Dv)
	var f []string
	if c.Causal {
		f = append(f, "causal")
		if c.Convention != attention.Positions {
			f = append(f, c.Convention.String())
		}
	}
	if c.Window > 0 {
		f = append(f, fmt.Sprintf("window %d", c.Window))
	}
	if c.KValid != nil || c.QValid != nil {
		f = append(f, "padding")
	}
	if c.QSeg != nil {
		f = append(f, "segments")
	}
	if c.QPos != nil || c.KPos != nil {
		f = append(f, "explicit positions")
	}
	if c.Softcap > 0 {
		f = append(f, fmt.Sprintf("softcap %g", c.Softcap))
	}
	if c.Alibi != nil {
		f = append(f, "ALiBi")
	}
	if c.Sinks != nil {
		f = append(f, "sinks")
	}
	if len(f) > 0 {
		s += ", " + strings.Join(f, ", ")
	}
	return s
}

// describeAll lists configurations, one describe each.
func describeAll(cs ...*attention.Config) string {
	var d []string
	for _, c := range cs {
		d = append(d, describe(c))
	}
	return strings.Join(d, "; ")
}

// attentionCase differentiates O with respect to q, k and v.
func attentionCase[T nn.Float](run AttentionFunc[T], c *attention.Config, seed uint64) Case[T] {
	t := random(c, seed)
	q, k, v := vec.Convert[T](t.q), vec.Convert[T](t.k), vec.Convert[T](t.v)
	lse := make([]T, c.B*c.Hq*c.M)
	out := make([]T, c.B*c.Hq*c.M*c.Dv)
	return Case[T]{
		Name:    describe(c),
		Inputs:  []Input[T]{{"q", q}, {"k", k}, {"v", v}},
		Out:     len(out),
		Forward: func(o []T) error { return run(o, lse, nil, nil, nil, q, k, v, nil, c) },
		Backward: func(g [][]T, do []T) error {
			return run(out, lse, g[0], g[1], g[2], q, k, v, do, c)
		},
	}
}

func attentionCases[T nn.Float](run AttentionFunc[T], big bool) []Case[T] {
	if big {
		return []Case[T]{attentionCase(run, large(), 20)}
	}
	return []Case[T]{attentionCase(run, cacheChunk(), 10), attentionCase(run, mixed(), 11)}
}

// attentionSized is the configuration of sizes s, with the default
// positions: M queries after a cache of N − M keys.
func attentionSized(s Sizes) *attention.Config {
	return &attention.Config{B: s.B, Hq: s.Hq, Hkv: s.Hkv, M: s.M, N: s.N, D: s.D, Dv: s.Dv, Causal: s.Causal, Window: s.Window}
}

// attentionGuide explains the attention op.
var attentionGuide = OpGuide{
	What: "Scaled dot-product attention with causal, padding, segment and sliding-window masks, " +
		"grouped-query heads (Hq query heads share Hkv key/value heads) and a KV cache: " +
		"M new queries read N keys, the N − M cached ones included. The loss used by every check is " +
		"L = Σ O ⊙ G with a fixed random G, so dO = G and every output element matters.",
	Forward: []Step{
		{Eq: "S = Q Kᵀ · scale,  scale = 1/√D",
			Shape: "Q [B,Hq,M,D], K [B,Hkv,N,D] → S [B,Hq,M,N]; query head h reads KV head h / (Hq/Hkv)",
			Why:   "one score per (query, key) pair; the scale keeps the scores' variance near 1 as D grows"},
		{Eq: "P = softmax_row(S over the visible keys only: hidden ones are skipped, as if −∞),  lse = log Σⱼ exp(Sᵢⱼ)",
			Shape: "P [B,Hq,M,N], lse [B,Hq,M]",
			Why:   "each row of P is a probability distribution over the keys that query may read; the row maximum is subtracted before exp"},
		{Eq: "O = P V",
			Shape: "P [B,Hq,M,N], V [B,Hkv,N,Dv] → O [B,Hq,M,Dv]",
			Why:   "each output row mixes the value rows by the weights of its row of P"},
	},
	Backward: []Step{
		{Path: "V path (content)", Eq: "dV = Pᵀ dO",
			Shape: "[B,Hq,N,M] · [B,Hq,M,Dv] = [B,Hq,N,Dv], summed over the Hq/Hkv query heads of a group → dV [B,Hkv,N,Dv]",
			Why:   "value row j collects the error of every query row i that read it, weighted by how much it read, Pᵢⱼ. A key no query may see has Pᵢⱼ = 0 in every row, so its dV is exactly zero"},
		{Path: "Q/K path (weights)", Eq: "dP = dO Vᵀ",
			Shape: "[B,Hq,M,Dv] · [B,Hkv,Dv,N] = [B,Hq,M,N]",
			Why:   "how the loss changes if weight Pᵢⱼ changes: output row i moves along value row j"},
		{Path: "Q/K path (weights)", Eq: "dS = P ⊙ (dP − rowsum(P ⊙ dP))",
			Shape: "[B,Hq,M,N]; rowsum gives [B,Hq,M,1], broadcast along the row",
			Why:   "the softmax Jacobian diag(p) − ppᵀ applied to a row without building the N×N matrix. Every row of dS sums to zero, the mirror of softmax ignoring a constant added to a row; a masked entry has P = 0 and so dS = 0"},
		{Path: "Q/K path (weights)", Eq: "dQ = dS K · scale",
			Shape: "[B,Hq,M,N] · [B,Hkv,N,D] = [B,Hq,M,D]",
			Why:   "the scores were S = Q Kᵀ · scale: row i of dQ mixes the keys by row i of dS"},
		{Path: "Q/K path (weights)", Eq: "dK = dSᵀ Q · scale",
			Shape: "[B,Hq,N,M] · [B,Hq,M,D] = [B,Hq,N,D], summed over the query heads of a group → dK [B,Hkv,N,D]",
			Why:   "the same product seen from the key side; a shared KV head accumulates the gradient of every query head that reads it"},
	},
	Notes: []string{
		"K and V both come from the past tokens but reach the loss by different paths: V carries content (its gradient needs only P), K decides the weights (its gradient passes through the softmax Jacobian). A backward through V alone would learn what to output but never what to attend to.",
		"With a loss on query row 0 only, dV_j = P₀ⱼ dO₀ and dK_j = scale · dS₀ⱼ q₀ with dS₀ⱼ = P₀ⱼ(…): both are exactly zero for every key row 0 may not see. The first-row-grad check asserts exactly that, by == 0, not by a tolerance.",
		"Finite differences compare this backward with the forward as written. A forward that reads the wrong keys has a backward that matches it, equally wrong: masks, head mapping and positions are tested by the semantic checks.",
	},
}

// Attention returns the suite of attention.
func Attention() Suite[Impl] {
	spec := gradSpec[Impl]{op: "attention (q, k, v)", ref: AttentionReference, dirs: 6,
		cases:   func(i Impl, big bool) []Case[float64] { return attentionCases(i.Run, big) },
		cases32: func(i Impl, big bool) []Case[float32] { return attentionCases(i.F32, big) }}
	gen := spec.checks()
	gen[0].Claim = "dQ, dK, dV equal the 4-point differences of L = Σ O ⊙ G, every element (" + describeAll(cacheChunk(), mixed()) + ")"
	gen[0].Limit = "agreement with the forward as written: a forward that reads the wrong keys has a matching, equally wrong backward"
	gen[0].Long.Proves = "dQ, dK and dV are the derivatives of this forward, masks, padding and segments included"
	gen[0].Long.Cannot = "that the mask is the right one: with the mask removed from forward and backward alike, the numbers still agree (the fault mask-dropped passes this check)"
	gen[1].Claim = "uᵀ∇L equals (L(x+εu) − L(x−εu))/2ε for random directions u over all of q, k, v (" + describe(large()) + ")"
	gen[1].Limit = "a few directions: an error confined to a tiny set of elements may hide; the element check covers small shapes"
	chunk, gappy := conventionConfigs()
	return Suite[Impl]{
		Guide: attentionGuide,
		Checks: append(gen,
			Check[Impl]{Name: "first-row-grad", Kind: Semantic, Run: firstRowGrad,
				Claim: "a loss on query row 0 only gives dK, dV exactly zero for every key row 0 may not see, and non-zero for those it sees",
				Limit: "tests what row 0 reaches; other rows are covered by the visibility check",
				Long: Long{
					Tests:  "with dO zero except on query row 0 (the loss reads row 0 only), dK_j and dV_j must be exactly 0 (compared with ==) for every key row 0 may not see, and non-zero for each it sees",
					Shapes: fmt.Sprintf("%s: row 0 is at position %d, keys %d..%d are its future", describe(firstRowConfig()), firstRowConfig().QueryPos(0, 0), firstRowConfig().QueryPos(0, 0)+1, firstRowConfig().N-1),
					Proves: "no gradient path from row 0's loss reaches a future key: the backward's mask matches the rule, and dV is formed with Pᵀ, not P",
					Cannot: "what other rows reach (the visibility check covers those); that the loss itself is the right one",
				}},
			Check[Impl]{Name: "future-invariance", Kind: Semantic, Run: futureInvariance,
				Claim: "changing the queries, keys and values of tokens after position t leaves outputs at positions ≤ t bit-identical",
				Limit: "a causal property of the forward only",
				Long: Long{
					Tests:  fmt.Sprintf("change the queries, keys and values of the tokens after position %d; the outputs at positions ≤ %d must be bit-identical", futureCut, futureCut),
					Shapes: describe(futureConfig()),
					Proves: "causality of the forward: the past cannot read the future",
					Cannot: "anything about gradients; that the past sees all it should (a mask hiding too much passes)",
				}},
			Check[Impl]{Name: "visibility", Kind: Semantic, Run: visibility,
				Claim: "output row i changes when value j changes exactly when the mask rule says key j is visible to query i (padding, segments, window, cache offset)",
				Limit: "probes the forward's dependence, not the gradient's values",
				Long: Long{
					Tests:  "perturb value row j and watch output row i: it must change exactly when Visible(i, j) holds, for every (i, j)",
					Shapes: describeAll(mixed(), cacheChunk()),
					Proves: "the forward reads exactly the keys the mask rule allows: no more (leaks) and no fewer (hidden history)",
					Cannot: "the gradient's values; whether the rule itself matches the task (it is the specification)",
				}},
			Check[Impl]{Name: "conventions", Kind: Semantic, Run: conventions,
				Claim: "position, bottom-right and top-left causal masks agree when M == N and differ as documented when M ≠ N",
				Limit: "checks where the implementation looks, not the numbers it computes there",
				Long: Long{
					Tests:  "the three causal conventions (position, bottom-right, top-left) give the same visibility and outputs at M = N, and differ as documented at M ≠ N",
					Shapes: fmt.Sprintf("%s; %s (a chunk after %d cached tokens); %s, a cache with empty slots, where bottom-right counts slots and position counts tokens", describe(squareConfig()), describe(chunk), chunk.N-chunk.M, describe(gappy)),
					Proves: "the implementation honours the convention it is given; top-left (tril(ones(M,N))) hides the cache from a new chunk, as the design notes warn",
					Cannot: "the numbers computed where it looks",
				}},
			Check[Impl]{Name: "chunked-equals-full", Kind: Semantic, Run: chunkedEqualsFull,
				Claim: fmt.Sprintf("running %d tokens in chunks of %s against the cache gives the full pass's outputs", chunkedConfig().M, chunkings(chunkedSizes[:len(chunkedSizes)-1])),
				Limit: "the attention step only; the model's KV cache is checked where it is built",
				Long: Long{
					Tests:  fmt.Sprintf("run %d tokens in one pass, and in chunks of %s against the growing cache; every chunking must give the full pass's outputs", chunkedConfig().M, chunkings(chunkedSizes)),
					Shapes: fmt.Sprintf("%s, cache offsets 0…%d", describe(chunkedConfig()), chunkedConfig().M-1),
					Proves: "a chunk's mask is offset by the cache length (key_position ≤ past_length + local_query_index)",
					Cannot: "the model's KV cache (positions, rotation of cached keys): the decoder's full-equals-decoding checks that",
				}},
			Check[Impl]{Name: "padding-invariance", Kind: Semantic, Run: paddingInvariance,
				Claim: "left or right padding leaves real tokens' outputs and gradients unchanged; pads get zero output and zero gradient",
				Limit: "one sequence length and two amounts of padding",
				Long: Long{
					Tests:  fmt.Sprintf("pad a sequence by %d tokens on the left, then on the right; real tokens' outputs and gradients must not change, and pads must get zero output and zero gradient", paddingPad),
					Shapes: fmt.Sprintf("%s, padded to %d slots", describe(paddingPlain()), paddingL+paddingPad),
					Proves: "padding keys are masked and padding queries pass nothing back",
					Cannot: "other lengths and amounts; positions of a padded sequence are the caller's (the layer checks RoPE under padding)",
				}},
			Check[Impl]{Name: "packing-equals-separate", Kind: Semantic, Run: packingEqualsSeparate,
				Claim: fmt.Sprintf("%d documents packed with segment ids and restarting positions give the outputs and gradients of separate runs", len(packingLens)),
				Limit: "segments as given; it cannot tell whether the caller assigned them right",
				Long: Long{
					Tests:  fmt.Sprintf("documents of %s tokens packed into one row with segment ids and positions restarting at 0 give the outputs and gradients of separate runs", list(packingLens)),
					Shapes: fmt.Sprintf("%s against one run per document", describe(packedConfig())),
					Proves: "segment ids isolate documents in both directions: forward and backward",
					Cannot: "whether the caller assigned the segments right; an end-of-text token alone does not isolate documents",
				}},
			Check[Impl]{Name: "gqa-equals-mha", Kind: Semantic, Run: gqaEqualsMHA,
				Claim: fmt.Sprintf("GQA (Hq=%d, Hkv=%d) equals MHA on physically repeated K, V: same O and dQ, and dK, dV equal the group sums", gqaConfig().Hq, gqaConfig().Hkv),
				Limit: "the contiguous head mapping of repeat_kv is taken as the definition",
				Long: Long{
					Tests:  "GQA equals MHA on K, V physically repeated per query head: same O, lse and dQ, and dK, dV equal to the sums over each group",
					Shapes: fmt.Sprintf("%s: K, V [B,%d,N,D] repeated to [B,%d,N,D], each KV head serving %d consecutive query heads", describe(gqaConfig()), gqaConfig().Hkv, gqaConfig().Hq, gqaConfig().Hq/gqaConfig().Hkv),
					Proves: "the head mapping kvh = h / (Hq/Hkv) and the accumulation of a shared head's gradient over its group",
					Cannot: "that contiguous grouping is what a checkpoint expects: repeat_kv's order is taken as the definition",
				}},
			Check[Impl]{Name: "ds-rowsum", Kind: Semantic, Run: dsRowSum,
				Claim: "each row of dS sums to zero, seen through Σⱼ dKⱼ = scale · Σᵢ (Σⱼ dSᵢⱼ) qᵢ = 0 for every key/value head",
				Limit: "a sum: errors that cancel within a row are left to finite differences",
				Long: Long{
					Tests:  fmt.Sprintf("every row of dS sums to zero; seen through the outputs as Σⱼ dKⱼ = scale · Σᵢ (Σⱼ dSᵢⱼ) qᵢ = 0 for every KV head, within %g of max|dK| (an implementation answering in float32 numbers: its precision, 1e-5 for conform's float32 adapters)", identical),
					Shapes: "dK [B,Hkv,N,D] summed over N, on " + describeAll(mixed(), cacheChunk()),
					Proves: "the − rowsum(P ⊙ dP) term of the softmax backward is present",
					Cannot: "errors that cancel within a row; finite differences cover those",
				}},
			Check[Impl]{Name: "shift-invariance", Kind: Semantic, Run: shiftInvariance,
				Claim: fmt.Sprintf("adding c to every key adds scale·(qᵢ·c) to row i of S: O unchanged, lse shifted by that constant (scores near %g, past exp's range)", shiftTarget),
				Limit: "one large shift; it shows the max is subtracted, not that the rest is right",
				Long: Long{
					Tests:  fmt.Sprintf("add a constant vector c to every key: row i of S shifts by scale·(qᵢ·c); O must be unchanged and lse shifted by exactly that constant, with shifts near %g, past exp's range; within 1e-9, or for answers in float32 numbers their precision times the scores' size, %g (a score of 1600 is rounded to 1600·2⁻²⁴, and the weights with it)", shiftTarget, 2*shiftTarget),
					Shapes: fmt.Sprintf("%s; scores shifted by up to ~%g", describe(mixed()), 2*shiftTarget),
					Proves: "the row maximum is subtracted before exp (no overflow to Inf/NaN) and lse includes it",
					Cannot: "anything beyond the max subtraction",
				}},
			Check[Impl]{Name: "delta-identity", Kind: Semantic, Run: deltaIdentity,
				Claim: "with P recomputed as exp(S − lse): rows of P sum to 1 and rowsum(dO ⊙ O) = rowsum(P ⊙ dP)",
				Limit: "checks that O and lse are consistent, the identity a fused backward relies on",
				Long: Long{
					Tests:  fmt.Sprintf("with P recomputed as exp(S − lse): every row of P sums to 1, and rowsum(dO ⊙ O) = rowsum(P ⊙ dP), within %g (answers in float32 numbers: their precision)", identical),
					Shapes: "[B,Hq,M] row sums on " + describe(mixed()),
					Proves: "O and lse are consistent with each other: the identity a fused backward relies on to skip storing P",
					Cannot: "that O is right; only that O and lse agree",
				}},
			Check[Impl]{Name: "empty-row", Kind: Contract, Run: emptyRow,
				Claim: "a valid query with no visible key is an error naming batch and row; a padding query gives zero output and no gradient",
				Limit: "the error path only",
				Long: Long{
					Tests:  "a valid query that sees no key is rejected with an error naming batch and row; a padding query gives zero output and no gradient",
					Shapes: fmt.Sprintf("%s: query row %d of batch %d is in a segment no key belongs to; then %s with padding query row %d", describe(emptyRowConfig()), emptyRow_, emptyBatch, describe(paddedRowConfig()), paddedRow),
					Proves: "an empty row is an error, not NaN or a silent zero",
					Cannot: "anything about rows that see keys",
				}},
		),
		At: func(impl Impl, s Sizes, seed uint64) Case[float64] {
			return attentionCase(impl.Run, attentionSized(s), seed)
		},
		At32: func(impl Impl, s Sizes, seed uint64) Case[float32] {
			return attentionCase(impl.F32, attentionSized(s), seed)
		},
		Reads: "q [B,Hq,M,D], k [B,Hkv,N,D], v [B,Hkv,N,Dv]; with Causal the M queries follow a cache of N − M keys; Window",
	}
}

// Flash returns the suite of the fused kernel: every check of attention, and
// agreement with the reference.
func Flash() Suite[Impl] {
	s := Attention()
	s.Guide = OpGuide{
		What: "The same attention computed by a fused, FlashAttention-2 style kernel: key/value tiles are streamed " +
			"with an online softmax, so P [B,Hq,M,N] is never stored; only O and lse [B,Hq,M] are kept for the backward.",
		Forward: []Step{
			{Eq: "for each key tile: m' = max(m, rowmax(S_tile)),  ℓ' = ℓ·e^(m−m') + rowsum(e^(S_tile − m')),  O' = O·e^(m−m') + e^(S_tile − m') V_tile",
				Shape: "tiles of 64 queries (all query heads of a KV group) × 64 keys; m, ℓ per query row",
				Why:   "the softmax is assembled tile by tile, the output rescaled when the row maximum grows; at the end O /= ℓ and lse = m + log ℓ"},
		},
		Backward: []Step{
			{Eq: "Δ = rowsum(dO ⊙ O)", Shape: "[B,Hq,M]",
				Why: "equals rowsum(P ⊙ dP), so the row sum of the softmax backward needs no second pass over the keys (the delta-identity check)"},
			{Eq: "P = exp(S − lse) recomputed per tile;  dV += Pᵀ dO;  dP = dO Vᵀ;  dS = P ⊙ (dP − Δ)",
				Shape: "tiles of [M,N]", Why: "the reference's equations, in tiles, with P rebuilt from the saved lse"},
			{Eq: "dQ += dS K · scale;  dK += dSᵀ Q · scale", Shape: "as the reference", Why: "as the reference"},
		},
		Notes: []string{
			"Every attention check runs on this kernel too, plus agrees-with-reference, which compares its outputs and gradients with the reference on " +
				fmt.Sprint(len(agreeConfigs())) + " configurations; its float32 path is the one training runs, with SIMD tile products and a vectorised exp.",
		},
	}
	s.Checks = append(s.Checks, AgreesWith("reference", AttentionReference))
	return s
}

// The configurations of the semantic checks.
const (
	futureCut   = 2 // tokens after this position change
	paddingL    = 5 // real tokens of padding-invariance
	paddingPad  = 2 // pads, left then right
	shiftTarget = 800.0
	emptyRow_   = 2 // the empty row of empty-row, in batch emptyBatch
	emptyBatch  = 1
	paddedRow   = 1 // the padding query row
)

var (
	chunkedSizes = [][]int{{1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 1}, {3, 3, 1}, {5, 2}, {7}}
	packingLens  = []int{3, 4}
)

func firstRowConfig() *attention.Config {
	return &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 3, N: 7, D: 4, Dv: 3, Causal: true}
}
func futureConfig() *attention.Config {
	return &attention.Config{B: 2, Hq: 4, Hkv: 2, M: 6, N: 6, D: 4, Dv: 3, Causal: true}
}
func squareConfig() *attention.Config {
	return &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 4, N: 4, D: 3, Dv: 2, Causal: true}
}

// conventionConfigs are the chunk after a cache and the cache with two
// empty slots (3 real tokens, then the new one at slot 5) and a window of
// 2 of conventions: positions count tokens, bottom-right counts slots.
func conventionConfigs() (chunk, gappy *attention.Config) {
	chunk = &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 2, N: 5, D: 3, Dv: 2, Causal: true}
	gappy = &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 1, N: 6, D: 3, Dv: 2, Causal: true, Window: 2,
		KValid: []bool{true, true, true, false, false, true}, KPos: []int{0, 1, 2, 3, 3, 3}, QPos: []int{3}}
	return chunk, gappy
}
func chunkedConfig() *attention.Config {
	return &attention.Config{B: 2, Hq: 4, Hkv: 2, M: 7, N: 7, D: 4, Dv: 3, Causal: true}
}
func paddingPlain() *attention.Config {
	return &attention.Config{B: 1, Hq: 4, Hkv: 2, M: paddingL, N: paddingL, D: 3, Dv: 2, Causal: true}
}
func packedConfig() *attention.Config {
	var seg, pos []int
	for d, L := range packingLens {
		for t := range L {
			seg, pos = append(seg, d), append(pos, t)
		}
	}
	T := len(seg)
	return &attention.Config{B: 1, Hq: 4, Hkv: 2, M: T, N: T, D: 3, Dv: 2, Causal: true, QSeg: seg, KSeg: seg, QPos: pos, KPos: pos}
}
func gqaConfig() *attention.Config {
	return &attention.Config{B: 2, Hq: 6, Hkv: 2, M: 3, N: 5, D: 4, Dv: 3, Causal: true}
}
func emptyRowConfig() *attention.Config {
	seg := []int{0, 0, 0, 0, 0, 0}
	seg[emptyBatch*3+emptyRow_] = 5 // a segment no key belongs to
	return &attention.Config{B: 2, Hq: 2, Hkv: 1, M: 3, N: 3, D: 2, Dv: 2, Causal: true, QSeg: seg, KSeg: []int{0, 0, 0, 0, 0, 0}}
}
func paddedRowConfig() *attention.Config {
	valid := []bool{true, true, true}
	valid[paddedRow] = false
	return &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 3, N: 3, D: 2, Dv: 2, Causal: true, QValid: valid}
}

// agreeConfigs are the configurations of agrees-with: every mask feature,
// the three conventions, M = 1, sizes past a 64-tile.
func agreeConfigs() []*attention.Config {
	return []*attention.Config{cacheChunk(), mixed(), large(),
		{B: 1, Hq: 4, Hkv: 1, M: 1, N: 130, D: 8, Dv: 8, Causal: true, Window: 70},
		{B: 2, Hq: 2, Hkv: 2, M: 65, N: 65, D: 5, Dv: 3},
		{B: 1, Hq: 2, Hkv: 1, M: 70, N: 131, D: 4, Dv: 4, Causal: true, Convention: attention.BottomRight},
		{B: 1, Hq: 2, Hkv: 1, M: 70, N: 131, D: 4, Dv: 4, Causal: true, Convention: attention.TopLeft},
	}
}

// AgreesWith returns a check that an implementation computes what ref
// computes, forward and every gradient, on configurations covering every
// mask feature and shapes that cross a 64-wide tile.
func AgreesWith(refName string, ref Impl) Check[Impl] {
	cfgs := agreeConfigs()
	return Check[Impl]{Name: "agrees-with-" + refName, Kind: Semantic,
		Claim: fmt.Sprintf("O, lse, dQ, dK, dV equal the %s's on %d configurations (every mask feature, the three conventions, M = 1, sizes past a 64-tile)", refName, len(cfgs)),
		Limit: "agreement, not correctness: the reference is proven by the other checks",
		Long: Long{
			Tests:  fmt.Sprintf("O, lse, dQ, dK and dV equal the %s's within %g on every configuration", refName, identical),
			Shapes: describeAll(cfgs...),
			Proves: "the tiling, online softmax and recomputation reproduce the reference to rounding",
			Cannot: "more than the reference: a shared mistake passes; the other checks test the kernel on its own",
		},
		Run: func(impl Impl) Result {
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
					return measured(fail("configuration %d (%s): %s", x, describe(c), msg), d)
				}
			}
			return measured(pass("%d configurations, max error %.1e", len(cfgs), worst), worst)
		}}
}

func firstRowGrad(impl Impl) Result {
	c := firstRowConfig()
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
	c := futureConfig()
	t := random(c, 40)
	t.do = nil
	base, err := call(impl, c, t)
	if err != nil {
		return errored(err, "%v")
	}
	const cut = futureCut // tokens at positions > cut change
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
	square := squareConfig()
	chunk, gappy := conventionConfigs()
	sq := fmt.Sprintf("M=N=%d", square.M)
	ch := fmt.Sprintf("M=%d, N=%d", chunk.M, chunk.N)
	const gp = "gappy cache"
	probed := map[string][][]bool{}
	for _, base := range []struct {
		name string
		c    *attention.Config
	}{{sq, square}, {ch, chunk}, {gp, gappy}} {
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
	eq := func(name string, a, b attention.Convention) bool {
		return fmt.Sprint(probed[name+"/"+a.String()]) == fmt.Sprint(probed[name+"/"+b.String()])
	}
	switch {
	case !eq(sq, attention.Positions, attention.BottomRight) || !eq(sq, attention.Positions, attention.TopLeft):
		return fail("%s: the three conventions should agree", sq)
	case !eq(ch, attention.Positions, attention.BottomRight):
		return fail("%s with default positions: position and bottom-right should agree", ch)
	case eq(ch, attention.Positions, attention.TopLeft):
		return fail("%s: top-left should hide the cache from the chunk", ch)
	case eq(gp, attention.Positions, attention.BottomRight):
		return fail("gappy cache with a window: bottom-right should count slots, not positions")
	}
	return pass("agree at %s; at %s top-left hides the cache; with empty cache slots and a window bottom-right differs from position", sq, ch)
}

func chunkedEqualsFull(impl Impl) Result {
	full := chunkedConfig()
	t := random(full, 70)
	t.do = nil
	want, err := call(impl, full, t)
	if err != nil {
		return errored(err, "full pass: %v")
	}
	var worst float64
	for _, sizes := range chunkedSizes {
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
			d, msg := compare(impl.within(identical), pair{"o", got.o, headRows(want.o, c.B, c.Hq, full.M, c.Dv, start, start+m)})
			worst = max(worst, d)
			if msg != "" {
				return measured(fail("chunks %v, chunk at %d (M=%d, N=%d): %s", sizes, start, c.M, c.N, msg), d)
			}
			start += m
		}
	}
	return measured(pass("%d chunkings of %d tokens match the full pass, max error %.1e", len(chunkedSizes), full.M, worst), worst)
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
	const L, pad = paddingL, paddingPad
	plain := paddingPlain()
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
		d, msg := compare(impl.within(identical),
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
			return measured(fail("%s padding by %d: %s", side, pad, msg), d)
		}
	}
	return measured(pass("left and right padding by %d: real tokens match, max error %.1e; pads exactly zero", pad, worst), worst)
}

func packingEqualsSeparate(impl Impl) Result {
	lens := packingLens
	packed := packedConfig()
	T := packed.M
	t := random(packed, 90)
	got, err := call(impl, packed, t)
	if err != nil {
		return errored(err, "packed: %v")
	}
	var worst float64
	start := 0
	for d, L := range lens {
		c := &attention.Config{B: 1, Hq: packed.Hq, Hkv: packed.Hkv, M: L, N: L, D: packed.D, Dv: packed.Dv, Causal: true}
		rows := func(x []float64, H, W int) []float64 { return headRows(x, 1, H, T, W, start, start+L) }
		doc := tensors{q: rows(t.q, c.Hq, c.D), k: rows(t.k, c.Hkv, c.D), v: rows(t.v, c.Hkv, c.Dv), do: rows(t.do, c.Hq, c.Dv)}
		want, err := call(impl, c, doc)
		if err != nil {
			return errored(err, "document %d alone: %v", d)
		}
		e, msg := compare(impl.within(identical),
			pair{"o", rows(got.o, c.Hq, c.Dv), want.o}, pair{"dq", rows(got.dq, c.Hq, c.D), want.dq},
			pair{"dk", rows(got.dk, c.Hkv, c.D), want.dk}, pair{"dv", rows(got.dv, c.Hkv, c.Dv), want.dv})
		worst = max(worst, e)
		if msg != "" {
			return measured(fail("document %d (tokens %d..%d): %s", d, start, start+L-1, msg), e)
		}
		start += L
	}
	return measured(pass("documents of %s tokens packed equal separate runs, max error %.1e", list(lens), worst), worst)
}

func gqaEqualsMHA(impl Impl) Result {
	gqa := gqaConfig()
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
	d, msg := compare(impl.within(identical),
		pair{"o", got.o, want.o}, pair{"lse", got.lse, want.lse}, pair{"dq", got.dq, want.dq},
		pair{"dk", got.dk, sumGroups(want.dk, gqa.D)}, pair{"dv", got.dv, sumGroups(want.dv, gqa.Dv)})
	return compared(d, msg, "O, lse, dQ and group-summed dK, dV agree, max error %.1e", d)
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
				if rel > impl.within(identical) {
					return measured(fail("Σⱼ dK[batch·head %d, j, %d] = %.3g, not 0 (%.1e of max|dK|): rows of dS do not sum to zero", bg, e, s, rel), rel)
				}
			}
		}
	}
	return measured(pass("Σⱼ dKⱼ = 0 for every key/value head, worst %.1e of max|dK|", worst), worst)
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
			shift[bg*c.D+e] = shiftTarget / scale / float64(c.D) * float64(1+e%2)
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
	// a score near 2·shiftTarget carries that many times the answers'
	// relative rounding, and passes it to the weights, O and lse
	d, msg := compare(max(1e-9, impl.Precision*2*shiftTarget), pair{"o", alt.o, base.o}, pair{"lse", alt.lse, wantLSE})
	return compared(d, msg, "scores shifted by up to ~%.0f: O unchanged and lse shifted exactly, max error %.1e", 2*shiftTarget, d)
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
				if e1 > impl.within(identical) {
					return measured(fail("batch %d head %d row %d: exp(S − lse) sums to %.12g, not 1", b, h, i, psum), e1)
				}
				if e2 > impl.within(identical) {
					return measured(fail("batch %d head %d row %d: rowsum(dO ⊙ O) = %.12g but rowsum(P ⊙ dP) = %.12g", b, h, i, doo, pdp), e2)
				}
			}
		}
	}
	return measured(pass("every valid row: Σ P = 1 and rowsum(dO ⊙ O) = rowsum(P ⊙ dP), max error %.1e", worst), worst)
}

func emptyRow(impl Impl) Result {
	// A query row is in a segment no key belongs to.
	bad := emptyRowConfig()
	tb := random(bad, 150)
	if impl.NoGrad {
		tb.do = nil
	}
	_, err := call(impl, bad, tb)
	rejected := fmt.Sprint(err)
	switch {
	case err == nil:
		return fail("a valid row with no visible key was accepted")
	case !strings.Contains(err.Error(), fmt.Sprintf("batch %d", emptyBatch)) || !strings.Contains(err.Error(), fmt.Sprintf("row %d", emptyRow_)):
		return fail("error does not name batch %d, row %d: %v", emptyBatch, emptyRow_, err)
	}
	// A padding query row: zero output, no gradient, no error.
	padded := paddedRowConfig()
	t := random(padded, 151)
	if impl.NoGrad {
		t.do = nil
	}
	out, err := call(impl, padded, t)
	if err != nil {
		return errored(err, "a padding query row was rejected: %v")
	}
	for h := range padded.Hq {
		for x := range padded.Dv {
			if v := out.o[(h*padded.M+paddedRow)*padded.Dv+x]; v != 0 {
				return fail("padding query row %d, head %d: output %.3g, want 0", paddedRow, h, v)
			}
		}
		for x := range padded.D {
			if impl.NoGrad {
				break
			}
			if v := out.dq[(h*padded.M+paddedRow)*padded.D+x]; v != 0 {
				return fail("padding query row %d, head %d: dQ %.3g, want 0", paddedRow, h, v)
			}
		}
	}
	if impl.NoGrad {
		return pass("rejected: %q; padding row: zero output (no gradients to check)", rejected)
	}
	return pass("rejected: %q; padding row: zero output and dQ", rejected)
}
