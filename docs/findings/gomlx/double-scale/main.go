// GoMLX v0.26.0 layers.MultiHeadAttention scales its attention logits by
// 1/d_k instead of the paper's 1/√d_k. One head, d_k = 4, every projection
// set to the identity, one query against three keys whose dot products
// with it are 4, 0 and −4, and one-hot values, so that the layer's output
// is its attention weights. Run from the repository:
//
//	go -C docs/findings/gomlx run ./double-scale
//
// It exits 1 while the weights are those of 1/d_k.
package main

import (
	"fmt"
	"math"
	"os"

	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
)

const dk = 4

func main() {
	backend, err := simplego.New("")
	if err != nil {
		panic(err)
	}
	// the layer's four Dense layers set to the identity, zero biases
	ctx := context.New().Checked(false)
	mha := ctx.In("MultiHeadAttention")
	eye := make([]float64, dk*dk)
	for f := range dk {
		eye[f*dk+f] = 1
	}
	for _, p := range []string{"query", "key", "value"} {
		mha.In(p).In("dense").VariableWithValue("weights", tensors.FromFlatDataAndDimensions(eye, dk, 1, dk)) // [in, heads, d_k]
		mha.In(p).In("dense").VariableWithValue("biases", tensors.FromFlatDataAndDimensions(make([]float64, dk), 1, dk))
	}
	mha.In("output").In("dense").VariableWithValue("weights", tensors.FromFlatDataAndDimensions(eye, dk, dk))

	query := tensors.FromValue([][][]float64{{{2, 0, 0, 0}}})
	keys := tensors.FromValue([][][]float64{{{2, 0, 0, 0}, {0, 0, 0, 0}, {-2, 0, 0, 0}}}) // q·k = 4, 0, −4
	values := tensors.FromValue([][][]float64{{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}})
	exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, q, k, v *Node) *Node {
		return layers.MultiHeadAttention(ctx, q, k, v, 1, dk).UseProjectionBias(false).Done()
	})
	if err != nil {
		panic(err)
	}
	out, err := exec.Exec1(query, keys, values)
	if err != nil {
		panic(err)
	}
	got := tensors.MustCopyFlatData[float64](out)[:3]

	softmax := func(scale float64) []float64 {
		w := []float64{math.Exp(4 * scale), 1, math.Exp(-4 * scale)}
		s := w[0] + w[1] + w[2]
		return []float64{w[0] / s, w[1] / s, w[2] / s}
	}
	paper, twice := softmax(1/math.Sqrt(dk)), softmax(1.0/dk)
	fmt.Printf("softmax(q·k / √d_k), the paper  %.4f\n", paper)
	fmt.Printf("softmax(q·k / d_k)              %.4f\n", twice)
	fmt.Printf("layers.MultiHeadAttention       %.4f\n", got)
	switch {
	case near(got, twice):
		fmt.Println("the layer divides the logits by √d_k twice")
		os.Exit(1)
	case !near(got, paper):
		fmt.Println("the layer's weights match neither scale")
		os.Exit(1)
	}
	fmt.Println("the layer scales by 1/√d_k")
}

func near(a, b []float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}
