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
// 2.1 does), an optional boolean mask, GQA with contiguous groups.
package main

import (
	"fmt"
	"math"
	"os"

	"github.com/attnlab/attnlab/conform"
)

// kernel is this adapter's implementation under test.
type kernel struct{}

func (kernel) Capabilities() conform.Capabilities {
	return conform.Capabilities{
		Name: "naive Go attention (examples/conform-go)", Version: "1",
		DTypes: []string{"float64", "float32"}, LSE: true, GQA: true, KVCache: true, Scale: true,
		Masks: []string{conform.MaskCausal, conform.MaskBool},
	}
}

func (kernel) Attention(r *conform.Request) (*conform.Response, error) {
	if r.DO != nil {
		return &conform.Response{Err: "this kernel has no backward"}, nil
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(r.D))
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
					visible := !r.Causal || j <= i+r.N-r.M // bottom-right
					if r.Mask != nil {
						visible = r.Mask[(b*r.M+i)*r.N+j]
					}
					s[j] = math.Inf(-1)
					if visible {
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
	if err := conform.Serve(os.Stdin, os.Stdout, kernel{}); err != nil {
		fmt.Fprintln(os.Stderr, "conform-go:", err)
		os.Exit(1)
	}
}
