package main

import (
	"strings"
	"testing"

	"github.com/attnlab/attnlab/conform"
	"github.com/gomlx/gomlx/backends/simplego"
)

func newAdapter(t *testing.T, maskedSoftmax bool) *adapter {
	t.Helper()
	backend, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	return &adapter{backend: backend, maskedSoftmax: maskedSoftmax}
}

// TestPanicIsAnErrorResponse: a panic inside a request (here an index out
// of range on a q shorter than its shape says) is that request's error
// response, and the adapter answers the next one.
func TestPanicIsAnErrorResponse(t *testing.T) {
	for _, maskedSoftmax := range []bool{false, true} {
		a := newAdapter(t, maskedSoftmax)
		r := &conform.Request{B: 1, Hq: 1, Hkv: 1, M: 2, N: 2, D: 2, Dv: 2, DType: "float64",
			Q: []float64{1}, K: make([]float64, 4), V: make([]float64, 4)}
		resp, err := a.Attention(r)
		if err != nil || !strings.HasPrefix(resp.Err, "gomlx panicked: ") || strings.Contains(resp.Err, "\n") {
			t.Fatalf("masked softmax %v: %+v, %v; want an error response of one line", maskedSoftmax, resp, err)
		}
		r.Q = []float64{1, 0, 0, 1}
		r.V = []float64{1, 2, 3, 4}
		resp, err = a.Attention(r)
		if err != nil || resp.Err != "" || len(resp.O) != 4 {
			t.Fatalf("masked softmax %v, after the panic: %+v, %v", maskedSoftmax, resp, err)
		}
	}
}

// TestLayout: toLayer and fromLayer are inverse permutations between
// [B, H, L, d] and [B, L, H·d].
func TestLayout(t *testing.T) {
	const B, H, L, d = 2, 3, 4, 5
	x := make([]float64, B*H*L*d)
	for i := range x {
		x[i] = float64(i)
	}
	y := toLayer(x, B, H, L, d)
	// element (b, h, l, e) goes to ((b·L + l)·H + h)·d + e
	if got, want := y[((1*L+2)*H+1)*d+3], x[((1*H+1)*L+2)*d+3]; got != want {
		t.Errorf("toLayer: %v, want %v", got, want)
	}
	z := fromLayer(y, B, H, L, d)
	for i := range x {
		if z[i] != x[i] {
			t.Fatalf("fromLayer(toLayer(x))[%d] = %v, want %v", i, z[i], x[i])
		}
	}
}
