package checks

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
)

// ListwiseOps is the head of a cross-encoder reranker in precision T, as
// method expressions of package retrieve: the pooling of each "query SEP
// code" sequence into the product of its unit side means, the linear score
// s = w·f and the softmax cross-entropy of each query's group of candidates
// against its positive.
type ListwiseOps[T nn.Float] struct {
	PoolForward  func(p nn.PairPool[T], f []T, a *nn.PairPoolActs[T], x []T, nq []int, valid []bool, B, Tn int)
	PoolBackward func(p nn.PairPool[T], dx, df []T, nq []int, valid []bool, B, Tn int, a *nn.PairPoolActs[T])
	Forward      func(l nn.Listwise[T], a *nn.ListwiseActs[T], p, w []T, valid []bool) T
	Backward     func(l nn.Listwise[T], dp, dw []T, dloss T, p, w []T, valid []bool, a *nn.ListwiseActs[T])
}

// ListwiseImpl is the reranker head: its float64 and float32 paths.
type ListwiseImpl struct {
	ListwiseOps[float64]
	F32 ListwiseOps[float32]
}

func listwiseOps[T nn.Float]() ListwiseOps[T] {
	return ListwiseOps[T]{
		PoolForward: nn.PairPool[T].Forward, PoolBackward: nn.PairPool[T].Backward,
		Forward: nn.Listwise[T].Forward, Backward: nn.Listwise[T].Backward,
	}
}

// ListwiseReference is package retrieve's reranker head.
var ListwiseReference = ListwiseImpl{listwiseOps[float64](), listwiseOps[float32]()}

// rerankCase is one training batch of a reranker: G groups of K candidate
// sequences of T tokens (the positive first), width D. Sequence i holds
// nq[i] query tokens, the separator, then code.
type rerankCase struct {
	G, K, T, D int
	nq         []int  // (G·K) query lengths
	tokens     []bool // (G·K, T) token validity, nil: no padding
	cands      []bool // (G, K) candidate validity, nil: all valid
	x, w       []float64
}

func (r rerankCase) name() string {
	invalid := 0
	for _, v := range r.cands {
		if !v {
			invalid++
		}
	}
	return shape("G", r.G, "K", r.K, "T", r.T, "D", r.D, "invalid", invalid)
}

// newRerankCase draws token vectors and a head; pads gives trailing padding
// tokens per sequence (cycling; at least one code token is kept), queries
// are 1 or 2 tokens (cycling), and invalid lists the (g, k) candidates left
// out. T must be at least 4.
func newRerankCase(G, K, T, D int, pads []int, seed uint64, invalid ...[2]int) rerankCase {
	r := rerankCase{G: G, K: K, T: T, D: D, x: randn(seed, G*K*T*D, 1), w: randn(seed+1, D, 1), nq: make([]int, G*K)}
	for b := range r.nq {
		r.nq[b] = 1 + b%2
	}
	if len(pads) > 0 {
		r.tokens = make([]bool, G*K*T)
		for b := range G * K {
			for t := range T {
				r.tokens[b*T+t] = t < T-min(pads[b%len(pads)], T-r.nq[b]-2)
			}
		}
	}
	if len(invalid) > 0 {
		r.cands = make([]bool, G*K)
		for i := range r.cands {
			r.cands[i] = true
		}
		for _, gk := range invalid {
			r.cands[gk[0]*K+gk[1]] = false
		}
	}
	return r
}

type rerankOut struct {
	loss   float64
	dx, dw []float64
	ds     []float64 // ∂L/∂s (G, K)
}

// rerankState is what rerankForward saves for rerankBackward.
type rerankState[T nn.Float] struct {
	f    []T
	pool *nn.PairPoolActs[T]
	loss *nn.ListwiseActs[T]
}

// rerankForward runs the head on token vectors x and head w (with the
// shapes, queries and validity of r).
func rerankForward[T nn.Float](ops ListwiseOps[T], r rerankCase, x, w []T) (T, *rerankState[T]) {
	n := r.G * r.K
	l := nn.Listwise[T]{G: r.G, K: r.K, D: r.D}
	pool := nn.PairPool[T]{D: r.D}
	st := &rerankState[T]{f: make([]T, n*r.D), pool: pool.NewActs(n), loss: l.NewActs()}
	// pass 1: one feature vector per (query, candidate) sequence
	ops.PoolForward(pool, st.f, st.pool, x, r.nq, r.tokens, n, r.T)
	// pass 2: scores and the loss
	return ops.Forward(l, st.loss, st.f, w, r.cands), st
}

func rerankBackward[T nn.Float](ops ListwiseOps[T], r rerankCase, st *rerankState[T], w []T, dloss T, dx, dw []T) {
	n := r.G * r.K
	l := nn.Listwise[T]{G: r.G, K: r.K, D: r.D}
	df := make([]T, n*r.D)
	ops.Backward(l, df, dw, dloss, st.f, w, r.cands, st.loss)
	ops.PoolBackward(nn.PairPool[T]{D: r.D}, dx, df, r.nq, r.tokens, n, r.T, st.pool)
}

// rerankRun runs the float64 forward and backward (dloss = 1) on fresh
// buffers.
func rerankRun(impl ListwiseImpl, r rerankCase) (o rerankOut, err error) {
	err = protect(func() error {
		loss, st := rerankForward(impl.ListwiseOps, r, r.x, r.w)
		o.loss = loss
		o.dx, o.dw = make([]float64, len(r.x)), make([]float64, len(r.w))
		rerankBackward(impl.ListwiseOps, r, st, r.w, 1, o.dx, o.dw)
		o.ds = clone(st.loss.DS)
		return nil
	})
	return o, err
}

func listwiseCase[T nn.Float](ops ListwiseOps[T], r rerankCase) Case[T] {
	x, w := vec.Convert[T](r.x), vec.Convert[T](r.w)
	return Case[T]{
		Name:   r.name(),
		Inputs: []Input[T]{{"x", x}, {"w", w}},
		Out:    1,
		Forward: func(out []T) error {
			out[0], _ = rerankForward(ops, r, x, w)
			return nil
		},
		Backward: func(g [][]T, dout []T) error {
			_, st := rerankForward(ops, r, x, w)
			rerankBackward(ops, r, st, w, dout[0], g[0], g[1])
			return nil
		},
	}
}

func listwiseCases[T nn.Float](ops ListwiseOps[T], big bool) []Case[T] {
	if big {
		return []Case[T]{listwiseCase(ops, newRerankCase(6, 8, 9, 16, []int{0, 3, 1, 5}, 5, [2]int{1, 7}, [2]int{4, 2}, [2]int{4, 3}))}
	}
	return []Case[T]{
		listwiseCase(ops, newRerankCase(2, 3, 5, 4, []int{0, 1, 2}, 1)),
		listwiseCase(ops, newRerankCase(3, 4, 4, 3, []int{1, 0}, 2, [2]int{0, 3}, [2]int{2, 1})),
		listwiseCase(ops, newRerankCase(1, 2, 6, 5, nil, 3)),
		listwiseCase(ops, newRerankCase(2, 1, 4, 3, []int{1}, 4)),
	}
}

// listwiseSized is the head at sizes s: B groups of N candidate sequences of
// T tokens of width Dim (T at least 4), one token of padding in every
// other sequence; the last group's negatives are all invalid, so it keeps
// its positive alone, the edge a loss without the positive in its
// denominator cannot survive.
func listwiseSized(s Sizes, seed uint64) rerankCase {
	G, K := s.B, max(s.N, 1)
	var invalid [][2]int
	for k := 1; k < K; k++ {
		invalid = append(invalid, [2]int{G - 1, k})
	}
	return newRerankCase(G, K, max(s.T, 4), s.Dim, []int{0, 1}, seed, invalid...)
}

// The batches of the semantic checks.
func listwiseUniformCase() rerankCase {
	return newRerankCase(4, 5, 5, 6, []int{0, 1}, 30, [2]int{0, 4}, [2]int{2, 1}, [2]int{2, 2}, [2]int{3, 4})
}
func listwiseSignsCase() rerankCase {
	return newRerankCase(5, 6, 4, 4, []int{0, 1}, 40, [2]int{1, 5}, [2]int{3, 2})
}
func listwiseInvalidCase() rerankCase {
	return newRerankCase(3, 4, 5, 5, []int{0, 1, 2}, 50, [2]int{0, 2}, [2]int{2, 3})
}
func listwiseUnorderedCase() rerankCase { return newRerankCase(3, 5, 4, 4, []int{0, 1}, 60) }
func listwiseSideCase() rerankCase {
	return newRerankCase(3, 4, 6, 5, []int{0, 1, 2}, 70, [2]int{1, 3})
}
func listwiseSeparatorCase() rerankCase { return newRerankCase(3, 4, 6, 5, []int{0, 1, 2}, 80) }

// listwiseSideScales are the factors of side-scale-invariance.
var listwiseSideScales = []float64{1e-3, 0.5, 9, 1e4}

// Listwise returns the suite of the reranker head: pooling, the linear
// score and the listwise softmax loss, differentiated as one function of
// the token vectors and the head.
func Listwise() Suite[ListwiseImpl] {
	spec := gradSpec[ListwiseImpl]{op: "the reranker head (token vectors of each pair, w)", ref: ListwiseReference, dirs: 4,
		cases:   func(i ListwiseImpl, big bool) []Case[float64] { return listwiseCases(i.ListwiseOps, big) },
		cases32: func(i ListwiseImpl, big bool) []Case[float32] { return listwiseCases(i.F32, big) }}
	return Suite[ListwiseImpl]{
		Guide: OpGuide{
			What: "The head of a cross-encoder reranker: one sequence \"query SEP code\" per (query, candidate) pair, pooled into the product of its two unit side means, a linear score, and the softmax cross-entropy of each query's group of candidates (the positive first, then hard negatives).",
			Forward: []Step{
				{Eq: "q = mean of the query's token vectors, c = mean of the code's;  u = q/‖q‖, v = c/‖c‖", Shape: "x [G·K,T,D] → u, v [G·K,D]",
					Why: "each side in one unit vector; the separator and padding are not pooled"},
				{Eq: "f = u ⊙ v;  s = w · f", Shape: "f [G·K,D] → s [G,K]", Why: "a weighted cosine of the two sides: with w = 1/τ, a dual encoder's score"},
				{Eq: "L_g = −log exp(s[g,0]) / Σ_{k valid} exp(s[g,k]);  L = mean_g L_g", Shape: "scalar",
					Why: "each query's positive must outscore the hard negatives the first stage ranked high; padding candidates of short groups leave the denominator"},
			},
			Backward: []Step{
				{Eq: "ds = (softmax_group(s) − onehot(0)) / G, zero where invalid", Shape: "[G,K]", Why: "each group's ds sums to zero: a bias on s would get no gradient, so the head has none"},
				{Eq: "df = ds ⊗ w;  dw = Σ ds · f", Shape: "[G·K,D]; [D]", Why: "s is linear in both f and w"},
				{Eq: "du = df ⊙ v,  dv = df ⊙ u;  dq = (du − u(u·du))/‖q‖,  dc = (dv − v(v·dv))/‖c‖", Shape: "[G·K,D]", Why: "the product rule, then each normalisation's projection"},
				{Eq: "dx_t = dq/n_q on query tokens, dc/n_c on code tokens, 0 elsewhere", Shape: "[G·K,T,D]", Why: "each mean spreads its gradient over its side; the encoder takes it from there"},
			},
			Notes: []string{"Dropping the positive from its denominator, counting padding candidates, taking the wrong candidate as the positive: each is consistent with its backward and invisible to finite differences; the semantic checks catch them."},
		},
		Checks: append(spec.checks(),
			Check[ListwiseImpl]{Name: "side-scale-invariance", Kind: Semantic, Run: listwiseSideScale,
				Claim: "scaling the query side's or the code side's token vectors by c > 0 leaves every score unchanged: each side is normalised",
				Limit: "a property of the forward",
				Long: Long{
					Tests:  fmt.Sprintf("scaling the token vectors of either side by c > 0, factors around %s, leaves the loss unchanged", list(listwiseSideScales)),
					Shapes: listwiseSideCase().name(),
					Proves: "each side is normalised in the forward",
					Cannot: "anything about the backward",
				}},
			Check[ListwiseImpl]{Name: "separator-inert", Kind: Semantic, Run: listwiseSeparatorInert,
				Claim: "the separator's and the padding's token vectors get exactly zero gradient, and changing them leaves the loss bit-identical: only the two sides are pooled",
				Limit: "at the head; in the encoder the separator is read by attention",
				Long: Long{
					Tests:  "the separator's and padding's token vectors get exactly zero gradient, and redrawing them leaves the loss bit-identical",
					Shapes: listwiseSeparatorCase().name(),
					Proves: "only the query and code tokens are pooled, in the forward and the backward",
					Cannot: "what the encoder does with the separator: attention reads it",
				}},
			Check[ListwiseImpl]{Name: "uniform-scores", Kind: Semantic, Run: listwiseUniform,
				Claim: "when every candidate of a group scores the same, the loss is the mean of log(valid candidates) per group: the positive counts in its denominator, invalid candidates do not",
				Limit: "one point of the loss, where every softmax is uniform",
				Long: Long{
					Tests:  "with every pair's tokens equal, so every score is equal, each group's loss is log(number of valid candidates)",
					Shapes: listwiseUniformCase().name(),
					Proves: "the positive counts in its own denominator and invalid candidates do not",
					Cannot: "one point of the loss",
				}},
			Check[ListwiseImpl]{Name: "ds-signs", Kind: Semantic, Run: listwiseDSSigns,
				Claim: "each group's ∂L/∂s sums to zero, is ≤ 0 at the positive and ≥ 0 at every negative, and is exactly zero at invalid candidates",
				Limit: "signs and sums: sizes are left to finite differences",
				Long: Long{
					Tests:  "each group's ∂L/∂s sums to zero, is ≤ 0 at the positive, ≥ 0 at negatives and exactly 0 at invalid candidates",
					Shapes: listwiseSignsCase().name(),
					Proves: "the softmax-minus-one-hot structure, and that raising the positive's score never raises the loss",
					Cannot: "the sizes of the entries; finite differences check those",
				}},
			Check[ListwiseImpl]{Name: "invalid-inert", Kind: Semantic, Run: listwiseInvalidInert,
				Claim: "changing the tokens of an invalid candidate leaves the loss and every other gradient bit-identical and gives it exactly zero gradient",
				Limit: "the candidates marked invalid; which ones should be is the caller's business",
				Long: Long{
					Tests:  "redrawing the tokens of invalid candidates leaves the loss, dw and every valid candidate's dx bit-identical; their own dx is exactly 0",
					Shapes: listwiseInvalidCase().name(),
					Proves: "padding candidates are outside the loss, forward and backward",
					Cannot: "whether the caller marks the right candidates invalid",
				}},
			Check[ListwiseImpl]{Name: "negatives-unordered", Kind: Semantic, Run: listwiseUnordered,
				Claim: "permuting a group's negatives leaves the loss unchanged and permutes their gradients: only position 0 is special",
				Limit: "one permutation per group",
				Long: Long{
					Tests:  "reversing each group's negatives leaves the loss unchanged and permutes ∂L/∂s alike",
					Shapes: listwiseUnorderedCase().name(),
					Proves: "only candidate 0 is treated as the positive",
					Cannot: "permutations that move the positive: those change the task",
				}},
		),
		At: func(impl ListwiseImpl, s Sizes, seed uint64) Case[float64] {
			return listwiseCase(impl.ListwiseOps, listwiseSized(s, seed))
		},
		At32: func(impl ListwiseImpl, s Sizes, seed uint64) Case[float32] {
			return listwiseCase(impl.F32, listwiseSized(s, seed))
		},
		Reads: "B groups of N candidates (the positive first) of T ≥ 4 tokens of width Dim; the last group's negatives invalid",
	}
}

func listwiseUniform(impl ListwiseImpl) Result {
	r := listwiseUniformCase()
	v := randn(31, r.D, 1)
	for i := range r.x {
		r.x[i] = v[i%r.D] // every token the same vector: every score equal
	}
	o, err := rerankRun(impl, r)
	if err != nil {
		return errored(err, "%v")
	}
	var want float64
	for g := range r.G {
		n := 0
		for k := range r.K {
			if r.cands[g*r.K+k] {
				n++
			}
		}
		want += math.Log(float64(n))
	}
	want /= float64(r.G)
	d, msg := compare(identical, pair{"loss", []float64{o.loss}, []float64{want}})
	if msg != "" {
		return measured(fail("%s", msg), d)
	}
	return measured(pass("equal scores, 4 invalid candidates: loss = mean log(valid count) = %.6f, error %.1e", want, d), d)
}

func listwiseDSSigns(impl ListwiseImpl) Result {
	r := listwiseSignsCase()
	o, err := rerankRun(impl, r)
	if err != nil {
		return errored(err, "%v")
	}
	var worst float64
	for g := range r.G {
		var sum, m float64
		for k := range r.K {
			i := g*r.K + k
			ds := o.ds[i]
			switch {
			case !r.cands[i] && ds != 0:
				return fail("group %d: invalid candidate %d has ∂L/∂s = %.3g, want exactly 0", g, k, ds)
			case k == 0 && ds > 0:
				return fail("group %d: ∂L/∂s at the positive = %.3g, want ≤ 0 (raising the positive's score must not raise the loss)", g, ds)
			case k > 0 && ds < 0:
				return fail("group %d: ∂L/∂s at negative %d = %.3g, want ≥ 0", g, k, ds)
			}
			sum += ds
			m = max(m, math.Abs(ds))
		}
		e := math.Abs(sum) / (1 + m)
		worst = max(worst, e)
		if e > identical {
			return measured(fail("group %d: ∂L/∂s sums to %.3g, want 0", g, sum), e)
		}
	}
	return measured(pass("5 groups: ∂L/∂s sums to zero (max error %.1e), ≤ 0 at positives, ≥ 0 at negatives, exactly 0 at 2 invalid candidates", worst), worst)
}

func listwiseInvalidInert(impl ListwiseImpl) Result {
	r := listwiseInvalidCase()
	base, err := rerankRun(impl, r)
	if err != nil {
		return errored(err, "%v")
	}
	s := r
	s.x = clone(r.x)
	seqLen := r.T * r.D
	noise := randn(51, seqLen, 5)
	for i, ok := range r.cands {
		if !ok {
			for j := range seqLen {
				s.x[i*seqLen+j] += noise[j]
			}
		}
	}
	o, err := rerankRun(impl, s)
	if err != nil {
		return errored(err, "%v")
	}
	if o.loss != base.loss {
		return fail("loss %.17g with invalid candidates changed, %.17g before: invalid candidates reach the loss", o.loss, base.loss)
	}
	for j := range r.w {
		if o.dw[j] != base.dw[j] {
			return fail("dw[%d] changed from %.6g to %.6g when only invalid candidates changed", j, base.dw[j], o.dw[j])
		}
	}
	for i, ok := range r.cands {
		for j := range seqLen {
			v := o.dx[i*seqLen+j]
			switch {
			case !ok && v != 0:
				return fail("invalid candidate %d: dx[%d] = %.3g, want exactly 0", i, j, v)
			case ok && v != base.dx[i*seqLen+j]:
				return fail("candidate %d: dx[%d] changed from %.6g to %.6g when only invalid candidates changed", i, j, base.dx[i*seqLen+j], v)
			}
		}
	}
	return pass("2 invalid candidates redrawn: loss, dw and the valid candidates' dx bit-identical; the invalid ones' dx exactly 0")
}

func listwiseUnordered(impl ListwiseImpl) Result {
	r := listwiseUnorderedCase()
	base, err := rerankRun(impl, r)
	if err != nil {
		return errored(err, "%v")
	}
	// reverse the negatives 1..K−1 of every group
	perm := func(k int) int {
		if k == 0 {
			return 0
		}
		return r.K - k
	}
	seqLen := r.T * r.D
	s := r
	s.x = make([]float64, len(r.x))
	s.tokens = make([]bool, len(r.tokens))
	s.nq = make([]int, len(r.nq))
	for g := range r.G {
		for k := range r.K {
			from, to := g*r.K+k, g*r.K+perm(k)
			copy(s.x[to*seqLen:(to+1)*seqLen], r.x[from*seqLen:(from+1)*seqLen])
			copy(s.tokens[to*r.T:(to+1)*r.T], r.tokens[from*r.T:(from+1)*r.T])
			s.nq[to] = r.nq[from]
		}
	}
	o, err := rerankRun(impl, s)
	if err != nil {
		return errored(err, "%v")
	}
	var worst float64
	d, msg := compare(identical, pair{"loss", []float64{o.loss}, []float64{base.loss}})
	worst = max(worst, d)
	if msg != "" {
		return measured(fail("negatives reversed: %s", msg), d)
	}
	back := make([]float64, len(o.ds))
	for g := range r.G {
		for k := range r.K {
			back[g*r.K+k] = o.ds[g*r.K+perm(k)]
		}
	}
	d, msg = compare(identical, pair{"∂L/∂s", back, base.ds})
	worst = max(worst, d)
	if msg != "" {
		return measured(fail("negatives reversed: %s", msg), d)
	}
	return measured(pass("negatives of 3 groups reversed: loss unchanged and ∂L/∂s permuted alike, max error %.1e", worst), worst)
}

func listwiseSideScale(impl ListwiseImpl) Result {
	r := listwiseSideCase()
	base, err := rerankRun(impl, r)
	if err != nil {
		return errored(err, "%v")
	}
	var worst float64
	seqLen := r.T * r.D
	for x, c := range listwiseSideScales {
		for _, side := range []string{"query", "code"} {
			s := r
			s.x = clone(r.x)
			for b := range r.G * r.K {
				for t := range r.T {
					if (side == "query") != (t < r.nq[b]) {
						continue
					}
					for j := range r.D {
						s.x[b*seqLen+t*r.D+j] *= c * float64(1+b%3)
					}
				}
			}
			o, err := rerankRun(impl, s)
			if err != nil {
				return errored(err, "%v")
			}
			d, msg := compare(identical, pair{"loss", []float64{o.loss}, []float64{base.loss}})
			worst = max(worst, d)
			if msg != "" {
				return measured(fail("%s side scaled (factor %d): %s", side, x, msg), d)
			}
		}
	}
	return measured(pass("query or code side scaled by factors around %s: loss unchanged, max error %.1e", list(listwiseSideScales), worst), worst)
}

func listwiseSeparatorInert(impl ListwiseImpl) Result {
	r := listwiseSeparatorCase()
	base, err := rerankRun(impl, r)
	if err != nil {
		return errored(err, "%v")
	}
	seqLen := r.T * r.D
	pooled := func(b, t int) bool {
		return t < r.nq[b] || t > r.nq[b] && r.tokens[b*r.T+t]
	}
	s := r
	s.x = clone(r.x)
	noise := randn(81, len(r.x), 3)
	changed := 0
	for b := range r.G * r.K {
		for t := range r.T {
			if pooled(b, t) {
				continue
			}
			changed++
			for j := range r.D {
				i := b*seqLen + t*r.D + j
				s.x[i] += noise[i]
				if base.dx[i] != 0 {
					return fail("sequence %d, token %d (separator or padding): dx = %.3g, want exactly 0", b, t, base.dx[i])
				}
			}
		}
	}
	o, err := rerankRun(impl, s)
	if err != nil {
		return errored(err, "%v")
	}
	if o.loss != base.loss {
		return fail("loss %.17g after changing the separators and padding, %.17g before", o.loss, base.loss)
	}
	return pass("%d separator and padding tokens: dx exactly 0, and redrawing them leaves the loss bit-identical", changed)
}
