package conform

import (
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/attention"
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
// right, the same under default positions).
func TestRequestCausalAlignment(t *testing.T) {
	chunk := &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 2, N: 4, D: 2, Dv: 2, Causal: true}
	wide := &attention.Config{B: 1, Hq: 2, Hkv: 2, M: 4, N: 2, D: 2, Dv: 2, Causal: true}
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
