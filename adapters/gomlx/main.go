// Command gomlx is attnlab's conformance adapter for GoMLX, run on its
// pure-Go backend (SimpleGo, no cgo), with GoMLX's automatic
// differentiation for the gradients. It serves one of two implementations:
//
//	attnlab conform -exec gomlx-mha              # layers.MultiHeadAttention
//	attnlab conform -exec gomlx-masked-softmax   # graph.MaskedSoftmax between two Einsums
//
// by name from a checkout of attnlab (attnlab builds this module), or built
// and named as a command (CGO_ENABLED=0: the backend is pure Go):
//
//	go -C adapters/gomlx build -o gomlx-adapter .
//	attnlab conform -exec "adapters/gomlx/gomlx-adapter --masked-softmax"
//
// # layers.MultiHeadAttention
//
// GoMLX exposes no attention core, only the layer, so the adapter runs the
// layer with its projections set to the identity, as
// adapters/python/torch_mha.py does for torch.nn.MultiheadAttention: the
// request's q [B, Hq, M, D] becomes the layer's query [B, M, Hq·D] (head h
// owns features h·D … h·D+D−1), k and v likewise; the query, key and value
// Dense layers (weights [Hq·D, Hq, D], the head split) are the identity
// with zero biases, and the output Dense layer (weights [Hq·Dv, Hq·Dv], no
// bias) is the identity, so the layer's output is the heads' attention
// side by side, reshaped back to [B, Hq, M, Dv]. Gradients are
// graph.Gradient of Σ o ⊙ do with respect to the layer's query, key and
// value inputs: through identity projections they are the attention's own.
// What it passes, declared in the hello:
//
//   - "causal": the layer's UseCausalMask, which GoMLX defines only for a
//     query and key of the same length; at M ≠ N it panics and the request
//     gets that panic as its error response.
//   - "validity": q_valid as SetQueryMask [B, M], k_valid as SetKeyMask
//     [B, N].
//   - "kv_cache": the layer takes M ≠ N (cross-attention shapes).
//   - gradients, float32 and float64.
//   - no "bool": the layer's matrix mask, SetQueryKeyMatrixMask, refuses
//     every boolean mask (docs/findings/gomlx-mha-matrix-mask.md).
//   - no lse (the layer does not return it), no explicit scale (the layer
//     has none: it divides the logits by √D twice, see
//     docs/findings/gomlx-mha-double-scale.md), no GQA (one head count for
//     query, key and value).
//
// # graph.MaskedSoftmax (--masked-softmax)
//
// The attention a GoMLX user writes with the graph package, in attnlab's
// layout: Einsum of q and k times the scale, MaskedSoftmax over the keys
// with the request's boolean mask (true = may attend, GoMLX's convention
// and attnlab's), Einsum with v. The composition is the adapter's; the
// softmax, its mask handling and the gradients are GoMLX's. It declares
// "bool" and "validity" (q_valid's rows and k_valid's columns ANDed into
// the mask, as the layer does with its two masks), an explicit scale
// (1/√D without one: this composition's default), kv_cache, gradients,
// float32 and float64.
//
// A panic of GoMLX (a shape it refuses, the causal mask at M ≠ N) is the
// answer to that request, an error response with the panic's first line,
// not a crash of the adapter. GoMLX and its backend may print to standard
// output; the adapter keeps standard output for the protocol and points
// os.Stdout at standard error.
package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"

	"github.com/attnlab/attnlab/conform"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
)

// adapter serves one of the two GoMLX implementations on one backend:
// the layer (mha), or attention composed of GoMLX's graph ops around its
// MaskedSoftmax (maskedSoftmax).
type adapter struct {
	backend       backends.Backend
	maskedSoftmax bool
}

func (a *adapter) Capabilities() conform.Capabilities {
	version := "gomlx " + moduleVersion("github.com/gomlx/gomlx")
	if a.maskedSoftmax {
		return conform.Capabilities{
			Name:    "GoMLX graph.MaskedSoftmax in Einsum attention (the adapter's composition), SimpleGo backend",
			Version: version,
			DTypes:  []string{"float64", "float32"}, Gradients: true, KVCache: true, Scale: true,
			Masks: []string{conform.MaskBool, conform.MaskValidity},
		}
	}
	return conform.Capabilities{
		Name:    "GoMLX layers.MultiHeadAttention (identity projections), SimpleGo backend",
		Version: version,
		DTypes:  []string{"float64", "float32"}, Gradients: true, KVCache: true,
		Masks: []string{conform.MaskCausal, conform.MaskValidity},
	}
}

// Attention runs one request. A panic of GoMLX is the request's error
// response.
func (a *adapter) Attention(r *conform.Request) (resp *conform.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = &conform.Response{Err: "gomlx panicked: " + firstLine(fmt.Sprint(p))}, nil
		}
	}()
	if r.Hkv != r.Hq {
		return &conform.Response{Err: fmt.Sprintf("one head count for query, key and value: Hkv = %d, Hq = %d", r.Hkv, r.Hq)}, nil
	}
	if a.maskedSoftmax {
		resp, err = a.composed(r)
	} else {
		resp, err = a.layer(r)
	}
	if err != nil {
		return &conform.Response{Err: "gomlx: " + firstLine(err.Error())}, nil
	}
	return resp, nil
}

// layer runs r through layers.MultiHeadAttention with identity
// projections.
func (a *adapter) layer(r *conform.Request) (*conform.Response, error) {
	H, D, Dv := r.Hq, r.D, r.Dv
	ctx := context.New().Checked(false)
	identityLayers(ctx.In("MultiHeadAttention"), r.DType, H, D, Dv)
	inputs := []*tensors.Tensor{
		tensorOf(r.DType, toLayer(r.Q, r.B, H, r.M, D), r.B, r.M, H*D),
		tensorOf(r.DType, toLayer(r.K, r.B, H, r.N, D), r.B, r.N, H*D),
		tensorOf(r.DType, toLayer(r.V, r.B, H, r.N, Dv), r.B, r.N, H*Dv),
	}
	grads := r.DO != nil
	if grads {
		inputs = append(inputs, tensorOf(r.DType, toLayer(r.DO, r.B, H, r.M, Dv), r.B, r.M, H*Dv))
	}
	if r.QValid != nil {
		inputs = append(inputs, tensors.FromFlatDataAndDimensions(nonzero(r.QValid), r.B, r.M))
	}
	if r.KValid != nil {
		inputs = append(inputs, tensors.FromFlatDataAndDimensions(nonzero(r.KValid), r.B, r.N))
	}
	outs, err := execute(a.backend, ctx, inputs, func(ctx *context.Context, in []*Node) []*Node {
		q, k, v, rest := in[0], in[1], in[2], in[3:]
		var do *Node
		if grads {
			do, rest = rest[0], rest[1:]
		}
		layer := layers.MultiHeadAttention(ctx, q, k, v, H, D).SetValueHeadDim(Dv).SetOutputDim(H * Dv).UseProjectionBias(false)
		if r.QValid != nil {
			layer.SetQueryMask(rest[0])
			rest = rest[1:]
		}
		if r.KValid != nil {
			layer.SetKeyMask(rest[0])
		}
		if r.Causal {
			layer.UseCausalMask()
		}
		o := layer.Done()
		if !grads {
			return []*Node{o}
		}
		return append([]*Node{o}, Gradient(ReduceAllSum(Mul(o, do)), q, k, v)...)
	})
	if err != nil {
		return nil, err
	}
	resp := &conform.Response{O: fromLayer(outs[0], r.B, H, r.M, Dv)}
	if grads {
		resp.DQ = fromLayer(outs[1], r.B, H, r.M, D)
		resp.DK = fromLayer(outs[2], r.B, H, r.N, D)
		resp.DV = fromLayer(outs[3], r.B, H, r.N, Dv)
	}
	return resp, nil
}

// composed runs r as attention written with GoMLX's graph ops, in
// attnlab's layout [B, H, L, d]:
//
//	logits = Einsum("bhid,bhjd->bhij", q, k) · scale
//	p      = MaskedSoftmax(logits, mask)   (Softmax without a mask)
//	o      = Einsum("bhij,bhjd->bhid", p, v)
//
// The mask is the request's [B, M, N], with q_valid's rows and k_valid's
// columns ANDed in, broadcast over the heads. The scale is the request's,
// 1/√D when it has none (this composition's default, not GoMLX's).
func (a *adapter) composed(r *conform.Request) (*conform.Response, error) {
	B, H, M, N, D, Dv := r.B, r.Hq, r.M, r.N, r.D, r.Dv
	scale := r.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(D))
	}
	inputs := []*tensors.Tensor{
		tensorOf(r.DType, r.Q, B, H, M, D), tensorOf(r.DType, r.K, B, H, N, D), tensorOf(r.DType, r.V, B, H, N, Dv),
	}
	grads := r.DO != nil
	if grads {
		inputs = append(inputs, tensorOf(r.DType, r.DO, B, H, M, Dv))
	}
	masked := r.Mask != nil || r.QValid != nil || r.KValid != nil
	if masked {
		mask := make([]bool, B*M*N)
		for b := range B {
			for i := range M {
				for j := range N {
					mask[(b*M+i)*N+j] = (r.Mask == nil || r.Mask[(b*M+i)*N+j]) &&
						(r.QValid == nil || r.QValid[b*M+i] != 0) && (r.KValid == nil || r.KValid[b*N+j] != 0)
				}
			}
		}
		inputs = append(inputs, tensors.FromFlatDataAndDimensions(mask, B, M, N))
	}
	outs, err := execute(a.backend, context.New(), inputs, func(_ *context.Context, in []*Node) []*Node {
		q, k, v, rest := in[0], in[1], in[2], in[3:]
		var do *Node
		if grads {
			do, rest = rest[0], rest[1:]
		}
		logits := MulScalar(Einsum("bhid,bhjd->bhij", q, k), scale)
		var p *Node
		if masked {
			mask := BroadcastToDims(InsertAxes(rest[0], 1), B, H, M, N)
			p = MaskedSoftmax(logits, mask, -1)
		} else {
			p = Softmax(logits, -1)
		}
		o := Einsum("bhij,bhjd->bhid", p, v)
		if !grads {
			return []*Node{o}
		}
		return append([]*Node{o}, Gradient(ReduceAllSum(Mul(o, do)), q, k, v)...)
	})
	if err != nil {
		return nil, err
	}
	resp := &conform.Response{O: outs[0]}
	if grads {
		resp.DQ, resp.DK, resp.DV = outs[1], outs[2], outs[3]
	}
	return resp, nil
}

// execute builds fn's graph for inputs in ctx, runs it once on backend
// and returns its outputs as float64s.
func execute(backend backends.Backend, ctx *context.Context, inputs []*tensors.Tensor, fn func(*context.Context, []*Node) []*Node) ([][]float64, error) {
	exec, err := context.NewExecAny(backend, ctx, fn)
	if err != nil {
		return nil, err
	}
	defer exec.Finalize()
	args := make([]any, len(inputs))
	for i, t := range inputs {
		args[i] = t
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		return nil, err
	}
	res := make([][]float64, len(outs))
	for i, t := range outs {
		res[i] = flat(t)
		t.FinalizeAll()
	}
	return res, nil
}

// identityLayers creates, in the layer's scope, the variables of its four
// Dense layers set to the identity: query and key weights [H·D, H, D],
// value weights [H·Dv, H, Dv] (input feature h·D + d goes to head h,
// feature d), zero biases [H, D] and [H, Dv], and the output weights
// [H·Dv, H·Dv] (the layer is built without an output bias).
func identityLayers(ctx *context.Context, dtype string, H, D, Dv int) {
	split := func(d int) *tensors.Tensor {
		w := make([]float64, H*d*H*d)
		for f := range H * d {
			w[f*H*d+f] = 1 // [f, h, e] with h·d + e = f
		}
		return tensorOf(dtype, w, H*d, H, d)
	}
	zeros := func(d int) *tensors.Tensor { return tensorOf(dtype, make([]float64, H*d), H, d) }
	for _, p := range []struct {
		scope string
		d     int
	}{{"query", D}, {"key", D}, {"value", Dv}} {
		dense := ctx.In(p.scope).In("dense")
		dense.VariableWithValue("weights", split(p.d))
		dense.VariableWithValue("biases", zeros(p.d))
	}
	w := make([]float64, H*Dv*H*Dv)
	for f := range H * Dv {
		w[f*H*Dv+f] = 1
	}
	ctx.In("output").In("dense").VariableWithValue("weights", tensorOf(dtype, w, H*Dv, H*Dv))
}

// toLayer turns x [B, H, L, d] into the layer's [B, L, H·d].
func toLayer(x []float64, B, H, L, d int) []float64 {
	out := make([]float64, len(x))
	for b := range B {
		for h := range H {
			for l := range L {
				copy(out[((b*L+l)*H+h)*d:][:d], x[((b*H+h)*L+l)*d:][:d])
			}
		}
	}
	return out
}

// fromLayer turns the layer's [B, L, H·d] into attnlab's [B, H, L, d].
func fromLayer(x []float64, B, H, L, d int) []float64 {
	out := make([]float64, len(x))
	for b := range B {
		for h := range H {
			for l := range L {
				copy(out[((b*H+h)*L+l)*d:][:d], x[((b*L+l)*H+h)*d:][:d])
			}
		}
	}
	return out
}

// tensorOf is x as a tensor of the request's dtype.
func tensorOf(dtype string, x []float64, dims ...int) *tensors.Tensor {
	if dtype == "float32" {
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = float32(v)
		}
		return tensors.FromFlatDataAndDimensions(y, dims...)
	}
	return tensors.FromFlatDataAndDimensions(append([]float64(nil), x...), dims...)
}

// flat reads a float32 or float64 tensor as float64s.
func flat(t *tensors.Tensor) []float64 {
	var out []float64
	t.ConstFlatData(func(data any) {
		switch d := data.(type) {
		case []float64:
			out = append(out, d...)
		case []float32:
			out = make([]float64, len(d))
			for i, v := range d {
				out[i] = float64(v)
			}
		default:
			panic(fmt.Sprintf("an output of dtype %s", t.DType()))
		}
	})
	return out
}

func nonzero(x []int64) []bool {
	out := make([]bool, len(x))
	for i, v := range x {
		out[i] = v != 0
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
	backend, err := simplego.New("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gomlx adapter:", err)
		os.Exit(1)
	}
	a := &adapter{backend: backend}
	switch args := os.Args[1:]; {
	case len(args) == 1 && args[0] == "--masked-softmax":
		a.maskedSoftmax = true
	case len(args) > 0:
		fmt.Fprintf(os.Stderr, "usage: %s [--masked-softmax]\n", os.Args[0])
		os.Exit(2)
	}
	if err := conform.Serve(os.Stdin, protocol, a); err != nil {
		fmt.Fprintln(os.Stderr, "gomlx adapter:", err)
		os.Exit(1)
	}
}
