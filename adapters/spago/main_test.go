package main

import (
	"strings"
	"testing"

	"github.com/attnlab/attnlab/conform"
)

// TestPanicIsAnErrorResponse: a panic inside a request (here an index out
// of range on a q shorter than its shape says) is that request's error
// response, and the adapter answers the next one.
func TestPanicIsAnErrorResponse(t *testing.T) {
	r := &conform.Request{B: 1, Hq: 1, Hkv: 1, M: 2, N: 2, D: 2, Dv: 2, DType: "float64",
		Q: []float64{1}, K: make([]float64, 4), V: make([]float64, 4)}
	resp, err := core{}.Attention(r)
	if err != nil || !strings.HasPrefix(resp.Err, "spago panicked: ") || strings.Contains(resp.Err, "\n") {
		t.Fatalf("%+v, %v; want an error response of one line", resp, err)
	}
	r.Q = []float64{1, 0, 0, 1}
	r.V = []float64{1, 2, 3, 4}
	resp, err = core{}.Attention(r)
	if err != nil || resp.Err != "" || len(resp.O) != 4 {
		t.Fatalf("after the panic: %+v, %v", resp, err)
	}
}
