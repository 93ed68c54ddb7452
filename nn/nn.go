package nn

import (
	"fmt"

	"github.com/attnlab/attnlab/internal/vec"
)

// Float is the element type of every tensor in this package, declared once
// for the module (package vec's): checks of derivatives run in float64,
// fast paths in float32.
type Float = vec.Float

// mustLen panics unless got == want. The message names the op, the slice and
// the formula its length follows from, for example
//
//	nn: Linear.Forward: len(x) = 5, want n*In = 6
func mustLen(op, name string, got, want int, formula string) {
	if got != want {
		panic(fmt.Sprintf("nn: %s: len(%s) = %d, want %s = %d", op, name, got, formula, want))
	}
}

// mustPositive panics unless the size v called name is at least 1.
func mustPositive(op, name string, v int) {
	if v < 1 {
		panic(fmt.Sprintf("nn: %s: %s = %d, want >= 1", op, name, v))
	}
}

// mustRows panics if the row count n is negative.
func mustRows(op string, n int) { mustNonNegative(op, "n", n) }

// mustNonNegative panics if the size v called name is negative.
func mustNonNegative(op, name string, v int) {
	if v < 0 {
		panic(fmt.Sprintf("nn: %s: %s = %d, want >= 0", op, name, v))
	}
}
