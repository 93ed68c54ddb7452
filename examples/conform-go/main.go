// Command conform-go is an example adapter: it serves a plain Go attention
// kernel to attnlab conform over the protocol of docs/conform-protocol.md.
// Copy it, put your kernel in place of naiveAttention, declare what it can
// do in capabilities, and run
//
//	go build -o my-adapter . && attnlab conform -exec ./my-adapter
//
// The kernel here is the textbook one: scores, a row softmax, the weighted
// sum of values, forward only, in float64 and float32; a causal flag that
// aligns the last query with the last key (bottom-right, as FlashAttention
// 2.1 does), an optional boolean mask, GQA with contiguous groups. A query
// row that sees no key gets NaN, as the textbook softmax gives it (exp of
// −∞ − −∞); with -empty-row-error it is refused with an error naming the
// row, as attnlab's contract wants (docs/conform-your-kernel.md walks
// through both).
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/attnlab/attnlab/conform"
)

// kernel is this adapter's implementation under test.
type kernel struct {
	emptyRowError bool // refuse a query row that sees no key, instead of NaN
}

func (kernel) Capabilities() conform.Capabilities {
	return conform.Capabilities{
		Name: "naive Go attention (examples/conform-go)", Version: "1",
		DTypes: []string{"float64", "float32"}, LSE: true, GQA: true, KVCache: true, Scale: true,
		Masks: []string{conform.MaskCausal, conform.MaskBool},
	}
}

func (k kernel) Attention(r *conform.Request) (*conform.Response, error) {
	if r.DO != nil {
		return &conform.Response{Err: "this kernel has no backward"}, nil
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(r.D))
	}
	if k.emptyRowError {
		if b, i, ok := emptyRow(r); ok {
			return &conform.Response{Err: fmt.Sprintf("batch %d, query row %d sees no key", b, i)}, nil
		}
	}
	o, lse := naiveAttention(r, scale)
	if r.DType == "float32" { // this kernel computes in float64: round its answers
		for _, x := range [][]float64{o, lse} {
			for i := range x {
				x[i] = float64(float32(x[i]))
			}
		}
	}
	return &conform.Response{O: o, LSE: lse}, nil
}

// visible reports whether query row i of batch item b sees key j: the
// boolean mask when there is one, else the causal flag, bottom-right.
func visible(r *conform.Request, b, i, j int) bool {
	if r.Mask != nil {
		return r.Mask[(b*r.M+i)*r.N+j]
	}
	return !r.Causal || j <= i+r.N-r.M
}

// emptyRow finds a query row that sees no key.
func emptyRow(r *conform.Request) (b, i int, ok bool) {
	for b := range r.B {
		for i := range r.M {
			seen := false
			for j := range r.N {
				seen = seen || visible(r, b, i, j)
			}
			if !seen {
				return b, i, true
			}
		}
	}
	return 0, 0, false
}

// naiveAttention computes O = softmax(Q Kᵀ · scale, masked) V per head,
// query head h reading K/V head h / (Hq/Hkv).
func naiveAttention(r *conform.Request, scale float64) (o, lse []float64) {
	o, lse = make([]float64, r.B*r.Hq*r.M*r.Dv), make([]float64, r.B*r.Hq*r.M)
	group := r.Hq / r.Hkv
	s := make([]float64, r.N)
	for b := range r.B {
		for h := range r.Hq {
			kv := b*r.Hkv + h/group
			for i := range r.M {
				q := r.Q[((b*r.Hq+h)*r.M+i)*r.D:][:r.D]
				mx := math.Inf(-1)
				for j := range r.N {
					s[j] = math.Inf(-1)
					if visible(r, b, i, j) {
						k := r.K[(kv*r.N+j)*r.D:][:r.D]
						s[j] = 0
						for d := range r.D {
							s[j] += q[d] * k[d] * scale
						}
					}
					mx = max(mx, s[j])
				}
				var sum float64
				for j := range r.N {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				out := o[((b*r.Hq+h)*r.M+i)*r.Dv:][:r.Dv]
				for j := range r.N {
					v := r.V[(kv*r.N+j)*r.Dv:][:r.Dv]
					for d := range r.Dv {
						out[d] += s[j] / sum * v[d]
					}
				}
				lse[(b*r.Hq+h)*r.M+i] = mx + math.Log(sum)
			}
		}
	}
	return o, lse
}

func main() {
	var k kernel
	flag.BoolVar(&k.emptyRowError, "empty-row-error", false, "refuse a query row that sees no key (an error response naming it) instead of answering NaN")
	flag.Parse()
	if err := conform.Serve(os.Stdin, os.Stdout, k); err != nil {
		fmt.Fprintln(os.Stderr, "conform-go:", err)
		os.Exit(1)
	}
}
