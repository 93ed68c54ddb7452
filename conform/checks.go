package conform

import (
	"context"
	"errors"
	"fmt"
	"math"
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
// implementation can take, or recording why it cannot.
type wrapped struct {
	impl  Implementation
	caps  Capabilities
	card  *Card // the implementation's conventions, once known
	skip  string
	fatal error
}

func (w *wrapped) checksImpl() checks.Impl {
	precision := 0.0
	if !w.caps.HasDType("float64") {
		precision = 1e-5 // float32 answers: 2⁻²³ rounding, accumulated
	}
	return checks.Impl{
		Precision: precision,
		Run: func(o, lse, dq, dk, dv, q, k, v, do []float64, c *attention.Config) error {
			dtype := "float64"
			if !w.caps.HasDType("float64") {
				dtype = "float32" // the float64 checks then see float32 numbers
			}
			return w.call(dtype, o, lse, dq, dk, dv, q, k, v, do, c)
		},
		F32: func(o, lse, dq, dk, dv, q, k, v, do []float32, c *attention.Config) error {
			if !w.caps.HasDType("float32") {
				w.skipf("needs float32")
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

func (w *wrapped) skipf(format string, args ...any) {
	if w.skip == "" {
		w.skip = fmt.Sprintf(format, args...)
	}
}

// call sends one request and writes the answer: o and lse overwritten,
// gradients added (the contract of checks' implementations).
func (w *wrapped) call(dtype string, o, lse, dq, dk, dv, q, k, v, do []float64, c *attention.Config) error {
	if w.fatal != nil {
		return w.fatal
	}
	r, reason := w.request(c)
	if reason != "" {
		w.skipf("%s", reason)
		return errSkip
	}
	if do != nil && !w.caps.Gradients {
		w.skipf("needs gradients")
		return errSkip
	}
	r.DType, r.Q, r.K, r.V, r.DO, r.WantLSE = dtype, q, k, v, do, w.caps.LSE
	if do != nil && w.caps.Accumulates {
		r.DQ0, r.DK0, r.DV0 = dq, dk, dv // it adds into them itself
	}
	// A scale the implementation cannot take goes into q: scores
	// (s·√D·q)·k/√D are s·q·k, and dq comes back times s·√D.
	qscale := 1.0
	if !w.caps.Scale {
		if s := c.ScaleValue(); s != 1/math.Sqrt(float64(c.D)) {
			qscale = s * math.Sqrt(float64(c.D))
			r.Q = scaled(q, qscale)
			r.DQ0 = nil // its dq comes back scaled: added here, not there
		}
	}
	// Without GQA, K and V are repeated per query head (attnlab's
	// contiguous mapping, as repeat_kv) and their gradients summed back over
	// each group: the implementation computes multi-head attention.
	group := 1
	if c.Hkv != c.Hq && !w.caps.GQA {
		group = c.Hq / c.Hkv
		r.Hkv = c.Hq
		r.K, r.V = repeatHeads(k, c.B, c.Hkv, group, c.N*c.D), repeatHeads(v, c.B, c.Hkv, group, c.N*c.Dv)
		r.DK0, r.DV0 = nil, nil
	}
	resp, err := w.impl.Attention(r)
	if err == nil && resp.Err == "" {
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
// when c cannot be expressed.
func (w *wrapped) request(c *attention.Config) (*Request, string) {
	caps := w.caps
	r := &Request{B: c.B, Hq: c.Hq, Hkv: c.Hkv, M: c.M, N: c.N, D: c.D, Dv: c.Dv, Causal: c.Causal, Window: c.Window}
	if c.Convention != attention.Positions {
		if !caps.Conventions {
			return nil, "needs a " + c.Convention.String() + " causal convention, a parameter the implementation does not take"
		}
		r.Convention = c.Convention.String()
	}
	if c.M != c.N && !caps.KVCache {
		return nil, "needs M ≠ N (a chunk against a cache)"
	}
	if c.Hkv != c.Hq && caps.GQA && w.card != nil && w.card.GQA != GQAContiguous {
		return nil, "needs the contiguous GQA head mapping; the implementation's is " + w.card.GQA
	}
	// without GQA, call repeats K and V per query head (see expand)
	scale := c.ScaleValue()
	switch {
	case caps.Scale:
		r.Scale = scale
	case w.card != nil && w.card.Scale != ScaleInvSqrtD:
		return nil, "needs the scale 1/√D; the implementation's default is " + w.card.Scale
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
		return r, ""
	case caps.Has(MaskBool):
		if padQ && !caps.Has(MaskValidity) {
			return nil, "needs padding queries (validity): a boolean mask cannot say a row is padding"
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
		return r, ""
	case len(missing) > 0 || !caps.Has(MaskCausal):
		return nil, "needs " + strings.Join(missing, ", ") + " masks"
	}
	// the causal flag alone: right only where the implementation's
	// alignment is attnlab's position rule
	if c.Causal && c.M != c.N && w.card != nil {
		want := w.card.CausalMLtN
		if c.M > c.N {
			want = w.card.CausalMGtN
		}
		if want != AlignPosition && want != AlignBottomRight {
			return nil, fmt.Sprintf("needs the position rule at M ≠ N; the causal flag aligns %s", want)
		}
	}
	return r, ""
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

// runChecks runs every check of the attention suite on impl.
func runChecks(ctx context.Context, w *wrapped) ([]CheckResult, error) {
	var out []CheckResult
	for _, c := range checks.Attention().Checks {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res := CheckResult{Name: c.Name, Kind: string(c.Kind)}
		if why, ok := notApplicable[c.Name]; ok && !(c.Name == "accumulates" && w.caps.Accumulates) && !(c.Name == "conventions" && w.caps.Conventions) {
			res.Status, res.Detail = Skip, "not applicable: "+why
			out = append(out, res)
			continue
		}
		var missing []string
		for _, n := range needs[c.Name] {
			if !w.caps.has(n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			res.Status, res.Detail = Skip, "needs "+strings.Join(missing, ", ")
			out = append(out, res)
			continue
		}
		w.skip = ""
		r := c.Run(w.checksImpl())
		switch {
		case w.fatal != nil:
			return out, w.fatal
		case w.skip != "":
			res.Status, res.Detail = Skip, w.skip
		case r.Pass:
			res.Status, res.Detail = Pass, r.Detail
		default:
			res.Status, res.Detail = Fail, r.Detail
		}
		out = append(out, res)
	}
	return out, nil
}
