// GoMLX v0.26.0 layers.MultiHeadAttention's SetQueryKeyMatrixMask cannot
// apply a mask: a boolean mask is refused in both documented shapes, and
// the float mask its shape check accepts is dropped without a word (shape
// [batch, queries, keys]) or fails later (shape [batch, queries, heads,
// keys]). One head, d_k = 4, identity projections, one-hot values (the
// output is the attention weights), two queries and three keys; the mask
// lets query 0 see key 0 only. Run from the repository:
//
//	go -C docs/findings/gomlx run ./matrix-mask
//
// It exits 1 while no form of the mask takes effect.
package main

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
)

const dk = 4

var (
	query  = tensors.FromValue([][][]float64{{{1, 0, 0, 0}, {0, 1, 0, 0}}})
	keys   = tensors.FromValue([][][]float64{{{1, 0, 0, 0}, {0, 1, 0, 0}, {1, 1, 0, 0}}})
	values = tensors.FromValue([][][]float64{{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}})
)

// run applies the layer with mask given to SetQueryKeyMatrixMask (nil:
// none) and returns query 0's attention weights, or what went wrong.
func run(backend backends.Backend, mask *tensors.Tensor) (weights []float64, failure string) {
	defer func() {
		if p := recover(); p != nil {
			failure = "panic: " + firstLine(fmt.Sprint(p))
		}
	}()
	ctx := context.New().Checked(false)
	mha := ctx.In("MultiHeadAttention")
	eye := make([]float64, dk*dk)
	for f := range dk {
		eye[f*dk+f] = 1
	}
	for _, p := range []string{"query", "key", "value"} {
		mha.In(p).In("dense").VariableWithValue("weights", tensors.FromFlatDataAndDimensions(eye, dk, 1, dk))
		mha.In(p).In("dense").VariableWithValue("biases", tensors.FromFlatDataAndDimensions(make([]float64, dk), 1, dk))
	}
	mha.In("output").In("dense").VariableWithValue("weights", tensors.FromFlatDataAndDimensions(eye, dk, dk))
	exec, err := context.NewExecAny(backend, ctx, func(ctx *context.Context, in []*Node) *Node {
		layer := layers.MultiHeadAttention(ctx, in[0], in[1], in[2], 1, dk).UseProjectionBias(false)
		if len(in) > 3 {
			layer.SetQueryKeyMatrixMask(in[3])
		}
		return layer.Done()
	})
	if err != nil {
		return nil, "error: " + firstLine(err.Error())
	}
	args := []any{query, keys, values}
	if mask != nil {
		args = append(args, mask)
	}
	out, err := exec.Exec1(args...)
	if err != nil {
		return nil, "error: " + firstLine(err.Error())
	}
	return tensors.MustCopyFlatData[float64](out)[:3], ""
}

func main() {
	backend, err := simplego.New("")
	if err != nil {
		panic(err)
	}
	unmasked, failure := run(backend, nil)
	if failure != "" {
		fmt.Println("no mask:", failure)
		os.Exit(2)
	}
	fmt.Printf("%-42s query 0 weights %.4f\n", "no mask", unmasked)
	masked := false
	for _, c := range []struct {
		name string
		mask *tensors.Tensor
	}{
		{"bool [batch, queries, keys]", tensors.FromValue([][][]bool{{{true, false, false}, {true, true, true}}})},
		{"bool [batch, queries, heads, keys]", tensors.FromValue([][][][]bool{{{{true, false, false}}, {{true, true, true}}}})},
		{"float64 [batch, queries, keys]", tensors.FromValue([][][]float64{{{1, 0, 0}, {1, 1, 1}}})},
		{"float64 [batch, queries, heads, keys]", tensors.FromValue([][][][]float64{{{{1, 0, 0}}, {{1, 1, 1}}}})},
	} {
		w, failure := run(backend, c.mask)
		switch {
		case failure != "":
			fmt.Printf("%-42s %s\n", c.name, failure)
		case same(w, unmasked):
			fmt.Printf("%-42s query 0 weights %.4f: the mask was ignored\n", c.name, w)
		default:
			fmt.Printf("%-42s query 0 weights %.4f\n", c.name, w)
			masked = masked || same(w, []float64{1, 0, 0})
		}
	}
	if !masked {
		fmt.Println("no form of the matrix mask took effect")
		os.Exit(1)
	}
}

func same(a, b []float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
