package adapters_test

import (
	"testing"

	"github.com/attnlab/attnlab/conform"
)

// ---------------------------------------------------------------- torchtext 0.14 ScaledDotProduct

func TestTorchtextScaledDotProduct(t *testing.T) {
	a := startShipped(t, "torchtext-sdp")
	checkCaps(t, a, conform.Capabilities{DTypes: []string{"float32", "float64"}, Gradients: true,
		Masks: []string{"bool"}, KVCache: true})
	for _, dtype := range []string{"float64", "float32"} {
		t.Run(dtype, func(t *testing.T) {
			for _, c := range []struct {
				name string
				s    shape
				set  func(r *conform.Request)
			}{
				{"no mask", shape{2, 2, 2, 4, 4, 4, 4}, nil},
				// the adapter passes ~mask: with the module's True = blocked,
				// these agree with attnlab's mask only if the polarity is the
				// opposite of attnlab's (True = may attend)
				{"causal with a cache", shape{2, 2, 2, 3, 7, 4, 4}, func(r *conform.Request) { r.Causal = true }},
				{"window and key padding", shape{2, 2, 2, 5, 5, 4, 4}, func(r *conform.Request) {
					r.Causal, r.Window, r.KValid = true, 2, []int64{1, 1, 1, 1, 0, 1, 1, 0, 1, 1}
				}},
				{"Dv > D", shape{1, 2, 2, 3, 5, 3, 7}, func(r *conform.Request) { r.Causal = true }},
				{"Dv < D", shape{1, 2, 2, 3, 5, 4, 2}, nil},
			} {
				t.Run(c.name, func(t *testing.T) {
					r := newRequest(uint64(70+len(c.name)), c.s, dtype, true)
					if c.set != nil {
						c.set(r)
					}
					compare(t, r, call(t, a, asBool(r)), reference(t, r))
				})
			}
			// a valid row that sees no key: every score is -1e8, the softmax
			// uniform, the row the mean of V; its query gets no gradient
			e := newRequest(75, shape{1, 2, 2, 3, 5, 4, 4}, dtype, true)
			e.Mask = make([]bool, e.M*e.N)
			for i := range e.M {
				for j := range e.N {
					e.Mask[i*e.N+j] = i != 1 && j <= i+2
				}
			}
			got := call(t, a, e)
			var mean []float64 // per head, the mean of V's rows
			for h := range e.Hq {
				for d := range e.Dv {
					s := 0.0
					for j := range e.N {
						s += e.V[(h*e.N+j)*e.Dv+d]
					}
					mean = append(mean, s/float64(e.N))
				}
			}
			closeTo(t, "o of the row with no visible key (uniform)", rowValues(e, got.O, 0, 1), mean, tolerance(dtype))
			for h := range e.Hq {
				if d := describe(got.DQ[(h*e.M+1)*e.D:][:e.D]); d != "zero" {
					t.Errorf("head %d: dq of the row with no visible key %s, want zero", h, d)
				}
			}
		})
	}
	t.Run("error response", func(t *testing.T) {
		bad := newRequest(76, shape{1, 2, 2, 3, 3, 4, 4}, "float64", false)
		bad.Causal = true // no causal flag: the adapter refuses it
		resp, err := a.Attention(bad)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Err == "" {
			t.Fatal("a causal flag was answered though the module has none")
		}
		t.Logf("causal flag: error response %q", resp.Err)
		good := newRequest(77, shape{1, 2, 2, 3, 3, 4, 4}, "float64", false)
		good.Causal = true
		closeTo(t, "o after an error response", call(t, a, asBool(good)).O, reference(t, good).O, tolerance("float64"))
	})
}
