package checks

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
)

// InfoNCEOps is the contrastive head of a dual encoder in precision T: the
// forward and backward of nn.Head (mean pooling of token vectors, L2
// normalisation, the InfoNCE loss over in-batch and hard negatives) as
// method expressions, and the builder of the false-negative mask. The
// reference is nn.Head itself, the head retrieve/dense trains; a fault is
// another composition with one stage broken.
type InfoNCEOps[T nn.Float] struct {
	Forward  func(h nn.Head[T], a *nn.HeadActs[T], xq []T, validQ []bool, xd []T, validD []bool, tau T, mask []bool) T
	Backward func(h nn.Head[T], dxq, dxd []T, dtau *T, dloss T, a *nn.HeadActs[T], validQ, validD []bool, tau T, mask []bool)
	Mask     func(dst []bool, keys []string, B int)
}

// InfoNCEImpl is the contrastive head: its float64 and float32 paths.
type InfoNCEImpl struct {
	InfoNCEOps[float64]
	F32 InfoNCEOps[float32]
}

func infonceOps[T nn.Float]() InfoNCEOps[T] {
	return InfoNCEOps[T]{Forward: nn.Head[T].Forward, Backward: nn.Head[T].Backward, Mask: nn.DuplicateMask}
}

// InfoNCEReference is nn.Head, with nn.DuplicateMask.
var InfoNCEReference = InfoNCEImpl{infonceOps[float64](), infonceOps[float32]()}

// headCase is one batch for the head: B queries of Tq tokens, N documents
// of Td tokens (B positives, N−B hard negatives), width D.
type headCase struct {
	B, N, Tq, Td, D int
	tau             float64
	symmetric       bool
	mask            []bool // (B, N), nil: none
	validQ, validD  []bool // (B, Tq), (N, Td), nil: no padding
	xq, xd          []float64
}

func (h headCase) name() string {
	masked := 0
	for _, m := range h.mask {
		if m {
			masked++
		}
	}
	return shape("B", h.B, "N", h.N, "Tq", h.Tq, "Td", h.Td, "D", h.D, "τ", h.tau, "symmetric", h.symmetric, "masked", masked)
}

// headOut is what one forward and backward of the head produce.
type headOut struct {
	loss     float64
	dxq, dxd []float64
	dtau     float64
	ds       []float64 // ∂L/∂S (B, N)
}

// headState is what headForward saves for headBackward.
type headState[T nn.Float] struct {
	head nn.Head[T]
	acts *nn.HeadActs[T]
}

// headForward runs the head's forward on token vectors xq, xd (with the
// shapes, mask and padding of h) and returns the loss with what the
// backward needs.
func headForward[T nn.Float](ops InfoNCEOps[T], h headCase, xq, xd []T, tau T) (T, *headState[T]) {
	s := &headState[T]{head: nn.Head[T]{Loss: nn.InfoNCE[T]{B: h.B, N: h.N, D: h.D, Symmetric: h.symmetric}, Tq: h.Tq, Td: h.Td, Eps: 1e-12}}
	s.acts = s.head.NewActs()
	return ops.Forward(s.head, s.acts, xq, h.validQ, xd, h.validD, tau, h.mask), s
}

// headBackward adds dloss times the gradients into dxq, dxd and *dtau.
func headBackward[T nn.Float](ops InfoNCEOps[T], h headCase, s *headState[T], tau, dloss T, dxq, dxd []T, dtau *T) {
	ops.Backward(s.head, dxq, dxd, dtau, dloss, s.acts, h.validQ, h.validD, tau, h.mask)
}

// headRun runs the float64 forward and backward (dloss = 1) on fresh
// buffers.
func headRun(impl InfoNCEImpl, h headCase) (o headOut, err error) {
	err = protect(func() error {
		loss, s := headForward(impl.InfoNCEOps, h, h.xq, h.xd, h.tau)
		o.loss = loss
		o.dxq, o.dxd = make([]float64, len(h.xq)), make([]float64, len(h.xd))
		headBackward(impl.InfoNCEOps, h, s, h.tau, 1, o.dxq, o.dxd, &o.dtau)
		o.ds = clone(s.acts.Loss.DS)
		return nil
	})
	return o, err
}

// newHeadCase draws token vectors for the given shapes; pad marks the
// number of trailing padding tokens of sequence b (queries, then
// documents), cycling.
func newHeadCase(B, N, Tq, Td, D int, tau float64, symmetric bool, pads []int, seed uint64) headCase {
	h := headCase{B: B, N: N, Tq: Tq, Td: Td, D: D, tau: tau, symmetric: symmetric,
		xq: randn(seed, B*Tq*D, 1), xd: randn(seed+1, N*Td*D, 1)}
	if len(pads) > 0 {
		h.validQ, h.validD = make([]bool, B*Tq), make([]bool, N*Td)
		k := 0
		for b := range B {
			for t := range Tq {
				h.validQ[b*Tq+t] = t < Tq-min(pads[k%len(pads)], Tq-1)
			}
			k++
		}
		for b := range N {
			for t := range Td {
				h.validD[b*Td+t] = t < Td-min(pads[k%len(pads)], Td-1)
			}
			k++
		}
	}
	return h
}

// withMask sets mask entries (i, j) given as pairs.
func (h headCase) withMask(pairs ...[2]int) headCase {
	h.mask = make([]bool, h.B*h.N)
	for _, p := range pairs {
		h.mask[p[0]*h.N+p[1]] = true
	}
	return h
}

func infonceCase[T nn.Float](ops InfoNCEOps[T], h headCase) Case[T] {
	xq, xd, tau := vec.Convert[T](h.xq), vec.Convert[T](h.xd), []T{T(h.tau)}
	return Case[T]{
		Name:   h.name(),
		Inputs: []Input[T]{{"xq", xq}, {"xd", xd}, {"τ", tau}},
		Out:    1,
		Forward: func(out []T) error {
			out[0], _ = headForward(ops, h, xq, xd, tau[0])
			return nil
		},
		Backward: func(g [][]T, dout []T) error {
			_, s := headForward(ops, h, xq, xd, tau[0]) // caches at the current point
			headBackward(ops, h, s, tau[0], dout[0], g[0], g[1], &g[2][0])
			return nil
		},
	}
}

func infonceCases[T nn.Float](ops InfoNCEOps[T], big bool) []Case[T] {
	if big {
		return []Case[T]{infonceCase(ops, newHeadCase(8, 12, 5, 9, 16, 0.5, true, []int{0, 2, 1, 4}, 5).
			withMask([2]int{0, 3}, [2]int{3, 0}, [2]int{5, 9}, [2]int{7, 11}))}
	}
	return []Case[T]{
		infonceCase(ops, newHeadCase(3, 3, 2, 3, 4, 0.7, false, []int{0, 1}, 1)),
		infonceCase(ops, newHeadCase(3, 5, 3, 4, 5, 0.5, true, []int{1, 0, 2}, 2).withMask([2]int{0, 2}, [2]int{1, 4}, [2]int{2, 0})),
		infonceCase(ops, newHeadCase(2, 4, 2, 2, 3, 1.3, false, nil, 3).withMask([2]int{1, 3})),
		infonceCase(ops, newHeadCase(1, 2, 1, 3, 4, 0.6, false, []int{0, 2}, 4)),
	}
}

// infonceSized is the head at sizes s: B queries and N documents (B
// positives, the rest hard negatives) of T tokens of width Dim, symmetric,
// τ = 0.5, one token of padding in every other sequence, and document B
// masked for query 0 when there is a hard negative.
func infonceSized(s Sizes, seed uint64) headCase {
	h := newHeadCase(s.B, max(s.N, s.B), s.T, s.T, s.Dim, 0.5, true, []int{0, 1}, seed)
	if h.N > h.B {
		h = h.withMask([2]int{0, h.B})
	}
	return h
}

// The batches of the semantic checks; sym chooses the direction.
func infonceScaleCase() headCase {
	return newHeadCase(4, 6, 3, 5, 6, 0.2, true, []int{0, 1, 2}, 30).withMask([2]int{1, 5})
}
func infoncePositiveCase(sym bool) headCase {
	h := newHeadCase(4, 7, 3, 4, 5, 0.3, sym, []int{0, 1}, 40)
	h.mask = make([]bool, h.B*h.N)
	for i := range h.B {
		for j := range h.N {
			h.mask[i*h.N+j] = j != i
		}
	}
	return h
}
func infonceUniformCase(sym bool) headCase {
	return newHeadCase(4, 6, 2, 3, 5, 0.25, sym, []int{0, 1}, 50).withMask([2]int{0, 1}, [2]int{0, 5}, [2]int{2, 3}, [2]int{3, 1})
}
func infonceDSCase(sym bool) headCase {
	return newHeadCase(5, 8, 2, 3, 4, 0.1, sym, []int{0, 1}, 60).withMask([2]int{0, 4}, [2]int{4, 0}, [2]int{2, 7})
}
func infonceDirectionCase() headCase {
	return newHeadCase(4, 6, 3, 4, 5, 0.4, true, []int{0, 2, 1}, 70).withMask([2]int{2, 4})
}
func infonceSharpCase(sym bool) headCase {
	return newHeadCase(4, 6, 2, 2, 6, 0.5, sym, nil, 80).withMask([2]int{1, 5})
}

// infonceScales are the factors of scale-invariance.
var infonceScales = []float64{1e-3, 0.5, 7, 1e4}

// infonceKeys and infonceKeysB are the document keys and the number of
// queries of false-negative-mask.
var (
	infonceKeys  = []string{"a", "b", "a", "c", "b", "a", "d"}
	infonceKeysB = 4
)

// InfoNCE returns the suite of the contrastive head: pooling, L2
// normalisation and the InfoNCE loss, differentiated as one function of the
// token vectors of queries and documents and of the temperature.
func InfoNCE() Suite[InfoNCEImpl] {
	spec := gradSpec[InfoNCEImpl]{op: "the contrastive head (token vectors of queries and documents, τ)", ref: InfoNCEReference, dirs: 4,
		cases:   func(i InfoNCEImpl, big bool) []Case[float64] { return infonceCases(i.InfoNCEOps, big) },
		cases32: func(i InfoNCEImpl, big bool) []Case[float32] { return infonceCases(i.F32, big) }}
	both := func(f func(bool) headCase) string { return f(false).name() + "; " + f(true).name() }
	return Suite[InfoNCEImpl]{
		Guide: OpGuide{
			What: "The contrastive head of a dual encoder: mean pooling over real tokens, L2 normalisation, cosine similarities over temperature, InfoNCE with in-batch and hard negatives and a false-negative mask.",
			Forward: []Step{
				{Eq: "e = Σ_t valid_t x_t / Σ_t valid_t;  u = e / ‖e‖", Shape: "x [B,T,D] → e, u [B,D]", Why: "one vector per sequence, its length removed"},
				{Eq: "S = U_q U_dᵀ / τ;  Lᵢ = −log exp(Sᵢᵢ) / Σ_{j unmasked} exp(Sᵢⱼ)", Shape: "S [B, B + hard negatives]",
					Why: "each query must pick its own document among the batch's; masked entries (other copies of the positive) leave the denominator, the positive never does"},
			},
			Backward: []Step{
				{Eq: "dS = (softmax_row(S) − onehot) / B, zero where masked", Shape: "[B, B+K]", Why: "every row of dS sums to zero"},
				{Eq: "dU_q = dS U_d / τ;  dU_d = dSᵀ U_q / τ;  dτ = −Σ dS ⊙ S / τ", Shape: "[B,D]; scalar", Why: "S is bilinear in the unit vectors and scaled by 1/τ"},
				{Eq: "de = (du − u (u · du)) / ‖e‖", Shape: "[B,D]", Why: "the normalisation's Jacobian removes the component along u: scaling e changes nothing"},
				{Eq: "dx_t = valid_t de / Σ valid", Shape: "[B,T,D]", Why: "the mean spreads the gradient evenly over real tokens; padding gets none"},
			},
			Notes: []string{"Skipping the normalisation in the backward, flipping the temperature's sign, dropping the positive from its denominator or masking it: the faults of this head."},
		},
		Checks: append(spec.checks(),
			Check[InfoNCEImpl]{Name: "scale-invariance", Kind: Semantic, Run: infonceScaleInvariance,
				Claim: "scaling one sequence's token vectors by c > 0 (a different c per sequence) leaves the loss unchanged: the norm removes it",
				Limit: "a property of the forward",
				Long: Long{
					Tests:  fmt.Sprintf("scaling one sequence's token vectors by c > 0, a different c per sequence around %s, leaves the loss unchanged", list(infonceScales)),
					Shapes: infonceScaleCase().name(),
					Proves: "the L2 normalisation is applied in the forward",
					Cannot: "anything about the backward",
				}},
			Check[InfoNCEImpl]{Name: "positive-only-mask", Kind: Semantic, Run: infoncePositiveOnly,
				Claim: "a mask covering every entry but the positives gives loss exactly 0 and exactly zero gradients, both directions",
				Limit: "one extreme mask; partial masks are left to the uniform-similarity check and finite differences",
				Long: Long{
					Tests:  "a mask hiding every entry but the positives gives loss 0 and zero gradients",
					Shapes: both(infoncePositiveCase),
					Proves: "masked entries leave the denominator and the positive is never among them",
					Cannot: "partial masks; finite differences cover those",
				}},
			Check[InfoNCEImpl]{Name: "uniform-similarity", Kind: Semantic, Run: infonceUniform,
				Claim: "when every similarity is equal the loss is the mean of log(unmasked entries) per row (and per positive column when symmetric): the positive counts in its denominator",
				Limit: "one point of the loss, where every softmax is uniform",
				Long: Long{
					Tests:  "with all similarities equal, each row's loss is log(number of unmasked entries)",
					Shapes: both(infonceUniformCase),
					Proves: "the positive is counted in its own denominator",
					Cannot: "one point of the loss",
				}},
			Check[InfoNCEImpl]{Name: "ds-sums", Kind: Semantic, Run: infonceDSSums,
				Claim: "each row of ∂L/∂S sums to zero (softmax minus one-hot; all of ∂L/∂S when symmetric) and masked entries are exactly zero",
				Limit: "sums: errors that cancel within a row are left to finite differences",
				Long: Long{
					Tests:  "each row of ∂L/∂S sums to zero and masked entries get exactly zero",
					Shapes: both(infonceDSCase),
					Proves: "the softmax minus one-hot structure of the gradient",
					Cannot: "errors that cancel within a row",
				}},
			Check[InfoNCEImpl]{Name: "scale-direction", Kind: Semantic, Run: infonceScaleDirection,
				Claim: "Σ_t x_t · dx_t = 0 for every sequence: growing a sequence's vectors along themselves leaves the unit vector, and the loss, unchanged",
				Limit: "one direction per sequence; finite differences check the rest",
				Long: Long{
					Tests:  "Σ_t x_t · dx_t = 0 per sequence: growing a sequence along itself changes nothing",
					Shapes: infonceDirectionCase().name(),
					Proves: "the backward of the normalisation removes the radial component",
					Cannot: "the other directions; finite differences check them",
				}},
			Check[InfoNCEImpl]{Name: "temperature-sharpens", Kind: Semantic, Run: infonceSharpens,
				Claim: "when every positive is its row's and column's best match, ∂L/∂τ > 0 and halving τ lowers the loss",
				Limit: "the sign at points where the answer is known, not its size",
				Long: Long{
					Tests:  "when every positive is the best match, ∂L/∂τ > 0 and halving τ lowers the loss",
					Shapes: both(infonceSharpCase),
					Proves: "the sign of the temperature gradient",
					Cannot: "its size; finite differences check that",
				}},
			Check[InfoNCEImpl]{Name: "large-masked-scores", Kind: Semantic, Run: infonceLargeMasked,
				Claim: fmt.Sprintf("masked similarities far above every other one (a masked document equal to its query, τ = %g) leave the loss finite and equal to the log-sum-exp over the unmasked entries alone, recomputed here, one and both directions; every gradient stays finite", infonceLargeTau),
				Limit: "the masked entries' values, not which entries are masked (false-negative-mask checks that)",
				Long: Long{
					Tests:  "with masked similarities far above every unmasked one (a masked document that equals its query), the loss equals the log-sum-exp over the unmasked entries alone, recomputed here, rows and (when symmetric) positive columns; every gradient is finite",
					Shapes: fmt.Sprintf("%s; masked (query, document) pairs %v, whose similarity 1/τ lies at least %g above every unmasked one of its row", both(infonceLargeCase), infonceLargeMaskedPairs, infonceLargeGap),
					Proves: "masked entries leave the maximum of every log-sum-exp as well as its sum: a maximum started from a masked entry underflows every exp to 0 and makes the loss −∞",
					Cannot: "which entries should be masked; at moderate scores a maximum taken from a masked entry gives the same value, so only extreme scores tell",
				}},
			Check[InfoNCEImpl]{Name: "false-negative-mask", Kind: Semantic, Run: infonceMask,
				Claim: "the mask built from document keys covers exactly the other copies of each positive, never the positive itself",
				Limit: "the mask builder only: whether the keys are right is the caller's business",
				Long: Long{
					Tests:  "the mask built from document keys covers exactly the other copies of each positive, never the positive",
					Shapes: fmt.Sprintf("keys %v, B = %d: mask [%d,%d]", infonceKeys, infonceKeysB, infonceKeysB, len(infonceKeys)),
					Proves: "the mask builder's rule",
					Cannot: "whether the caller's keys identify duplicates correctly",
				}},
		),
		At: func(impl InfoNCEImpl, s Sizes, seed uint64) Case[float64] {
			return infonceCase(impl.InfoNCEOps, infonceSized(s, seed))
		},
		At32: func(impl InfoNCEImpl, s Sizes, seed uint64) Case[float32] {
			return infonceCase(impl.F32, infonceSized(s, seed))
		},
		Reads: "B queries and N documents (B positives, N − B hard negatives) of T tokens of width Dim, symmetric, τ = 0.5",
	}
}

func infonceScaleInvariance(impl InfoNCEImpl) Result {
	h := infonceScaleCase()
	base, err := headRun(impl, h)
	if err != nil {
		return errored(err, "%v")
	}
	var worst float64
	for x, c := range infonceScales {
		s := h
		s.xq, s.xd = clone(h.xq), clone(h.xd)
		for b := range h.B {
			cb := c * float64(1+b) // a different factor per sequence
			for i := range h.Tq * h.D {
				s.xq[b*h.Tq*h.D+i] *= cb
			}
		}
		for b := range h.N {
			cb := c / float64(1+b)
			for i := range h.Td * h.D {
				s.xd[b*h.Td*h.D+i] *= cb
			}
		}
		o, err := headRun(impl, s)
		if err != nil {
			return errored(err, "%v")
		}
		d, msg := compare(identical, pair{"loss", []float64{o.loss}, []float64{base.loss}})
		worst = max(worst, d)
		if msg != "" {
			return measured(fail("scales %d: %s", x, msg), d)
		}
	}
	return measured(pass("loss unchanged for per-sequence factors around %s, max error %.1e", list(infonceScales), worst), worst)
}

func infoncePositiveOnly(impl InfoNCEImpl) Result {
	for _, sym := range []bool{false, true} {
		h := infoncePositiveCase(sym)
		o, err := headRun(impl, h)
		if err != nil {
			return errored(err, "%v")
		}
		if o.loss != 0 {
			return measured(fail("symmetric %v: loss = %.6g, want exactly 0 with only the positives unmasked", sym, o.loss), math.Abs(o.loss))
		}
		for _, g := range []struct {
			name string
			v    []float64
		}{{"dxq", o.dxq}, {"dxd", o.dxd}, {"dτ", []float64{o.dtau}}} {
			for i, v := range g.v {
				if v != 0 {
					return measured(fail("symmetric %v: %s[%d] = %.3g, want exactly 0", sym, g.name, i, v), math.Abs(v))
				}
			}
		}
	}
	return pass("loss exactly 0 and every gradient exactly 0, one and both directions")
}

func infonceUniform(impl InfoNCEImpl) Result {
	var worst float64
	for x, sym := range []bool{false, true} {
		h := infonceUniformCase(sym)
		// every token the same vector: every unit vector equal, every S = 1/τ
		v := randn(51, h.D, 1)
		for i := range h.xq {
			h.xq[i] = v[i%h.D]
		}
		for i := range h.xd {
			h.xd[i] = v[i%h.D]
		}
		o, err := headRun(impl, h)
		if err != nil {
			return errored(err, "%v")
		}
		var lq, ld float64
		for i := range h.B {
			n := 0
			for j := range h.N {
				if !h.mask[i*h.N+j] {
					n++
				}
			}
			lq += math.Log(float64(n))
		}
		want := lq / float64(h.B)
		if sym {
			for j := range h.B {
				n := 0
				for i := range h.B {
					if !h.mask[i*h.N+j] {
						n++
					}
				}
				ld += math.Log(float64(n))
			}
			want = (want + ld/float64(h.B)) / 2
		}
		d, msg := compare(identical, pair{"loss", []float64{o.loss}, []float64{want}})
		worst = max(worst, d)
		if msg != "" {
			return measured(fail("case %d (symmetric %v): %s", x, sym, msg), d)
		}
	}
	return measured(pass("equal similarities, 4 masked entries, one and both directions: loss = mean log(unmasked count), max error %.1e", worst), worst)
}

func infonceDSSums(impl InfoNCEImpl) Result {
	var worst float64
	for _, sym := range []bool{false, true} {
		h := infonceDSCase(sym)
		o, err := headRun(impl, h)
		if err != nil {
			return errored(err, "%v")
		}
		for i := range h.B {
			for j := range h.N {
				if h.mask[i*h.N+j] && o.ds[i*h.N+j] != 0 {
					return fail("symmetric %v: masked ∂L/∂S[%d,%d] = %.3g, want exactly 0", sym, i, j, o.ds[i*h.N+j])
				}
			}
		}
		sums := make([]float64, h.B)
		var m float64
		for i := range h.B {
			for _, g := range o.ds[i*h.N : (i+1)*h.N] {
				sums[i] += g
				m = max(m, math.Abs(g))
			}
		}
		if sym { // the column direction adds to rows; only the total is zero
			var t float64
			for _, s := range sums {
				t += s
			}
			sums = []float64{t}
		}
		for i, s := range sums {
			e := math.Abs(s) / (1 + m)
			worst = max(worst, e)
			if e > identical {
				return measured(fail("symmetric %v: sum %d of ∂L/∂S = %.3g (max |entry| %.3g)", sym, i, s, m), e)
			}
		}
	}
	return measured(pass("rows (one direction) and the total (both) of ∂L/∂S sum to zero, masked entries exactly 0, max error %.1e", worst), worst)
}

func infonceScaleDirection(impl InfoNCEImpl) Result {
	h := infonceDirectionCase()
	o, err := headRun(impl, h)
	if err != nil {
		return errored(err, "%v")
	}
	var worst float64
	for _, side := range []struct {
		name  string
		x, dx []float64
		n, T  int
	}{{"query", h.xq, o.dxq, h.B, h.Tq}, {"document", h.xd, o.dxd, h.N, h.Td}} {
		for b := range side.n {
			var dot, scale float64
			for i := range side.T * h.D {
				k := b*side.T*h.D + i
				dot += side.x[k] * side.dx[k]
				scale = max(scale, math.Abs(side.x[k]*side.dx[k]))
			}
			e := math.Abs(dot) / (1 + scale)
			worst = max(worst, e)
			if e > identical {
				return measured(fail("%s %d: Σ_t x_t·dx_t = %.3g, want 0 (largest term %.3g)", side.name, b, dot, scale), e)
			}
		}
	}
	return measured(pass("Σ_t x_t·dx_t = 0 for all %d sequences, max error %.1e", h.B+h.N, worst), worst)
}

func infonceSharpens(impl InfoNCEImpl) Result {
	for _, sym := range []bool{false, true} {
		h := infonceSharpCase(sym)
		// each query is its positive plus a little noise: the positive is the
		// best match of its row and column
		noise := randn(81, len(h.xq), 0.05)
		for b := range h.B {
			for i := range h.Tq * h.D {
				h.xq[b*h.Tq*h.D+i] = h.xd[b*h.Td*h.D+i] + noise[b*h.Tq*h.D+i]
			}
		}
		o, err := headRun(impl, h)
		if err != nil {
			return errored(err, "%v")
		}
		if !(o.dtau > 0) {
			return fail("symmetric %v: ∂L/∂τ = %.4g with every positive the best match; want > 0 (a sharper softmax fits better)", sym, o.dtau)
		}
		half := h
		half.tau /= 2
		o2, err := headRun(impl, half)
		if err != nil {
			return errored(err, "%v")
		}
		if !(o2.loss < o.loss) {
			return fail("symmetric %v: loss %.4g at τ/2, %.4g at τ: want lower at τ/2", sym, o2.loss, o.loss)
		}
	}
	return pass("∂L/∂τ > 0 and L(τ/2) < L(τ) when positives are the best matches, one and both directions")
}

// infonceLargeMaskedPairs are the masked (query, document) pairs of
// large-masked-scores: document j is made a copy of query i, so S[i,j] = 1/τ,
// the largest similarity there is. Two lie in the positives' columns, one in
// a hard negative's. infonceLargeGap is how far above every unmasked
// similarity of its row each must lie: beyond exp's range (e⁻⁷⁴⁵ underflows).
var infonceLargeMaskedPairs = [][2]int{{0, 2}, {3, 1}, {1, 5}}

const (
	infonceLargeTau = 1e-4
	infonceLargeGap = 800.0
)

func infonceLargeCase(sym bool) headCase {
	h := newHeadCase(4, 6, 1, 1, 5, infonceLargeTau, sym, nil, 90).withMask(infonceLargeMaskedPairs...)
	for _, p := range infonceLargeMaskedPairs {
		copy(h.xd[p[1]*h.D:(p[1]+1)*h.D], h.xq[p[0]*h.D:(p[0]+1)*h.D])
	}
	return h
}

func infonceLargeMasked(impl InfoNCEImpl) Result {
	var worst float64
	for _, sym := range []bool{false, true} {
		h := infonceLargeCase(sym)
		// S from the unit vectors (one token each: the pooled vector is the token)
		unit := func(x []float64) []float64 {
			u := clone(x)
			n := math.Sqrt(ropeDot(u, u))
			for k := range u {
				u[k] /= n
			}
			return u
		}
		S := make([]float64, h.B*h.N)
		for i := range h.B {
			for j := range h.N {
				S[i*h.N+j] = ropeDot(unit(h.xq[i*h.D:(i+1)*h.D]), unit(h.xd[j*h.D:(j+1)*h.D])) / h.tau
			}
		}
		// lse over the unmasked entries of a row or column, with its own maximum
		lse := func(at func(k int) (float64, bool), n int) float64 {
			mx := math.Inf(-1)
			for k := range n {
				if v, ok := at(k); ok {
					mx = max(mx, v)
				}
			}
			var z float64
			for k := range n {
				if v, ok := at(k); ok {
					z += math.Exp(v - mx)
				}
			}
			return mx + math.Log(z)
		}
		var lq, ld float64
		for i := range h.B {
			lq += lse(func(j int) (float64, bool) { return S[i*h.N+j], !h.mask[i*h.N+j] }, h.N) - S[i*h.N+i]
		}
		want := lq / float64(h.B)
		if sym {
			for j := range h.B {
				ld += lse(func(i int) (float64, bool) { return S[i*h.N+j], !h.mask[i*h.N+j] }, h.B) - S[j*h.N+j]
			}
			want = (want + ld/float64(h.B)) / 2
		}
		for _, p := range infonceLargeMaskedPairs {
			for k := range h.N {
				if !h.mask[p[0]*h.N+k] && S[p[0]*h.N+p[1]]-S[p[0]*h.N+k] < infonceLargeGap {
					return fail("masked S[%d,%d] = %.4g is not %g above S[%d,%d] = %.4g: the probe is void", p[0], p[1], S[p[0]*h.N+p[1]], infonceLargeGap, p[0], k, S[p[0]*h.N+k])
				}
			}
		}
		o, err := headRun(impl, h)
		if err != nil {
			return errored(err, "%v")
		}
		d, msg := compare(identical, pair{"loss", []float64{o.loss}, []float64{want}})
		worst = max(worst, d)
		if msg != "" {
			return measured(fail("symmetric %v, masked scores %.0f above the rest: %s", sym, 1/h.tau, msg), d)
		}
		for _, g := range []struct {
			name string
			v    []float64
		}{{"dxq", o.dxq}, {"dxd", o.dxd}, {"dτ", []float64{o.dtau}}} {
			for i, v := range g.v {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fail("symmetric %v: %s[%d] = %v with large masked scores", sym, g.name, i, v)
				}
			}
		}
	}
	return measured(pass("masked similarities 1/τ = %.0f, %g and more above their rows: loss equals the unmasked log-sum-exp, one and both directions, max error %.1e; gradients finite", 1/infonceLargeTau, float64(infonceLargeGap), worst), worst)
}

func infonceMask(impl InfoNCEImpl) Result {
	keys, B := infonceKeys, infonceKeysB
	N := len(keys)
	got := make([]bool, B*N)
	copies := 0
	if err := protect(func() error { impl.Mask(got, keys, B); return nil }); err != nil {
		return errored(err, "%v")
	}
	for i := range B {
		for j := range N {
			want := j != i && keys[j] == keys[i]
			if want {
				copies++
			}
			if got[i*N+j] != want {
				what := "a true negative masked"
				switch {
				case j == i:
					what = "the positive masked"
				case want:
					what = "a copy of the positive left as a negative"
				}
				return fail("keys %v, B = %d: mask[%d,%d] = %v: %s", keys, B, i, j, got[i*N+j], what)
			}
		}
	}
	return pass("keys %s, B = %d: exactly the %d other copies of a positive masked, no positive", fmt.Sprint(keys), B, copies)
}
