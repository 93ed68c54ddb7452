package conform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/safetensors"
)

// TestRequestTranslation: how a configuration becomes a request under each
// set of declared mask kinds, or why it cannot.
func TestRequestTranslation(t *testing.T) {
	plain := func() *attention.Config {
		return &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 3, N: 3, D: 2, Dv: 2, Causal: true}
	}
	padded := func() *attention.Config {
		c := plain()
		c.QValid, c.KValid = []bool{true, true, false}, []bool{true, true, false}
		return c
	}
	keyPadded := func() *attention.Config {
		c := plain()
		c.KValid = []bool{false, true, true}
		return c
	}
	windowed := func() *attention.Config { c := plain(); c.Window = 2; return c }
	segmented := func() *attention.Config { c := plain(); c.QSeg, c.KSeg = []int{0, 1, 1}, []int{0, 1, 1}; return c }
	positioned := func() *attention.Config { c := plain(); c.QPos, c.KPos = []int{0, 1, 2}, []int{0, 1, 2}; return c }
	chunk := &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 2, N: 4, D: 2, Dv: 2, Causal: true}
	all := []string{MaskCausal, MaskBool, MaskPositions, MaskValidity, MaskSegments, MaskWindow}
	for _, tc := range []struct {
		name   string
		masks  []string
		c      *attention.Config
		reason string // "" : a request
		check  func(t *testing.T, r *Request)
	}{
		{"causal flag", []string{MaskCausal}, plain(), "", func(t *testing.T, r *Request) {
			if !r.Causal || r.Mask != nil || r.QPos != nil {
				t.Errorf("%+v", r)
			}
		}},
		{"no causal flag", []string{MaskPositions}, plain(), "", func(t *testing.T, r *Request) {
			if !r.Causal || r.Mask != nil {
				t.Errorf("positions carry the causal rule: %+v", r)
			}
		}},
		{"causal undeclared", []string{MaskValidity}, plain(), "needs causal masks", nil},
		{"padding undeclared", []string{MaskCausal}, padded(), "needs validity masks", nil},
		{"key padding undeclared", []string{MaskCausal}, keyPadded(), "needs validity masks", nil},
		{"window undeclared", []string{MaskCausal}, windowed(), "needs window masks", nil},
		{"segments undeclared", []string{MaskCausal, MaskValidity}, segmented(), "needs segments masks", nil},
		{"positions undeclared", []string{MaskCausal}, positioned(), "needs positions masks", nil},
		{"query positions alone, undeclared", []string{MaskCausal}, func() *attention.Config { c := plain(); c.QPos = []int{0, 1, 2}; return c }(), "needs positions masks", nil},
		{"key positions alone, undeclared", []string{MaskCausal}, func() *attention.Config { c := plain(); c.KPos = []int{0, 1, 2}; return c }(), "needs positions masks", nil},
		{"two undeclared", []string{MaskCausal}, func() *attention.Config { c := padded(); c.Window = 2; return c }(), "needs validity, window masks", nil},
		{"bool without validity, padding queries", []string{MaskBool}, padded(), "needs padding queries (validity)", nil},
		{"bool, padding keys only", []string{MaskBool}, keyPadded(), "", func(t *testing.T, r *Request) {
			if r.Mask == nil || r.Causal || r.Window != 0 || r.KValid != nil || r.Mask[0] || !r.Mask[1*3+1] {
				t.Errorf("a boolean mask from the rule, no flags, no validity: %+v", r)
			}
		}},
		{"bool and validity", []string{MaskBool, MaskValidity}, padded(), "", func(t *testing.T, r *Request) {
			if r.Mask == nil || !slices.Equal(r.QValid, []int64{1, 1, 0}) || !slices.Equal(r.KValid, []int64{1, 1, 0}) {
				t.Errorf("%+v", r)
			}
		}},
		{"bool for a window", []string{MaskBool}, windowed(), "", func(t *testing.T, r *Request) {
			if r.Window != 0 || r.Mask[2*3+0] || !r.Mask[2*3+1] {
				t.Errorf("the window in the boolean mask: %+v", r)
			}
		}},
		{"every kind", all, func() *attention.Config {
			c := segmented()
			c.QValid = []bool{true, true, false}
			c.Window = 2
			return c
		}(), "", func(t *testing.T, r *Request) {
			if r.Mask != nil || !slices.Equal(r.QSeg, []int64{0, 1, 1}) || !slices.Equal(r.QValid, []int64{1, 1, 0}) || r.Window != 2 {
				t.Errorf("the tensors as they are: %+v", r)
			}
		}},
		{"positions, a window undeclared, bool", []string{MaskPositions, MaskBool}, windowed(), "", func(t *testing.T, r *Request) {
			if r.Mask == nil {
				t.Errorf("a window it cannot take goes into a boolean mask: %+v", r)
			}
		}},
		{"a chunk without a cache", []string{MaskCausal}, chunk, "needs M ≠ N", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &wrapped{caps: Capabilities{Name: "x", DTypes: []string{"float64"}, Masks: tc.masks, Scale: true, GQA: true}}
			r, reason, _ := w.request(tc.c)
			switch {
			case tc.reason == "" && (r == nil || reason != ""):
				t.Fatalf("refused: %q", reason)
			case tc.reason != "" && (r != nil || !strings.Contains(reason, tc.reason)):
				t.Fatalf("request %v, reason %q; want refused with %q", r, reason, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestRequestCausalAlignment: with only the causal flag, a chunk is sent
// only to an implementation whose card aligns it by position (or bottom
// right, the same under default positions); M = N, or no causal mask,
// is sent whatever the alignment.
func TestRequestCausalAlignment(t *testing.T) {
	chunk := &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 2, N: 4, D: 2, Dv: 2, Causal: true}
	wide := &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 4, N: 2, D: 2, Dv: 2, Causal: true}
	square := &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 3, N: 3, D: 2, Dv: 2, Causal: true}
	full := &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 2, N: 4, D: 2, Dv: 2}
	for _, tc := range []struct {
		lt, gt string
		c      *attention.Config
		ok     bool
	}{
		{AlignPosition, AlignTopLeft, chunk, true},
		{AlignBottomRight, AlignTopLeft, chunk, true},
		{AlignTopLeft, AlignPosition, chunk, false},
		{AlignTopLeft, AlignPosition, wide, true},
		{AlignPosition, AlignTopLeft, wide, false},
		// every alignment agrees at M = N, and without the causal flag
		{AlignTopLeft, AlignTopLeft, square, true},
		{AlignTopLeft, AlignTopLeft, full, true},
	} {
		w := &wrapped{caps: Capabilities{Name: "x", DTypes: []string{"float64"}, Masks: []string{MaskCausal}, Scale: true, GQA: true, KVCache: true},
			card: &Card{CausalMLtN: tc.lt, CausalMGtN: tc.gt}}
		r, reason, _ := w.request(tc.c)
		if (r != nil) != tc.ok {
			t.Errorf("M=%d N=%d, card %s / %s: request %v, reason %q", tc.c.M, tc.c.N, tc.lt, tc.gt, r != nil, reason)
		}
		if !tc.ok && !strings.Contains(reason, "needs the position rule at M ≠ N; the causal flag aligns") {
			t.Errorf("reason %q", reason)
		}
	}
}

// TestDescribeConfig names every feature of a configuration.
func TestDescribeConfig(t *testing.T) {
	c := &attention.Config{B: 2, Hq: 4, Hkv: 2, M: 3, N: 5, D: 8, Dv: 8, Causal: true, Window: 3,
		QValid: []bool{true, true, true, true, true, false}, QSeg: []int{0, 0, 0, 0, 0, 0}, KSeg: make([]int, 10),
		Softcap: 2.5, Alibi: []float64{1, 1, 1, 1}, Sinks: []float64{0, 0, 0, 0}}
	want := "B=2 Hq=4 Hkv=2 M=3 N=5 D=8, causal, window 3, padding, segments, softcap 2.5, ALiBi, sinks"
	if got := describeConfig(c); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	k := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: 1, N: 1, D: 1, Dv: 1, KValid: []bool{true}}
	if got := describeConfig(k); got != "B=1 Hq=1 Hkv=1 M=1 N=1 D=1, padding" {
		t.Errorf("%q", got)
	}
	if !sameReason([]string{"configuration 1 (a): x", "configuration 2 (b): x"}) || sameReason([]string{"c 1 (a): x", "c 2 (b): y"}) {
		t.Error("sameReason")
	}
}

// lseUndeclared declares no lse and answers one all the same: what it
// does not declare is not read.
type lseUndeclared struct{ *emul }

func (l lseUndeclared) Capabilities() Capabilities {
	c := l.emul.Capabilities()
	c.LSE = false
	return c
}

func (l lseUndeclared) Attention(r *Request) (*Response, error) {
	q := *r
	q.WantLSE = true
	return l.emul.Attention(&q)
}

// TestCallTranslation: a configuration sent through call under each way an
// implementation may differ from attnlab's conventions (no GQA, the
// interleaved head mapping, no explicit scale and another default, no lse,
// gradients added into what it is given) comes back as attnlab's
// reference answers it: O and lse overwritten, the gradients added into
// the buffers once.
func TestCallTranslation(t *testing.T) {
	cfg := func() *attention.Config {
		return &attention.Config{B: 2, Hq: 6, Hkv: 2, M: 3, N: 5, D: 4, Dv: 3, Causal: true, Scale: 0.7}
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	fill := func(n int, v float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = v
			if math.IsNaN(v) {
				x[i] = rnd.NormFloat64()
			}
		}
		return x
	}
	c0 := cfg()
	q, k, v, do := fill(c0.B*c0.Hq*c0.M*c0.D, math.NaN()), fill(c0.B*c0.Hkv*c0.N*c0.D, math.NaN()), fill(c0.B*c0.Hkv*c0.N*c0.Dv, math.NaN()), fill(c0.B*c0.Hq*c0.M*c0.Dv, math.NaN())
	// what the gradient buffers hold before the call
	dq0, dk0, dv0 := fill(len(q), math.NaN()), fill(len(k), math.NaN()), fill(len(v), math.NaN())
	ref := struct{ o, lse, dq, dk, dv []float64 }{fill(len(do), 0), fill(len(do)/c0.Dv, 0), slices.Clone(dq0), slices.Clone(dk0), slices.Clone(dv0)}
	if err := checks.AttentionReference.Run(ref.o, ref.lse, ref.dq, ref.dk, ref.dv, q, k, v, do, c0); err != nil {
		t.Fatal(err)
	}
	noScale := func(e *emul) { e.caps.Scale = false; e.scale = func(D int) float64 { return 1 / float64(D) } }
	for _, tc := range []struct {
		name string
		impl Implementation
		card *Card
		sent func(r *Request) string // what the request must be ("" : right)
	}{
		{"as attnlab", plain("plain", nil), &Card{GQA: GQAContiguous, Scale: ScaleInvSqrtD}, func(r *Request) string {
			return want(fmt.Sprint(r.Hkv, r.Scale, r.WantLSE, r.DQ0 == nil), "2 0.7 true true")
		}},
		{"no GQA", plain("mha", func(e *emul) { e.caps.GQA = false }), &Card{GQA: GQAUnsupported, Scale: ScaleInvSqrtD}, func(r *Request) string {
			return want(fmt.Sprint(r.Hkv, len(r.K), len(r.V), slices.Equal(r.K[:c0.N*c0.D], r.K[c0.N*c0.D:2*c0.N*c0.D])), fmt.Sprint(6, 3*len(k), 3*len(v), true))
		}},
		{"a head mapping conform cannot name", plain("other mapping", nil), &Card{GQA: AlignOther, Scale: ScaleInvSqrtD}, func(r *Request) string {
			return want(fmt.Sprint(r.Hkv), "6")
		}},
		{"interleaved", plain("interleaved", func(e *emul) { e.gqa = GQAInterleaved }), &Card{GQA: GQAInterleaved, Scale: ScaleInvSqrtD}, func(r *Request) string {
			// query head 1 (K/V head 0, second of its group of 3) goes to
			// place 2, which reads K/V head 2 mod 2 = 0
			hd := c0.M * c0.D
			return want(fmt.Sprint(r.Hkv, slices.Equal(r.Q[2*hd:3*hd], q[hd:2*hd])), "2 true")
		}},
		{"no scale, 1/D by default", plain("1/D", noScale), &Card{GQA: GQAContiguous, Scale: ScaleInvD}, func(r *Request) string {
			return want(fmt.Sprint(r.Scale, r.Q[0] == q[0]*0.7*4), "0 true")
		}},
		{"no scale, not measured yet", plain("1/√D", func(e *emul) { e.caps.Scale = false }), nil, func(r *Request) string {
			return want(fmt.Sprint(r.Scale, math.Abs(r.Q[0]-q[0]*0.7*2) < 1e-15), "0 true")
		}},
		{"no lse", plain("no lse", func(e *emul) { e.caps.LSE = false }), &Card{GQA: GQAContiguous, Scale: ScaleInvSqrtD}, func(r *Request) string {
			return want(fmt.Sprint(r.WantLSE), "false")
		}},
		{"no lse declared, one answered anyway", lseUndeclared{plain("lse anyway", nil)}, &Card{GQA: GQAContiguous, Scale: ScaleInvSqrtD}, func(r *Request) string {
			return want(fmt.Sprint(r.WantLSE), "false")
		}},
		{"interleaved, adds into the gradients", plain("interleaved +=", func(e *emul) { e.gqa, e.caps.Accumulates = GQAInterleaved, true }),
			&Card{GQA: GQAInterleaved, Scale: ScaleInvSqrtD}, func(r *Request) string {
				// the gradients to add into go with their heads
				hd := c0.M * c0.D
				return want(fmt.Sprint(r.Hkv, slices.Equal(r.DQ0[2*hd:3*hd], dq0[hd:2*hd]), slices.Equal(r.DK0, dk0), slices.Equal(r.DV0, dv0)), "2 true true true")
			}},
		{"adds into the gradients", Reference(), &Card{GQA: GQAContiguous, Scale: ScaleInvSqrtD}, func(r *Request) string {
			return want(fmt.Sprint(slices.Equal(r.DQ0, dq0), slices.Equal(r.DK0, dk0), slices.Equal(r.DV0, dv0)), "true true true")
		}},
		{"adds into the gradients, no GQA, no scale", mhaOnly{Reference()}, &Card{GQA: GQAUnsupported, Scale: ScaleInvSqrtD}, func(r *Request) string {
			return want(fmt.Sprint(r.DQ0 == nil, r.DK0 == nil, r.DV0 == nil, r.Hkv, r.Scale), "true true true 6 0")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{Implementation: tc.impl}
			w := &wrapped{impl: rec, caps: tc.impl.Capabilities(), card: tc.card}
			got := struct{ o, lse, dq, dk, dv []float64 }{fill(len(do), 9), fill(len(do)/c0.Dv, 9), slices.Clone(dq0), slices.Clone(dk0), slices.Clone(dv0)}
			if err := w.call("float64", got.o, got.lse, got.dq, got.dk, got.dv, q, k, v, do, cfg()); err != nil || w.skip != "" {
				t.Fatalf("%v (skip %q)", err, w.skip)
			}
			if len(rec.reqs) != 1 {
				t.Fatalf("%d requests", len(rec.reqs))
			}
			if msg := tc.sent(rec.reqs[0]); msg != "" {
				t.Errorf("request: %s", msg)
			}
			if !w.caps.LSE {
				for i := range got.lse {
					if !math.IsNaN(got.lse[i]) {
						t.Fatalf("lse[%d] = %g without lse, want NaN", i, got.lse[i])
					}
				}
				got.lse = ref.lse
			}
			for _, p := range []struct {
				name      string
				got, want []float64
			}{{"o", got.o, ref.o}, {"lse", got.lse, ref.lse}, {"dq", got.dq, ref.dq}, {"dk", got.dk, ref.dk}, {"dv", got.dv, ref.dv}} {
				if e := relDiff(p.got, p.want); !(e < 1e-12) {
					t.Errorf("%s off by %.2g", p.name, e)
				}
			}
		})
	}
}

// TestCallRefusals: what an implementation cannot be asked is skipped with
// the reason, an error response is the check's failure, and a failure of
// its plumbing is fatal: no request is sent after it.
func TestCallRefusals(t *testing.T) {
	c := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: 2, N: 2, D: 2, Dv: 2, Causal: true}
	buf := func() []float64 { return make([]float64, 4) }
	q, k, v, do := buf(), buf(), buf(), buf()
	lse := make([]float64, 2)
	fwd := &recorder{Implementation: plain("forward only", func(e *emul) { e.caps.Gradients = false })}
	w := &wrapped{impl: fwd, caps: fwd.Capabilities()}
	if err := w.call("float64", buf(), lse, buf(), buf(), buf(), q, k, v, do, c); err != errSkip || w.skip != "needs gradients" || !w.undeclared || len(fwd.reqs) != 0 {
		t.Errorf("gradients of a forward-only implementation: %v, skip %q (undeclared %v), %d sent", err, w.skip, w.undeclared, len(fwd.reqs))
	}
	if err := w.call("float64", buf(), lse, nil, nil, nil, q, k, v, nil, c); err != nil || len(fwd.reqs) != 1 {
		t.Errorf("its forward: %v, %d sent", err, len(fwd.reqs))
	}
	refusing := plain("refuses", func(e *emul) { e.refuse = func(*Request) bool { return true } })
	w = &wrapped{impl: refusing, caps: refusing.Capabilities()}
	if err := w.call("float64", buf(), lse, buf(), buf(), buf(), q, k, v, do, c); err == nil || err.Error() != "refused" || w.fatal != nil {
		t.Errorf("an error response: %v (fatal %v), want the refusal, not fatal", err, w.fatal)
	}
	crashed := &failAt{Implementation: plain("crashes", nil), at: 1}
	w = &wrapped{impl: crashed, caps: crashed.Capabilities()}
	for range 2 {
		if err := w.call("float64", buf(), lse, buf(), buf(), buf(), q, k, v, do, c); err != errCrashed || w.fatal != errCrashed {
			t.Errorf("a crash: %v (fatal %v)", err, w.fatal)
		}
	}
	if crashed.calls != 1 {
		t.Errorf("%d requests, want none after the crash", crashed.calls)
	}
}

// TestAgreesWithReferenceDetail: the comparison with the reference says
// which configurations it ran and which tensors it compared, and why it
// could not run the others: one reason for all of them said once.
func TestAgreesWithReferenceDetail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		impl   *emul
		card   *Card
		status string
		detail string // the detail's beginning
	}{
		{"everything", plain("plain", nil), nil, Pass, "configurations 0, 1, 2, 3, 4 of 5: o, lse, dq, dk, dv equal the float64 reference's within 1e-09 (worst "},
		{"forward and lse", plain("forward", func(e *emul) { e.caps.Gradients = false }), nil, Pass, "configurations 0, 1, 2, 3, 4 of 5: o, lse equal"},
		{"gradients, no lse", plain("no lse", func(e *emul) { e.caps.LSE = false }), nil, Pass, "configurations 0, 1, 2, 3, 4 of 5: o, dq, dk, dv equal"},
		{"float32, no cache", plain("f32", func(e *emul) { e.f32, e.caps.DTypes, e.caps.KVCache = true, []string{"float32"}, false }), nil, Pass,
			"configurations 0, 1, 3, 4 of 5: o, lse, dq, dk, dv equal the float64 reference's within 1e-04 (worst "},
		{"a default scale it cannot correct for", plain("0.3", func(e *emul) { e.caps.Scale = false }), &Card{Scale: "other"}, Skip,
			"every configuration: needs a scale other than the default, which the implementation does not take, and its default (other) is not one conform can correct for"},
		{"that, and no cache", plain("0.3", func(e *emul) { e.caps.Scale, e.caps.KVCache = false, false }), &Card{Scale: "other"}, Skip,
			"configuration 0 (B=1 Hq=2 Hkv=2 M=7 N=7 D=5, causal): needs a scale other than the default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &wrapped{impl: tc.impl, caps: tc.impl.Capabilities(), card: tc.card}
			res, err := agreesWithReference(w, "agrees-with-reference", referenceConfigs())
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status || !strings.HasPrefix(res.Detail, tc.detail) || res.Undeclared {
				t.Errorf("%s (undeclared %v): %s\nwant %s: %s…", res.Status, res.Undeclared, res.Detail, tc.status, tc.detail)
			}
		})
	}
	// right padding: the lse of padding query rows, which no two
	// implementations agree on, is left out wherever the rows are
	valid := []bool{true, true, true, false, true, true, false, false}
	padded := []*attention.Config{{B: 2, Hq: 2, Hkv: 1, M: 4, N: 4, D: 4, Dv: 4, Causal: true, QValid: valid, KValid: valid}}
	e := plain("padded", nil)
	if res, err := agreesWithReference(&wrapped{impl: e, caps: e.caps}, "agrees-with-reference", padded); err != nil || res.Status != Pass {
		t.Errorf("right padding: %s %s, %v", res.Status, res.Detail, err)
	}
}

// TestSinkGradOfTheLastCall: the checks' dσ is the one the implementation
// answered to the last call with sinks and dO, added into what the check
// gives; asked of another call it panics (the check then fails).
func TestSinkGradOfTheLastCall(t *testing.T) {
	o, do := []float64{1, 2}, []float64{3, 4}
	w := &wrapped{dsinks: []float64{0.5, -1}, sinkO: o, sinkDO: do}
	dsinks := []float64{1, 1}
	w.sinkGrad(dsinks, o, nil, do, nil)
	if !slices.Equal(dsinks, []float64{1.5, 0}) {
		t.Errorf("dsinks %v, want the answered [0.5 -1] added into [1 1]", dsinks)
	}
	for _, c := range []struct {
		name  string
		o, do []float64
		ans   []float64
	}{
		{"another o", []float64{1, 2}, do, w.dsinks}, {"another dO", o, []float64{3, 4}, w.dsinks}, {"no dsinks answered", o, do, nil},
		{"no o", nil, do, w.dsinks},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			w := &wrapped{dsinks: c.ans, sinkO: o, sinkDO: do}
			w.sinkGrad([]float64{0, 0}, c.o, nil, c.do, nil)
		})
	}
}

// TestRequestFile: a request's file carries each field under the protocol's
// name, with the shape and dtype docs/conform-protocol.md gives; the
// optional metadata only when set.
func TestRequestFile(t *testing.T) {
	r := randomRequest(3, 2, 4, 2, 2, 5, 3)
	r.Dv, r.V = 2, make([]float64, 2*2*5*2)
	r.DType = "float32"
	r.Causal, r.Scale, r.Window, r.WantLSE, r.Convention, r.Softcap = true, 0.25, 3, true, "top-left", 30
	r.DO = make([]float64, 2*4*2*2)
	r.DQ0, r.DK0, r.DV0 = make([]float64, len(r.Q)), make([]float64, len(r.K)), make([]float64, len(r.V))
	r.Sinks, r.Alibi = []float64{1, 2, 3, 4}, []float64{0.5, 0.25, 0.125, 0.0625}
	r.Mask = make([]bool, 2*2*5)
	r.Mask[3] = true
	r.QPos, r.KPos, r.QValid, r.KValid = []int64{3, 4, 3, 4}, []int64{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, []int64{1, 1, 1, 0}, []int64{1, 1, 1, 1, 1, 0, 1, 1, 1, 1}
	r.QSeg, r.KSeg = []int64{0, 0, 1, 1}, []int64{0, 0, 0, 0, 0, 1, 1, 1, 1, 1}
	f, err := r.file(7)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"op": "attention", "request": "7", "causal": "true", "past": "3", "scale": "0.25",
		"window": "3", "want_lse": "true", "convention": "top-left", "softcap": "30"}
	if !reflect.DeepEqual(f.Metadata, want) {
		t.Errorf("metadata %v, want %v", f.Metadata, want)
	}
	shapes := map[string][]int{"q": {2, 4, 2, 3}, "k": {2, 2, 5, 3}, "v": {2, 2, 5, 2}, "do": {2, 4, 2, 2},
		"dq": {2, 4, 2, 3}, "dk": {2, 2, 5, 3}, "dv": {2, 2, 5, 2}, "sinks": {4}, "alibi_slopes": {4},
		"mask": {2, 2, 5}, "q_pos": {2, 2}, "k_pos": {2, 5}, "q_valid": {2, 2}, "k_valid": {2, 5}, "q_seg": {2, 2}, "k_seg": {2, 5}}
	if names := f.Names(); len(names) != len(shapes) {
		t.Errorf("tensors %v, want %d", names, len(shapes))
	}
	for name, shape := range shapes {
		tn, ok := f.Tensors[name]
		wantType := safetensors.F32
		if tn != nil && (name == "mask" || strings.HasPrefix(name, "q_") || strings.HasPrefix(name, "k_")) {
			wantType = safetensors.I64
		}
		if !ok || !slices.Equal(tn.Shape, shape) || tn.DType != wantType {
			t.Errorf("%s: %+v, want %v %v", name, tn, wantType, shape)
		}
	}
	if m, _, _ := f.Int64("mask"); m[3] != 1 || m[2] != 0 {
		t.Errorf("mask %v: want 1 where the request's is true", m)
	}
	if q, _, _ := f.Float32("q"); q[5] != float32(r.Q[5]) {
		t.Errorf("q[5] = %v, want %v", q[5], r.Q[5])
	}

	// a float64 request at M = N with nothing optional: the required
	// metadata alone, and float64 tensors
	r = randomRequest(3, 1, 1, 1, 2, 2, 3)
	r.DType = "float64"
	if f, err = r.file(1); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"op": "attention", "request": "1", "causal": "false", "past": "0"}
	if !reflect.DeepEqual(f.Metadata, want) {
		t.Errorf("metadata %v, want %v", f.Metadata, want)
	}
	if q := f.Tensors["q"]; q == nil || q.DType != safetensors.F64 {
		t.Errorf("q: %+v, want F64", q)
	}
	if f.Has("mask") || f.Has("sinks") || f.Has("dq") {
		t.Errorf("tensors %v: an absent field is sent", f.Names())
	}
	// a tensor of the wrong size is the caller's mistake, named
	r.K = r.K[:3]
	if _, err := r.file(2); err == nil || !strings.Contains(err.Error(), "request k has 3 values, want 6") {
		t.Errorf("short k: %v", err)
	}
}
