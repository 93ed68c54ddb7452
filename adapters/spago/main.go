// Command spago is attnlab's conformance adapter for spaGO's attention
// core, attention.ScaledDotProductAttention (pure Go, its own automatic
// differentiation), the function its selfattention and multiheadattention
// models call, with and without a key/value cache. Run it by name from a
// checkout of attnlab,
//
//	attnlab conform -exec spago
//
// or build it and name the binary:
//
//	(cd adapters/spago && go build -o spago-adapter .)
//	attnlab conform -exec adapters/spago/spago-adapter
//
// The core is single-head: it takes the queries as a list of vectors, the
// keys [N, D] and values [N, Dv] as matrices, a scale factor and a causal
// flag, and returns one output vector per query. The adapter calls it once
// per batch item and head, with no projection around it, and hands it the
// request's slices unchanged. What it passes, declared in the hello:
//
//   - "causal": the core's useCausalMask. The models pass the same flag
//     after appending the chunk's keys to the cache (selfattention.Model
//     Forward with a Cache), so what the card measures for M ≠ N is what a
//     model decoding with a cache gets.
//   - "kv_cache": the core takes any N.
//   - "scale": the core's scaleFactor; without one the adapter passes
//     1/√D, the value multiheadattention.New gives its heads (the core has
//     no default of its own).
//   - gradients (ag.Backward from do on every output), float32 and float64.
//   - no boolean mask, no validity (the core has neither), no lse, no GQA.
//
// A panic of spaGO is the answer to that request, an error response with
// the panic's first line, not a crash of the adapter.
package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"

	"github.com/attnlab/attnlab/conform"
	"github.com/nlpodyssey/spago/ag"
	"github.com/nlpodyssey/spago/mat"
	"github.com/nlpodyssey/spago/mat/float"
	"github.com/nlpodyssey/spago/nn/attention"
)

type core struct{}

func (core) Capabilities() conform.Capabilities {
	return conform.Capabilities{
		Name:    "spaGO attention.ScaledDotProductAttention (the core of its self- and multi-head attention)",
		Version: "spago " + moduleVersion("github.com/nlpodyssey/spago"),
		DTypes:  []string{"float64", "float32"}, Gradients: true, KVCache: true, Scale: true,
		Masks: []string{conform.MaskCausal},
	}
}

// Attention runs one request. A panic of spaGO is the request's error
// response.
func (core) Attention(r *conform.Request) (resp *conform.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = &conform.Response{Err: "spago panicked: " + firstLine(fmt.Sprint(p))}, nil
		}
	}()
	if r.Hkv != r.Hq {
		return &conform.Response{Err: fmt.Sprintf("the core is single-head: one K/V head per query head, Hkv = %d, Hq = %d", r.Hkv, r.Hq)}, nil
	}
	if r.DType == "float32" {
		return run[float32](r), nil
	}
	return run[float64](r), nil
}

// run calls the core once per batch item and head, in dtype T.
func run[T float.DType](r *conform.Request) *conform.Response {
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(r.D))
	}
	M, N, D, Dv := r.M, r.N, r.D, r.Dv
	grads := r.DO != nil
	resp := &conform.Response{O: make([]float64, r.B*r.Hq*M*Dv)}
	if grads {
		resp.DQ, resp.DK, resp.DV = make([]float64, len(r.Q)), make([]float64, len(r.K)), make([]float64, len(r.V))
	}
	for bh := range r.B * r.Hq {
		q := make([]mat.Tensor, M)
		for i := range M {
			q[i] = mat.NewDense[T](mat.WithBacking(convert[T](r.Q[(bh*M+i)*D:][:D])), mat.WithGrad(grads))
		}
		k := mat.NewDense[T](mat.WithShape(N, D), mat.WithBacking(convert[T](r.K[bh*N*D:][:N*D])), mat.WithGrad(grads))
		v := mat.NewDense[T](mat.WithShape(N, Dv), mat.WithBacking(convert[T](r.V[bh*N*Dv:][:N*Dv])), mat.WithGrad(grads))
		out, _ := attention.ScaledDotProductAttention(q, k, v, mat.Scalar(T(scale)), r.Causal)
		for i, o := range out {
			copy(resp.O[(bh*M+i)*Dv:][:Dv], o.Value().Data().F64())
		}
		if !grads {
			continue
		}
		for i, o := range out {
			o.AccGrad(mat.NewDense[T](mat.WithBacking(convert[T](r.DO[(bh*M+i)*Dv:][:Dv]))))
		}
		if err := ag.Backward(out...); err != nil {
			panic(err)
		}
		for i := range M {
			gradInto(resp.DQ[(bh*M+i)*D:][:D], q[i])
		}
		gradInto(resp.DK[bh*N*D:][:N*D], k)
		gradInto(resp.DV[bh*N*Dv:][:N*Dv], v)
	}
	return resp
}

// gradInto copies x's gradient into dst (zeros when it got none).
func gradInto(dst []float64, x mat.Tensor) {
	if g := x.Grad(); g != nil {
		copy(dst, g.Data().F64())
	}
}

func convert[T float.DType](x []float64) []T {
	out := make([]T, len(x))
	for i, v := range x {
		out[i] = T(v)
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// moduleVersion is the version of module path this binary was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}

func main() {
	protocol := os.Stdout
	os.Stdout = os.Stderr // the library's prints must not reach the protocol
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "usage: %s (no arguments)\n", os.Args[0])
		os.Exit(2)
	}
	if err := conform.Serve(os.Stdin, protocol, core{}); err != nil {
		fmt.Fprintln(os.Stderr, "spago adapter:", err)
		os.Exit(1)
	}
}
