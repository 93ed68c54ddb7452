package conform

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
)

// CheckResult is one check of the lab run on the implementation.
type CheckResult struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Status string `json:"status"` // pass, fail or skip
	Detail string `json:"detail"`
	// Undeclared: skipped because the implementation does not declare what
	// the check needs (gradients, a cache, a mask kind): outside what its
	// verdict covers. A skip that is not undeclared is a check the
	// implementation should have answered and could not be asked: the
	// verdict is then not established.
	Undeclared bool `json:"undeclared,omitempty"`
}

// Statuses of a CheckResult.
const (
	Pass = "pass"
	Fail = "fail"
	Skip = "skip"
)

// needs lists, for the checks of the attention suite, what of an
// implementation they use beyond a forward pass; a check whose needs the
// capabilities do not cover is skipped with the reason. What the configs
// of a check require of the masks is found when it runs (see wrapped).
var needs = map[string][]string{
	"fd-elements":             {"gradients", "float64"},
	"fd-directions":           {"gradients", "float64"},
	"float32":                 {"float32"},
	"first-row-grad":          {"gradients"},
	"padding-invariance":      {"gradients"},
	"packing-equals-separate": {"gradients"},
	"gqa-equals-mha":          {"gradients", "gqa"},
	"ds-rowsum":               {"gradients"},
	"shift-invariance":        {"lse"},
	"delta-identity":          {"lse", "gradients"},
	"chunked-equals-full":     {"kv_cache"},
}

// notApplicable are checks of attnlab's Go API that say nothing of an
// implementation behind an adapter.
var notApplicable = map[string]string{
	"accumulates": "the += contract of attnlab's Go gradient buffers: the implementation returns fresh gradients (no accumulates capability)",
	"conventions": "needs a convention parameter (position, bottom-right, top-left) to switch between (no conventions capability); the card reports the implementation's own",
}

func (c Capabilities) has(need string) bool {
	switch need {
	case "gradients":
		return c.Gradients
	case "lse":
		return c.LSE
	case "gqa":
		return c.GQA
	case "kv_cache":
		return c.KVCache
	case "float64", "float32":
		return c.HasDType(need)
	}
	return false
}

// errSkip is returned by a wrapped call that the implementation cannot be
// asked: the check is skipped with wrapped.skip as the reason.
var errSkip = errors.New("conform: not expressible")

// wrapped presents an Implementation as the checks' attention
// implementation, translating each attention.Config into a request the
// implementation can take under the conventions its card measured, or
// recording why it cannot.
type wrapped struct {
	impl       Implementation
	caps       Capabilities
	card       *Card // the implementation's conventions, once known
	skip       string
	undeclared bool // the skip is for something the implementation does not declare
	fatal      error
	// dsinks is the implementation's dσ of the last call with sinks and
	// dO, which wrote o (sinkO) from dO (sinkDO): what the checks' SinkGrad
	// returns for that call.
	dsinks, sinkO, sinkDO []float64
}

// float32Precision is the relative rounding of answers given in float32
// numbers, for the checks that compare two of them: 2⁻²⁴ accumulated over
// the rows of the checks' small shapes, with a margin (a correct float32
// kernel measures 1e-8 to 4e-7 on them).
const float32Precision = 1e-5

func (w *wrapped) checksImpl() checks.Impl {
	precision := 0.0
	if !w.caps.HasDType("float64") {
		precision = float32Precision
	}
	return checks.Impl{
		Precision: precision,
		NoGrad:    !w.caps.Gradients,
		SinkGrad:  w.sinkGrad,
		Run: func(o, lse, dq, dk, dv, q, k, v, do []float64, c *attention.Config) error {
			dtype := "float64"
			if !w.caps.HasDType("float64") {
				dtype = "float32" // the float64 checks then see float32 numbers
			}
			return w.call(dtype, o, lse, dq, dk, dv, q, k, v, do, c)
		},
		F32: func(o, lse, dq, dk, dv, q, k, v, do []float32, c *attention.Config) error {
			if !w.caps.HasDType("float32") {
				w.undeclaredf("needs float32")
				return errSkip
			}
			wide := func(x []float32) []float64 {
				if x == nil {
					return nil
				}
				y := make([]float64, len(x))
				for i, v := range x {
					y[i] = float64(v)
				}
				return y
			}
			o64, lse64 := make([]float64, len(o)), make([]float64, len(lse))
			var dq64, dk64, dv64 []float64
			if do != nil {
				dq64, dk64, dv64 = wide(dq), wide(dk), wide(dv)
			}
			if err := w.call("float32", o64, lse64, dq64, dk64, dv64, wide(q), wide(k), wide(v), wide(do), c); err != nil {
				return err
			}
			for _, p := range []struct {
				dst []float32
				src []float64
			}{{o, o64}, {lse, lse64}, {dq, dq64}, {dk, dk64}, {dv, dv64}} {
				for i := range p.src {
					p.dst[i] = float32(p.src[i])
				}
			}
			return nil
		},
	}
}

// sinkGrad adds the implementation's dσ of the call that wrote o from do
// into dsinks: the gradient it answered, not one conform computes. It
// panics (the checks report that as the check's failure) when the
// implementation answered no dsinks, or when o and do are not those of the
// last call.
func (w *wrapped) sinkGrad(dsinks, o, lse, do []float64, c *attention.Config) {
	if !sameBuffer(o, w.sinkO) || !sameBuffer(do, w.sinkDO) {
		panic("conform: dσ asked of a call other than the last one with sinks and dO")
	}
	if w.dsinks == nil {
		panic("the implementation answered no dsinks to a request with sinks and do")
	}
	for h, g := range w.dsinks {
		dsinks[h] += g
	}
}

func sameBuffer(a, b []float64) bool { return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] }

// skipf records why a request the implementation should answer cannot be
// asked (a measured convention conform cannot express): not established.
func (w *wrapped) skipf(format string, args ...any) {
	if w.skip == "" {
		w.skip = fmt.Sprintf(format, args...)
	}
}

// undeclaredf records a request that needs what the implementation does
// not declare.
func (w *wrapped) undeclaredf(format string, args ...any) {
	if w.skip == "" {
		w.skip, w.undeclared = fmt.Sprintf(format, args...), true
	}
}

// call sends one request and writes the answer: o and lse overwritten,
// gradients added (the contract of checks' implementations).
func (w *wrapped) call(dtype string, o, lse, dq, dk, dv, q, k, v, do []float64, c *attention.Config) error {
	if w.fatal != nil {
		return w.fatal
	}
	w.dsinks, w.sinkO, w.sinkDO = nil, nil, nil
	r, reason, undeclared := w.request(c)
	switch {
	case reason != "" && undeclared:
		w.undeclaredf("%s", reason)
		return errSkip
	case reason != "":
		w.skipf("%s", reason)
		return errSkip
	case do != nil && !w.caps.Gradients:
		w.undeclaredf("needs gradients")
		return errSkip
	}
	r.DType, r.Q, r.K, r.V, r.DO, r.WantLSE = dtype, q, k, v, do, w.caps.LSE
	if do != nil && w.caps.Accumulates {
		r.DQ0, r.DK0, r.DV0 = dq, dk, dv // it adds into them itself
	}
	// A scale the implementation cannot take goes into q: with its
	// default d, scores (s/d·q)·k·d are s·q·k, and dq comes back times s/d.
	qscale := 1.0
	if !w.caps.Scale {
		if d := defaultScale(w.card, c.D); c.ScaleValue() != d {
			qscale = c.ScaleValue() / d
			r.Q = scaled(q, qscale)
			r.DQ0 = nil // its dq comes back scaled: added here, not there
		}
	}
	// Without GQA, or with a head mapping that is neither contiguous nor
	// interleaved, K and V are repeated per query head (attnlab's
	// contiguous mapping, as repeat_kv) and their gradients summed back
	// over each group: the implementation computes multi-head attention.
	// With the interleaved mapping (query head h reads K/V head h mod Hkv)
	// the query heads are sent in the order that makes it read the heads
	// attnlab's mapping names.
	group, perm := 1, []int(nil)
	switch {
	case c.Hkv == c.Hq:
	case !w.caps.GQA || w.card != nil && w.card.GQA != GQAContiguous && w.card.GQA != GQAInterleaved:
		group = c.Hq / c.Hkv
		r.Hkv = c.Hq
		r.K, r.V = repeatHeads(k, c.B, c.Hkv, group, c.N*c.D), repeatHeads(v, c.B, c.Hkv, group, c.N*c.Dv)
		r.DK0, r.DV0 = nil, nil
	case w.card != nil && w.card.GQA == GQAInterleaved && c.Hkv > 1:
		perm = interleave(c.Hq, c.Hkv)
		r.Q, r.DO = permuteHeads(r.Q, perm, c.B, c.M*c.D), permuteHeads(r.DO, perm, c.B, c.M*c.Dv)
		r.DQ0 = permuteHeads(r.DQ0, perm, c.B, c.M*c.D)
		r.Sinks, r.Alibi = permuteHeads(r.Sinks, perm, 1, 1), permuteHeads(r.Alibi, perm, 1, 1)
	}
	resp, err := w.impl.Attention(r)
	if err == nil && resp.Err == "" {
		if perm != nil {
			inv := inverse(perm)
			resp.O, resp.LSE = permuteHeads(resp.O, inv, c.B, c.M*c.Dv), permuteHeads(resp.LSE, inv, c.B, c.M)
			resp.DQ = permuteHeads(resp.DQ, inv, c.B, c.M*c.D)
			resp.DSinks = permuteHeads(resp.DSinks, inv, 1, 1)
		}
		if qscale != 1 && resp.DQ != nil {
			resp.DQ = scaled(resp.DQ, qscale)
		}
		if group > 1 && resp.DK != nil {
			resp.DK, resp.DV = sumHeads(resp.DK, c.B, c.Hkv, group, c.N*c.D), sumHeads(resp.DV, c.B, c.Hkv, group, c.N*c.Dv)
		}
	}
	if err != nil {
		w.fatal = err
		return err
	}
	if resp.Err != "" {
		return errors.New(resp.Err) // the implementation raised: an empty row, say
	}
	copy(o, resp.O)
	if r.Sinks != nil && do != nil {
		w.dsinks, w.sinkO, w.sinkDO = resp.DSinks, o, do
	}
	if w.caps.LSE && resp.LSE != nil {
		copy(lse, resp.LSE)
	} else {
		for i := range lse {
			lse[i] = math.NaN()
		}
	}
	for _, p := range []struct {
		dst, src []float64
		summed   bool // the implementation added into dst itself
	}{{dq, resp.DQ, r.DQ0 != nil}, {dk, resp.DK, r.DK0 != nil}, {dv, resp.DV, r.DV0 != nil}} {
		if p.dst != nil && p.src != nil {
			if p.summed {
				copy(p.dst, p.src)
				continue
			}
			for i, g := range p.src {
				p.dst[i] += g
			}
		}
	}
	return nil
}

// request expresses c with the implementation's capabilities: positions
// when it takes them, else a boolean mask computed by attnlab's rule, else
// the causal flag alone, which can say only so much. It returns the reason
// when c cannot be expressed, and whether that is because the
// implementation does not declare what c needs (undeclared) rather than
// because a convention it was measured to have cannot be worked around.
func (w *wrapped) request(c *attention.Config) (r *Request, reason string, undeclared bool) {
	caps := w.caps
	r = &Request{B: c.B, Hq: c.Hq, Hkv: c.Hkv, M: c.M, N: c.N, D: c.D, Dv: c.Dv, Causal: c.Causal, Window: c.Window,
		Sinks: c.Sinks, Softcap: c.Softcap, Alibi: c.Alibi}
	if v := r.undeclared(caps); v != "" {
		return nil, "needs " + v, true
	}
	if c.Convention != attention.Positions {
		if !caps.Conventions {
			return nil, "needs a " + c.Convention.String() + " causal convention, a parameter the implementation does not take", true
		}
		r.Convention = c.Convention.String()
	}
	if c.M != c.N && !caps.KVCache {
		return nil, "needs M ≠ N (a chunk against a cache)", true
	}
	// without GQA, or with another head mapping, call repeats or permutes
	// the heads (see call)
	switch {
	case caps.Scale:
		r.Scale = c.ScaleValue()
	case defaultScale(w.card, c.D) == 0:
		return nil, "needs a scale other than the default, which the implementation does not take, and its default (" + w.card.Scale + ") is not one conform can correct for", false
	}
	// without an explicit scale, call scales q instead (see call)
	padQ, padK := anyFalse(c.QValid), anyFalse(c.KValid)
	var missing []string
	for _, f := range []struct {
		need bool
		kind string
	}{{c.QPos != nil || c.KPos != nil, MaskPositions}, {padQ || padK, MaskValidity}, {c.QSeg != nil, MaskSegments}, {c.Window > 0, MaskWindow}} {
		if f.need && !caps.Has(f.kind) {
			missing = append(missing, f.kind)
		}
	}
	switch {
	case caps.Has(MaskPositions) && len(missing) == 0:
		// attnlab's own rule, its tensors as they are
		r.QPos, r.KPos, r.QSeg, r.KSeg = int64s(c.QPos), int64s(c.KPos), int64s(c.QSeg), int64s(c.KSeg)
		r.QValid, r.KValid = validity(c.QValid), validity(c.KValid)
		return r, "", false
	case caps.Has(MaskBool):
		if padQ && !caps.Has(MaskValidity) {
			return nil, "needs padding queries (validity): a boolean mask cannot say a row is padding", true
		}
		r.Mask = make([]bool, c.B*c.M*c.N)
		for b := range c.B {
			for i := range c.M {
				for j := range c.N {
					r.Mask[(b*c.M+i)*c.N+j] = c.Visible(b, i, j)
				}
			}
		}
		r.Causal, r.Window = false, 0
		if caps.Has(MaskValidity) {
			r.QValid, r.KValid = validity(c.QValid), validity(c.KValid)
		}
		return r, "", false
	case c.Causal && !caps.Has(MaskCausal):
		missing = append(missing, MaskCausal)
	}
	if len(missing) > 0 {
		return nil, "needs " + strings.Join(missing, ", ") + " masks", true
	}
	// the causal flag alone: right only where the implementation's
	// alignment is attnlab's position rule
	if c.Causal && c.M != c.N && w.card != nil {
		want, field := w.card.CausalMLtN, "causal_m_lt_n"
		if c.M > c.N {
			want, field = w.card.CausalMGtN, "causal_m_gt_n"
		}
		if want == NA && slices.Contains(w.card.Refused, field) {
			// it declares the cache and the causal flag and refused them
			// together: a check it should answer, not one outside its
			// declaration
			return nil, "needs the causal flag at M ≠ N, which the implementation declares and refused (" + w.card.NotMeasured[field] + ")", false
		}
		if want != AlignPosition && want != AlignBottomRight {
			// the card already holds the implementation to its alignment
			return nil, fmt.Sprintf("needs the position rule at M ≠ N; the causal flag aligns %s", want), true
		}
	}
	return r, "", false
}

// defaultScale is the value of the implementation's default scale for
// head size D as its card measured it (1/√D before it is measured), or 0
// when the card found no value conform knows.
func defaultScale(card *Card, D int) float64 {
	if card == nil {
		return 1 / math.Sqrt(float64(D))
	}
	switch card.Scale {
	case ScaleInvSqrtD:
		return 1 / math.Sqrt(float64(D))
	case ScaleInvD:
		return 1 / float64(D)
	case ScaleOne:
		return 1
	}
	return 0
}

// interleave is the order in which query heads go to an implementation
// with the interleaved mapping (head h' reads K/V head h' mod Hkv) so that
// each reads the K/V head attnlab's contiguous mapping gives it: query head
// h (K/V head h / group, member h mod group) goes to place
// (h mod group)·Hkv + h / group.
func interleave(Hq, Hkv int) []int {
	group := Hq / Hkv
	perm := make([]int, Hq)
	for h := range Hq {
		perm[h] = (h%group)*Hkv + h/group
	}
	return perm
}

func inverse(perm []int) []int {
	inv := make([]int, len(perm))
	for i, p := range perm {
		inv[p] = i
	}
	return inv
}

// permuteHeads moves head h of x ([B, H, size]) to place perm[h]; nil
// stays nil.
func permuteHeads(x []float64, perm []int, B, size int) []float64 {
	if x == nil {
		return nil
	}
	H := len(perm)
	out := make([]float64, len(x))
	for b := range B {
		for h, p := range perm {
			copy(out[(b*H+p)*size:(b*H+p+1)*size], x[(b*H+h)*size:(b*H+h+1)*size])
		}
	}
	return out
}

func scaled(x []float64, s float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * s
	}
	return y
}

// repeatHeads repeats each of the Hkv heads of x ([B, Hkv, size]) group
// times in a row: [B, Hkv·group, size].
func repeatHeads(x []float64, B, Hkv, group, size int) []float64 {
	out := make([]float64, 0, len(x)*group)
	for bh := range B * Hkv {
		for range group {
			out = append(out, x[bh*size:(bh+1)*size]...)
		}
	}
	return out
}

// sumHeads is the adjoint of repeatHeads: each group of heads summed.
func sumHeads(x []float64, B, Hkv, group, size int) []float64 {
	out := make([]float64, B*Hkv*size)
	for bh := range B * Hkv {
		for g := range group {
			src := x[(bh*group+g)*size : (bh*group+g+1)*size]
			for i, v := range src {
				out[bh*size+i] += v
			}
		}
	}
	return out
}

func anyFalse(x []bool) bool {
	for _, v := range x {
		if !v {
			return true
		}
	}
	return false
}

func int64s(x []int) []int64 {
	if x == nil {
		return nil
	}
	y := make([]int64, len(x))
	for i, v := range x {
		y[i] = int64(v)
	}
	return y
}

func validity(x []bool) []int64 {
	if x == nil {
		return nil
	}
	y := make([]int64, len(x))
	for i, v := range x {
		if v {
			y[i] = 1
		}
	}
	return y
}

// variantNeeds lists, for the checks of the variants' suite, what they use
// beyond their configurations (which say what variants and masks they
// need: see wrapped.request) and the needs of the attention checks of the
// same name.
var variantNeeds = map[string][]string{
	"float32":                   {"lse"}, // dσ from the float32 answers' lse
	"sink-limit":                {"lse"},
	"sink-weight":               {"lse"},
	"sink-empty-row":            {"lse"},
	"softcap-limit":             {"lse"},
	"softcap-bound":             {"lse"},
	"alibi-limit":               {"lse"},
	"alibi-chunked-equals-full": {"lse"},
}

// VariantPrefix begins the names of the checks of the variants (sinks,
// softcap, ALiBi) in a report: "variants/sink-limit".
const VariantPrefix = "variants/"

// runChecks runs the comparison with attnlab's reference, then every check
// of the attention suite, then the comparison on the variants'
// configurations and every check of the variants' suite, on impl. A
// variant check whose configurations use a variant the implementation does
// not declare is skipped as undeclared when it first asks for it.
func runChecks(ctx context.Context, w *wrapped) ([]CheckResult, error) {
	ref, err := agreesWithReference(w, "agrees-with-reference", referenceConfigs())
	if err != nil {
		return nil, err
	}
	out := []CheckResult{ref}
	if out, err = runSuite(ctx, w, out, "", checks.Attention().Checks, nil); err != nil {
		return out, err
	}
	ref, err = agreesWithReference(w, VariantPrefix+"agrees-with-reference", variantConfigs())
	if err != nil {
		return out, err
	}
	out = append(out, ref)
	return runSuite(ctx, w, out, VariantPrefix, checks.Variants().Checks, variantNeeds)
}

// runSuite runs suite's checks on w, each named prefix + its name, and
// appends the results to out.
func runSuite(ctx context.Context, w *wrapped, out []CheckResult, prefix string, suite []checks.Check[checks.Impl], more map[string][]string) ([]CheckResult, error) {
	for _, c := range suite {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res := CheckResult{Name: prefix + c.Name, Kind: string(c.Kind)}
		if why, ok := notApplicable[c.Name]; ok && !(c.Name == "accumulates" && w.caps.Accumulates) && !(c.Name == "conventions" && w.caps.Conventions) {
			res.Status, res.Detail, res.Undeclared = Skip, "not applicable: "+why, true
			out = append(out, res)
			continue
		}
		var missing []string
		for _, n := range append(slices.Clone(needs[c.Name]), more[c.Name]...) {
			if !w.caps.has(n) && !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			res.Status, res.Detail, res.Undeclared = Skip, "needs "+strings.Join(missing, ", "), true
			out = append(out, res)
			continue
		}
		w.skip, w.undeclared = "", false
		r := c.Run(w.checksImpl())
		switch {
		case w.fatal != nil:
			return out, w.fatal
		case w.skip != "":
			res.Status, res.Detail, res.Undeclared = Skip, w.skip, w.undeclared
		case r.Pass:
			res.Status, res.Detail = Pass, r.Detail
		default:
			res.Status, res.Detail = Fail, r.Detail
		}
		out = append(out, res)
	}
	return out, nil
}

// variantConfigs are the configurations of variants/agrees-with-reference:
// each variant alone (so that an implementation declaring one is compared
// on it), then the three together on a chunk after a cache with GQA, and
// on padding, packing and a window.
func variantConfigs() []*attention.Config {
	plain := func() *attention.Config {
		return &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 6, N: 6, D: 4, Dv: 4, Causal: true}
	}
	mixed := referenceConfigs()[4]
	return []*attention.Config{
		checks.WithVariants(plain(), 1.5, false, false),
		checks.WithVariants(plain(), 0, true, false),
		checks.WithVariants(plain(), 0, false, true),
		checks.WithVariants(&attention.Config{B: 1, Hq: 4, Hkv: 2, M: 3, N: 7, D: 4, Dv: 3, Causal: true}, 1.5, true, true),
		checks.WithVariants(mixed, 2, true, true),
	}
}

// referenceConfigs are the configurations of agrees-with-reference, from
// the plainest, which any implementation can be asked, to every mask
// feature: causal MHA, GQA, a chunk after a cache, 65 keys past a 64-wide
// tile, validity with segments and a window.
func referenceConfigs() []*attention.Config {
	return []*attention.Config{
		{B: 1, Hq: 2, Hkv: 2, M: 7, N: 7, D: 5, Dv: 5, Causal: true},
		{B: 2, Hq: 4, Hkv: 2, M: 9, N: 9, D: 4, Dv: 3, Causal: true},
		{B: 1, Hq: 2, Hkv: 1, M: 3, N: 9, D: 4, Dv: 4, Causal: true},
		{B: 1, Hq: 1, Hkv: 1, M: 65, N: 65, D: 8, Dv: 8},
		{B: 2, Hq: 2, Hkv: 1, M: 6, N: 6, D: 4, Dv: 4, Causal: true, Window: 3,
			KValid: []bool{false, true, true, true, true, true, true, true, true, true, true, true},
			QValid: []bool{false, true, true, true, true, true, true, true, true, true, true, true},
			QSeg:   []int{0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1}, KSeg: []int{0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1}},
	}
}

// agreesWithReference compares the implementation's answers (O, lse and
// the gradients, as far as it declares them) with attnlab's float64
// reference on referenceConfigs: what the semantic checks, which compare
// an implementation with itself, cannot see (a forward 1 % off passes
// them all).
func agreesWithReference(w *wrapped, name string, configs []*attention.Config) (CheckResult, error) {
	res := CheckResult{Name: name, Kind: "semantic"}
	tol := 1e-9
	dtype := "float64"
	if !w.caps.HasDType("float64") {
		tol, dtype = 1e-4, "float32" // float32 answers: 2⁻²⁴ rounding over a few dozen terms, with a margin
	}
	var ran, skipped []string
	worst := 0.0
	for x, c := range configs {
		rnd := rand.New(rand.NewPCG(uint64(50+x), 0xa9ee))
		fill := func(size int) []float64 {
			x := make([]float64, size)
			for i := range x {
				x[i] = rnd.NormFloat64()
			}
			return x
		}
		q, k, v, do := fill(c.B*c.Hq*c.M*c.D), fill(c.B*c.Hkv*c.N*c.D), fill(c.B*c.Hkv*c.N*c.Dv), fill(c.B*c.Hq*c.M*c.Dv)
		if !w.caps.Gradients {
			do = nil
		}
		type answer struct{ o, lse, dq, dk, dv, dsinks []float64 }
		fresh := func() answer {
			return answer{make([]float64, c.B*c.Hq*c.M*c.Dv), make([]float64, c.B*c.Hq*c.M), make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v)), nil}
		}
		want, got := fresh(), fresh()
		if err := checks.AttentionReference.Run(want.o, want.lse, want.dq, want.dk, want.dv, q, k, v, do, c); err != nil {
			return res, fmt.Errorf("conform: reference on %s: %w", describeConfig(c), err)
		}
		if c.Sinks != nil && do != nil {
			want.dsinks = make([]float64, c.Hq)
			attention.SinkGrad(want.dsinks, want.o, want.lse, do, c)
		}
		w.skip, w.undeclared = "", false
		err := w.call(dtype, got.o, got.lse, got.dq, got.dk, got.dv, q, k, v, do, c)
		switch {
		case w.fatal != nil:
			return res, w.fatal
		case w.skip != "":
			if !w.undeclared {
				skipped = append(skipped, fmt.Sprintf("configuration %d (%s): %s", x, describeConfig(c), w.skip))
				res.Status = Skip
			}
			continue
		case err != nil:
			res.Status, res.Detail = Fail, fmt.Sprintf("configuration %d (%s): refused: %v", x, describeConfig(c), err)
			return res, nil
		}
		if want.dsinks != nil {
			got.dsinks = w.dsinks // nil when it answered none: off by the whole value
		}
		type pair struct {
			name      string
			got, want []float64
		}
		pairs := []pair{{"o", got.o, want.o}}
		if w.caps.LSE {
			pairs = append(pairs, pair{"lse", validRows(got.lse, c), validRows(want.lse, c)})
		}
		if do != nil {
			pairs = append(pairs, pair{"dq", got.dq, want.dq}, pair{"dk", got.dk, want.dk}, pair{"dv", got.dv, want.dv})
		}
		if want.dsinks != nil {
			pairs = append(pairs, pair{"dsinks", got.dsinks, want.dsinks})
		}
		for _, p := range pairs {
			e := relDiff(p.got, p.want)
			worst = max(worst, e)
			if e > tol {
				res.Status, res.Detail = Fail, fmt.Sprintf("configuration %d (%s): %s off by %.2g of its largest value (tolerance %.0e)", x, describeConfig(c), p.name, e, tol)
				return res, nil
			}
		}
		ran = append(ran, fmt.Sprint(x))
	}
	switch {
	case res.Status == Skip:
		res.Detail = strings.Join(skipped, "; ")
		if len(skipped) == len(configs) && sameReason(skipped) {
			_, res.Detail, _ = strings.Cut(skipped[0], "): ")
			res.Detail = "every configuration: " + res.Detail
		}
	case len(ran) == 0:
		res.Status, res.Undeclared, res.Detail = Skip, true, "none of its configurations can be expressed with what the implementation declares"
	default:
		res.Status, res.Detail = Pass, fmt.Sprintf("configurations %s of %d: O%s equal the float64 reference's within %.0e (worst %.1e)",
			strings.Join(ran, ", "), len(configs), map[bool]string{true: ", lse, dQ, dK, dV", false: ""}[w.caps.Gradients], tol, worst)
	}
	return res, nil
}

// validRows is lse with the rows of padding queries (whose lse no
// implementation agrees on) set to 0.
func validRows(lse []float64, c *attention.Config) []float64 {
	out := append([]float64(nil), lse...)
	for b := range c.B {
		for h := range c.Hq {
			for i := range c.M {
				if !c.QueryValid(b, i) {
					out[(b*c.Hq+h)*c.M+i] = 0
				}
			}
		}
	}
	return out
}

// describeConfig names a configuration's sizes and mask features.
func describeConfig(c *attention.Config) string {
	s := fmt.Sprintf("B=%d Hq=%d Hkv=%d M=%d N=%d D=%d", c.B, c.Hq, c.Hkv, c.M, c.N, c.D)
	if c.Causal {
		s += ", causal"
	}
	if c.Window > 0 {
		s += fmt.Sprintf(", window %d", c.Window)
	}
	if c.QValid != nil || c.KValid != nil {
		s += ", padding"
	}
	if c.QSeg != nil {
		s += ", segments"
	}
	if c.Softcap > 0 {
		s += fmt.Sprintf(", softcap %g", c.Softcap)
	}
	if c.Alibi != nil {
		s += ", ALiBi"
	}
	if c.Sinks != nil {
		s += ", sinks"
	}
	return s
}

// sameReason reports whether the "configuration X (…): reason" lines all
// give one reason.
func sameReason(lines []string) bool {
	_, first, _ := strings.Cut(lines[0], "): ")
	for _, l := range lines[1:] {
		if _, r, _ := strings.Cut(l, "): "); r != first {
			return false
		}
	}
	return true
}
