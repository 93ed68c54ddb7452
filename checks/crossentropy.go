package checks

import (
	"math"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

// CrossEntropyImpl is a cross-entropy forward and backward in float64, with
// the signatures of nn.CrossEntropy's methods taken as method expressions.
type CrossEntropyImpl struct {
	Forward  func(c nn.CrossEntropy[float64], probs, logits []float64, targets []int, n int) (loss float64, count int)
	Backward func(c nn.CrossEntropy[float64], dlogits, probs []float64, targets []int, n, count int, dloss float64)
}

// CrossEntropyReference is nn.CrossEntropy.
var CrossEntropyReference = CrossEntropyImpl{Forward: nn.CrossEntropy[float64].Forward, Backward: nn.CrossEntropy[float64].Backward}

// ceIgnore is the target of a row that does not enter the loss.
const ceIgnore = nn.DefaultIgnoreIndex

// ceDiff differentiates the loss, a single output, with respect to the
// logits (n, V) drawn with standard deviation scale; dloss is the fixed
// random G of the scalar objective, so the backward's dloss is tested too.
func ceDiff(impl CrossEntropyImpl, V int, targets []int, scale float64, seed uint64) Diff {
	c := nn.CrossEntropy[float64]{V: V, IgnoreIndex: ceIgnore}
	n := len(targets)
	logits := randn(seed, n*V, scale)
	probs := make([]float64, n*V)
	return Diff{
		Name:   shape("n", n, "V", V, "ignored", ceIgnored(targets), "|logits|", scale),
		Inputs: []gradcheck.Param{{Name: "logits", X: logits}},
		Out:    1,
		Forward: func(out []float64) {
			out[0], _ = impl.Forward(c, probs, logits, targets, n)
		},
		Backward: func(g [][]float64, dout []float64) {
			_, count := impl.Forward(c, probs, logits, targets, n) // probs at the current point
			impl.Backward(c, g[0], probs, targets, n, count, dout[0])
		},
	}
}

// ceIgnored counts the ignored targets.
func ceIgnored(targets []int) int {
	k := 0
	for _, t := range targets {
		if t == ceIgnore {
			k++
		}
	}
	return k
}

// CrossEntropy returns the checks of the cross-entropy loss.
func CrossEntropy() []Check[CrossEntropyImpl] {
	small := func(impl CrossEntropyImpl) []Diff {
		return []Diff{
			ceDiff(impl, 5, []int{2, ceIgnore, 0, 4}, 1, 1),
			ceDiff(impl, 7, []int{6, 1, ceIgnore}, 3, 2),
			ceDiff(impl, 1, []int{0, 0}, 1, 3),
			ceDiff(impl, 3, []int{ceIgnore, ceIgnore}, 1, 4),
		}
	}
	big := func(impl CrossEntropyImpl) []Diff {
		targets := make([]int, 32)
		for i := range targets {
			targets[i] = (i * 37) % 257
			if i%5 == 3 {
				targets[i] = ceIgnore
			}
		}
		return []Diff{ceDiff(impl, 257, targets, 2, 5)}
	}
	return append(gradientChecks("CrossEntropy", small, big),
		Check[CrossEntropyImpl]{Name: "ignore-index", Kind: Semantic, Run: ceIgnoreIndex,
			Claim: "rows with target −100 get exactly zero dlogits and leave the mean: loss and count equal those of the other rows alone, recomputed here",
			Limit: "tested with the default index −100 only"},
		Check[CrossEntropyImpl]{Name: "rows-sum-to-zero", Kind: Semantic, Run: ceRowsSumToZero,
			Claim: "each row of dlogits sums to zero: softmax minus one-hot, both of mass one",
			Limit: "a sum per row: errors that cancel within a row are left to finite differences"},
		Check[CrossEntropyImpl]{Name: "uniform-logits", Kind: Semantic, Run: ceUniform,
			Claim: "equal logits give loss log V and dlogits = dloss·(1/V − onehot)/count, with ignored rows present",
			Limit: "one point of the loss, where the softmax is exactly uniform"},
	)
}

// ceRun runs forward and backward on fresh buffers.
func ceRun(impl CrossEntropyImpl, c nn.CrossEntropy[float64], logits []float64, targets []int, dloss float64) (loss float64, count int, dlogits []float64, err error) {
	n := len(targets)
	probs, dlogits := make([]float64, n*c.V), make([]float64, n*c.V)
	err = protect(func() error {
		loss, count = impl.Forward(c, probs, logits, targets, n)
		impl.Backward(c, dlogits, probs, targets, n, count, dloss)
		return nil
	})
	return loss, count, dlogits, err
}

func ceIgnoreIndex(impl CrossEntropyImpl) Result {
	const V = 11
	targets := []int{3, ceIgnore, 10, ceIgnore, ceIgnore, 0, 7}
	c := nn.CrossEntropy[float64]{V: V, IgnoreIndex: ceIgnore}
	logits := randn(110, len(targets)*V, 3)
	loss, count, dlogits, err := ceRun(impl, c, logits, targets, 1)
	if err != nil {
		return errored(err, "%v")
	}
	// the mean over the counted rows, each −log softmax(z)_t = log Σ exp(z − max) − (z_t − max)
	var sum float64
	want := 0
	for i, t := range targets {
		if t == ceIgnore {
			continue
		}
		row := logits[i*V : (i+1)*V]
		mx := math.Inf(-1)
		for _, z := range row {
			mx = max(mx, z)
		}
		var s float64
		for _, z := range row {
			s += math.Exp(z - mx)
		}
		sum += math.Log(s) - (row[t] - mx)
		want++
	}
	if count != want {
		return fail("count = %d, want %d (rows whose target is not %d)", count, want, ceIgnore)
	}
	d, msg := compare(identical, pair{"loss", []float64{loss}, []float64{sum / float64(want)}})
	if msg != "" {
		res := fail("%s: ignored rows counted in the mean?", msg)
		res.Error = d
		return res
	}
	for i, t := range targets {
		for v := range V {
			g := dlogits[i*V+v]
			if t == ceIgnore && g != 0 {
				return fail("ignored row %d: dlogits[%d] = %.3g, want exactly 0", i, v, g)
			}
			if t != ceIgnore && g == 0 {
				return fail("counted row %d: dlogits[%d] = 0, want non-zero", i, v)
			}
		}
	}
	res := pass("%d of %d rows counted: loss matches their mean (error %.1e); ignored rows' dlogits exactly 0", want, len(targets), d)
	res.Error = d
	return res
}

func ceRowsSumToZero(impl CrossEntropyImpl) Result {
	const V = 13
	targets := []int{0, 12, ceIgnore, 5, 5, 1}
	c := nn.CrossEntropy[float64]{V: V, IgnoreIndex: ceIgnore}
	var worst float64
	for x, scale := range []float64{1, 8} {
		logits := randn(uint64(120+x), len(targets)*V, scale)
		_, _, dlogits, err := ceRun(impl, c, logits, targets, 1.7)
		if err != nil {
			return errored(err, "%v")
		}
		for i := range targets {
			var s, m float64
			for _, g := range dlogits[i*V : (i+1)*V] {
				s += g
				m = max(m, math.Abs(g))
			}
			e := math.Abs(s) / (1 + m)
			if e > identical {
				res := fail("|logits| ~ %g, row %d: Σ dlogits = %.3g (max |dlogit| %.3g)", scale, i, s, m)
				res.Error = e
				return res
			}
			worst = max(worst, e)
		}
	}
	res := pass("every row, logits of scale 1 and 8: |Σ dlogits| / (1 + max |dlogit|) at most %.1e", worst)
	res.Error = worst
	return res
}

func ceUniform(impl CrossEntropyImpl) Result {
	const V = 6
	targets := []int{4, ceIgnore, 0, 5}
	const dloss = 0.75
	c := nn.CrossEntropy[float64]{V: V, IgnoreIndex: ceIgnore}
	var worst float64
	for _, z := range []float64{0, 3.7, -250} {
		logits := make([]float64, len(targets)*V)
		for i := range logits {
			logits[i] = z
		}
		loss, count, dlogits, err := ceRun(impl, c, logits, targets, dloss)
		if err != nil {
			return errored(err, "%v")
		}
		const counted = 3
		want := make([]float64, len(dlogits))
		for i, t := range targets {
			if t == ceIgnore {
				continue
			}
			for v := range V {
				want[i*V+v] = dloss / counted / V // softmax of equal logits is 1/V
			}
			want[i*V+t] -= dloss / counted
		}
		if count != counted {
			return fail("logits all %g: count = %d, want %d", z, count, counted)
		}
		d, msg := compare(identical, pair{"loss", []float64{loss}, []float64{math.Log(V)}}, pair{"dlogits", dlogits, want})
		if msg != "" {
			res := fail("logits all %g: %s", z, msg)
			res.Error = d
			return res
		}
		worst = max(worst, d)
	}
	res := pass("logits all 0, 3.7, −250: loss = log %d and dlogits = dloss·(1/V − onehot)/count, max error %.1e", V, worst)
	res.Error = worst
	return res
}
