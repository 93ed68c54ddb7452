// GoMLX v0.26.0's SimpleGo backend fails to run a graph that reads a
// context variable it does not use, once that read comes after the
// outputs' nodes. MultiHeadAttention's DoneWithCoefficients does exactly
// that when only its attention weights are fetched: the output projection
// reads its weights after the weights' nodes are built. Run from the
// repository:
//
//	go -C docs/findings/gomlx run ./unused-variable
//
// It exits 1 while either graph fails.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
	"github.com/gomlx/gomlx/pkg/ml/layers"
)

// exp computes exp(x), reading the variable w (unused) before or after it.
func exp(backend backends.Backend, readAfter bool) (*tensors.Tensor, error) {
	ctx := context.New()
	ctx.VariableWithValue("w", []float64{1, 2, 3})
	exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, x *Node) *Node {
		if !readAfter {
			_ = ctx.GetVariable("w").ValueGraph(x.Graph())
		}
		y := Exp(x)
		if readAfter {
			_ = ctx.GetVariable("w").ValueGraph(x.Graph())
		}
		return y
	})
	if err != nil {
		return nil, err
	}
	return exec.Exec1(tensors.FromValue([]float64{0, 1}))
}

// weights fetches only the attention weights of MultiHeadAttention.
func weights(backend backends.Backend) (*tensors.Tensor, error) {
	ctx := context.New().WithInitializer(initializers.One)
	exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, x *Node) *Node {
		_, coefficients := layers.MultiHeadAttention(ctx, x, x, x, 1, 2).DoneWithCoefficients()
		return coefficients
	})
	if err != nil {
		return nil, err
	}
	return exec.Exec1(tensors.FromValue([][][]float64{{{0.1, 0.2}, {0.3, 0.4}}}))
}

func main() {
	backend, err := simplego.New("")
	if err != nil {
		panic(err)
	}
	failed := false
	show := func(name string, t *tensors.Tensor, err error) {
		if err != nil {
			failed = true
			msg, _, _ := strings.Cut(err.Error(), "\n")
			fmt.Printf("%-50s %s\n", name, msg)
			return
		}
		fmt.Printf("%-50s ok %v\n", name, t.Shape())
	}
	t, err := exp(backend, false)
	show("exp(x), unused variable read before it", t, err)
	t, err = exp(backend, true)
	show("exp(x), unused variable read after it", t, err)
	t, err = weights(backend)
	show("MultiHeadAttention weights alone", t, err)
	if failed {
		os.Exit(1)
	}
}
