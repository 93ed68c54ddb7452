package nn_test

import (
	"math"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// TestCrossEntropyChecks runs the lab's checks on nn.CrossEntropy: finite differences, the
// accumulation contract, float32 agreement and the semantic checks (package
// lab proves each of them can fail, on the faults).
func TestCrossEntropyChecks(t *testing.T) {
	runChecks(t, checks.CrossEntropy(), checks.CrossEntropyReference)
}

// TestCrossEntropyByHand: logits (0, ln 3) give p = (1/4, 3/4). Row 0 has
// target 1: −log(3/4) = ln(4/3). Row 1 has target 0: −log(1/4) = ln 4. Row 2
// is ignored. loss = (ln(4/3) + ln 4)/2 over count = 2. With dloss = 1 the
// gradient is (p − onehot)/2: row 0 (1/8, −1/8), row 1 (−3/8, 3/8), row 2 zero.
func TestCrossEntropyByHand(t *testing.T) {
	ln3 := math.Log(3)
	c := nn.CrossEntropy[float64]{V: 2, IgnoreIndex: nn.DefaultIgnoreIndex}
	logits := []float64{0, ln3, 0, ln3, 0, ln3}
	targets := []int{1, 0, nn.DefaultIgnoreIndex}
	probs := make([]float64, 6)
	loss, count := c.Forward(probs, logits, targets, 3)
	if count != 2 {
		t.Fatalf("count = %d, want 2", count)
	}
	near(t, "loss", []float64{loss}, []float64{(math.Log(4.0/3) + math.Log(4)) / 2}, 1e-15)
	near(t, "probs", probs, []float64{0.25, 0.75, 0.25, 0.75, 0.25, 0.75}, 1e-15)
	dlogits := make([]float64, 6)
	c.Backward(dlogits, probs, targets, 3, count, 1)
	near(t, "dlogits", dlogits, []float64{0.125, -0.125, -0.375, 0.375, 0, 0}, 1e-15)
}

// TestCrossEntropyStable: logits around 1000 overflow a naive exp; with the
// maximum subtracted, logits (1000, 1000 + ln 3) give the same p = (1/4, 3/4)
// and loss ln(4/3) as (0, ln 3).
func TestCrossEntropyStable(t *testing.T) {
	c := nn.CrossEntropy[float64]{V: 2, IgnoreIndex: nn.DefaultIgnoreIndex}
	probs := make([]float64, 2)
	loss, _ := c.Forward(probs, []float64{1000, 1000 + math.Log(3)}, []int{1}, 1)
	near(t, "probs", probs, []float64{0.25, 0.75}, 1e-13)
	near(t, "loss", []float64{loss}, []float64{math.Log(4.0 / 3)}, 1e-12)
	probs32 := make([]float32, 2)
	loss32, _ := nn.CrossEntropy[float32]{V: 2, IgnoreIndex: nn.DefaultIgnoreIndex}.Forward(probs32, []float32{-1000, 1000}, []int{0}, 1)
	if loss32 != 2000 || probs32[1] != 1 {
		t.Errorf("float32 loss %v, probs %v, want 2000, [0 1]", loss32, probs32)
	}
}

// TestCrossEntropyIgnore: ignored rows do not count, do not change the loss
// of the others, and get exactly zero gradient. When every row is ignored,
// the loss is 0 with count 0, not NaN, and the backward adds nothing.
func TestCrossEntropyIgnore(t *testing.T) {
	const n, v = 4, 5
	c := nn.CrossEntropy[float64]{V: v, IgnoreIndex: nn.DefaultIgnoreIndex}
	logits := randn(newRand(2), n*v, 1)
	probs := make([]float64, n*v)
	loss, count := c.Forward(probs, logits, []int{3, nn.DefaultIgnoreIndex, 0, nn.DefaultIgnoreIndex}, n)
	kept := append(append([]float64(nil), logits[0:v]...), logits[2*v:3*v]...)
	keptLoss, keptCount := c.Forward(make([]float64, 2*v), kept, []int{3, 0}, 2)
	if count != 2 || keptCount != 2 || loss != keptLoss {
		t.Errorf("loss %v over %d rows; the counted rows alone give %v over %d", loss, count, keptLoss, keptCount)
	}
	dlogits := make([]float64, n*v)
	c.Backward(dlogits, probs, []int{3, nn.DefaultIgnoreIndex, 0, nn.DefaultIgnoreIndex}, n, count, 1)
	for _, i := range []int{1, 3} {
		for j := range v {
			if dlogits[i*v+j] != 0 {
				t.Errorf("ignored row %d: dlogits[%d] = %v, want exactly 0", i, j, dlogits[i*v+j])
			}
		}
	}

	all := []int{nn.DefaultIgnoreIndex, nn.DefaultIgnoreIndex}
	loss, count = c.Forward(make([]float64, 2*v), logits[:2*v], all, 2)
	if loss != 0 || count != 0 {
		t.Errorf("all ignored: loss %v, count %d, want 0, 0", loss, count)
	}
	d := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	c.Backward(d, probs[:2*v], all, 2, count, 1)
	near(t, "all ignored: dlogits", d, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0)

	// The zero value's IgnoreIndex is 0: target 0 is then skipped.
	_, count = nn.CrossEntropy[float64]{V: v}.Forward(make([]float64, 2*v), logits[:2*v], []int{0, 4}, 2)
	if count != 1 {
		t.Errorf("zero IgnoreIndex: count %d, want 1", count)
	}
}

func TestCrossEntropyFloat32(t *testing.T) {
	const n, v = 6, 257
	rnd := newRand(7)
	logits := randn(rnd, n*v, 3)
	targets := []int{0, 256, nn.DefaultIgnoreIndex, 100, 7, 7}
	c64, c32 := nn.CrossEntropy[float64]{V: v, IgnoreIndex: nn.DefaultIgnoreIndex}, nn.CrossEntropy[float32]{V: v, IgnoreIndex: nn.DefaultIgnoreIndex}
	probs, dlogits := make([]float64, n*v), make([]float64, n*v)
	loss, count := c64.Forward(probs, logits, targets, n)
	c64.Backward(dlogits, probs, targets, n, count, 1)
	probs32, dlogits32 := make([]float32, n*v), make([]float32, n*v)
	loss32, count32 := c32.Forward(probs32, to32(logits), targets, n)
	c32.Backward(dlogits32, probs32, targets, n, count32, 1)
	if count32 != count {
		t.Fatalf("count %d (float64), %d (float32)", count, count32)
	}
	agree(t, "loss", []float64{loss}, []float32{loss32}, 1e-6)
	agree(t, "probs", probs, probs32, 1e-5)
	agree(t, "dlogits", dlogits, dlogits32, 1e-5)
}

func TestCrossEntropyPanics(t *testing.T) {
	c := nn.CrossEntropy[float64]{V: 3, IgnoreIndex: nn.DefaultIgnoreIndex}
	probs := []float64{-1, -1, -1, -1, -1, -1}
	panics(t, "nn: CrossEntropy.Forward: targets[1] = 3 is outside [0, V) with V = 3 and is not IgnoreIndex = -100", func() {
		c.Forward(probs, make([]float64, 6), []int{0, 3}, 2)
	})
	if probs[0] != -1 {
		t.Errorf("Forward wrote probs before rejecting a target")
	}
	panics(t, "nn: CrossEntropy.Backward: targets[0] = -1 is outside [0, V)", func() {
		c.Backward(make([]float64, 3), make([]float64, 3), []int{-1}, 1, 1, 1)
	})
	panics(t, "nn: CrossEntropy.Backward: count = -1, want >= 0", func() {
		c.Backward(make([]float64, 3), make([]float64, 3), []int{0}, 1, -1, 1)
	})
	panics(t, "nn: CrossEntropy.Forward: len(targets) = 1, want n = 2", func() {
		c.Forward(make([]float64, 6), make([]float64, 6), []int{0}, 2)
	})
}
