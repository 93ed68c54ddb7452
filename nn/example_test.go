package nn_test

import (
	"fmt"

	"github.com/attnlab/attnlab/nn"
)

// RoPE at position 0 is the identity; at position 1 the single pair of a
// D = 2 head turns by θ_0 = 1 radian.
func ExampleRoPE() {
	r := nn.RoPE[float64]{D: 2, Base: 10000} // Half pairing, no scaling
	x := []float64{1, 0, 1, 0}               // B = 1, H = 1, T = 2 tokens, D = 2
	y := make([]float64, 4)
	r.Forward(y, x, []int{0, 1}, 1, 1, 2)
	fmt.Printf("position 0: %.4f %.4f\n", y[0], y[1])
	fmt.Printf("position 1: %.4f %.4f\n", y[2], y[3])
	// Output:
	// position 0: 1.0000 0.0000
	// position 1: 0.5403 0.8415
}

// x = (3, 4, 0, 0) has mean square 25/4, so r = 2.5 and y = x/2.5.
func ExampleRMSNorm() {
	m := nn.RMSNorm[float64]{D: 4} // ε = 0 for a round result
	x, w := []float64{3, 4, 0, 0}, []float64{1, 1, 1, 1}
	y, rstd := make([]float64, 4), make([]float64, 1)
	m.Forward(y, rstd, x, w, 1)
	fmt.Printf("y = %.4f, rstd = %.4f\n", y, rstd[0])
	// Output: y = [1.2000 1.6000 0.0000 0.0000], rstd = 0.4000
}

// The second row is padding and does not count: the loss is −log(3/4).
func ExampleCrossEntropy() {
	c := nn.CrossEntropy[float64]{V: 2, IgnoreIndex: nn.DefaultIgnoreIndex}
	logits := []float64{0, 1.0986122886681098, 5, 5} // ln 3 in row 0
	probs := make([]float64, 4)
	loss, count := c.Forward(probs, logits, []int{1, nn.DefaultIgnoreIndex}, 2)
	fmt.Printf("loss = %.4f over %d row(s)\n", loss, count)
	// Output: loss = 0.2877 over 1 row(s)
}
