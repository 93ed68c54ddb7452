package checks

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/nn"
)

// CrossEntropyOps is a cross-entropy forward and backward in precision T,
// with the signatures of nn.CrossEntropy's methods taken as method
// expressions.
type CrossEntropyOps[T nn.Float] struct {
	Forward  func(c nn.CrossEntropy[T], probs, logits []T, targets []int, n int) (loss T, count int)
	Backward func(c nn.CrossEntropy[T], dlogits, probs []T, targets []int, n, count int, dloss T)
}

// CrossEntropyImpl is a cross-entropy loss: its float64 path and its
// float32 path (the vectorised exp).
type CrossEntropyImpl struct {
	CrossEntropyOps[float64]
	F32 CrossEntropyOps[float32]
}

func crossEntropyOps[T nn.Float]() CrossEntropyOps[T] {
	return CrossEntropyOps[T]{Forward: nn.CrossEntropy[T].Forward, Backward: nn.CrossEntropy[T].Backward}
}

// CrossEntropyReference is nn.CrossEntropy.
var CrossEntropyReference = CrossEntropyImpl{crossEntropyOps[float64](), crossEntropyOps[float32]()}

// ceIgnore is the target of a row that does not enter the loss.
const ceIgnore = nn.DefaultIgnoreIndex

// ceCase differentiates the loss, a single output, with respect to the
// logits (n, V) drawn with standard deviation scale; dloss is the fixed
// random G of the scalar objective, so the backward's dloss is tested too.
func ceCase[T nn.Float](ops CrossEntropyOps[T], V int, targets []int, scale float64, seed uint64) Case[T] {
	c := nn.CrossEntropy[T]{V: V, IgnoreIndex: ceIgnore}
	n := len(targets)
	logits := randT[T](seed, n*V, scale)
	probs := make([]T, n*V)
	return Case[T]{
		Name:   shape("n", n, "V", V, "ignored", ceIgnored(targets), "|logits|", scale),
		Inputs: []Input[T]{{"logits", logits}},
		Out:    1,
		Forward: func(out []T) error {
			out[0], _ = ops.Forward(c, probs, logits, targets, n)
			return nil
		},
		Backward: func(g [][]T, dout []T) error {
			_, count := ops.Forward(c, probs, logits, targets, n) // probs at the current point
			ops.Backward(c, g[0], probs, targets, n, count, dout[0])
			return nil
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

// ceTargets returns n targets (i·37) mod V with every row i ≡ 1 (mod
// every) ignored.
func ceTargets(n, V, every int) []int {
	targets := make([]int, n)
	for i := range targets {
		targets[i] = (i * 37) % V
		if i%every == 1 {
			targets[i] = ceIgnore
		}
	}
	return targets
}

func ceCases[T nn.Float](ops CrossEntropyOps[T], big bool) []Case[T] {
	if big {
		return []Case[T]{ceCase(ops, 257, ceTargets(32, 257, 5), 2, 5)}
	}
	return []Case[T]{
		ceCase(ops, 5, []int{2, ceIgnore, 0, 4}, 1, 1),
		ceCase(ops, 7, []int{6, 1, ceIgnore}, 3, 2),
		ceCase(ops, 1, []int{0, 0}, 1, 3),
		ceCase(ops, 3, []int{ceIgnore, ceIgnore}, 1, 4),
	}
}

// The rows of ignore-index, rows-sum-to-zero and uniform-logits.
var (
	ceIgnoreTargets  = []int{3, ceIgnore, 10, ceIgnore, ceIgnore, 0, 7}
	ceRowsTargets    = []int{0, 12, ceIgnore, 5, 5, 1}
	ceRowsScales     = []float64{1, 8}
	ceUniformTargets = []int{4, ceIgnore, 0, 5}
	ceUniformLogits  = []float64{0, 3.7, -250}
)

const (
	ceIgnoreV  = 11
	ceRowsV    = 13
	ceUniformV = 6
)

// CrossEntropy returns the suite of the cross-entropy loss.
func CrossEntropy() Suite[CrossEntropyImpl] {
	spec := gradSpec[CrossEntropyImpl]{op: "CrossEntropy", ref: CrossEntropyReference, dirs: 4,
		cases:   func(i CrossEntropyImpl, big bool) []Case[float64] { return ceCases(i.CrossEntropyOps, big) },
		cases32: func(i CrossEntropyImpl, big bool) []Case[float32] { return ceCases(i.F32, big) }}
	return Suite[CrossEntropyImpl]{
		Guide: OpGuide{
			What: fmt.Sprintf("Softmax cross-entropy over a vocabulary of V, averaged over the rows whose target is not the ignore index %d.", ceIgnore),
			Forward: []Step{
				{Eq: "p = softmax(z),  loss = (1/count) Σ_{counted i} −log pᵢ[tᵢ]", Shape: "z, p [n,V], targets [n]",
					Why: "the mean over counted rows only; the row maximum is subtracted before exp"},
			},
			Backward: []Step{
				{Eq: "dzᵢ = dloss · (pᵢ − onehot(tᵢ)) / count;  ignored rows: 0", Shape: "dz [n,V]",
					Why: "∂(log Σ eᶻ − z_t)/∂z = p − onehot; each row of dz sums to zero because both have mass one"},
			},
		},
		Checks: append(spec.checks(),
			Check[CrossEntropyImpl]{Name: "ignore-index", Kind: Semantic, Run: ceIgnoreIndex,
				Claim: fmt.Sprintf("rows with target %d get exactly zero dlogits and leave the mean: loss and count equal those of the other rows alone, recomputed here", ceIgnore),
				Limit: fmt.Sprintf("tested with the default index %d only", ceIgnore),
				Long: Long{
					Tests:  fmt.Sprintf("rows with target %d get exactly zero dlogits and leave the mean: loss and count equal those of the other rows alone", ceIgnore),
					Shapes: fmt.Sprintf("%d rows, %d ignored, V = %d", len(ceIgnoreTargets), ceIgnored(ceIgnoreTargets), ceIgnoreV),
					Proves: "ignored rows are neither counted nor differentiated",
					Cannot: "other ignore values",
				}},
			Check[CrossEntropyImpl]{Name: "rows-sum-to-zero", Kind: Semantic, Run: ceRowsSumToZero,
				Claim: "each row of dlogits sums to zero: softmax minus one-hot, both of mass one",
				Limit: "a sum per row: errors that cancel within a row are left to finite differences",
				Long: Long{
					Tests:  "each row of dlogits sums to zero: softmax minus one-hot, both of mass one",
					Shapes: fmt.Sprintf("dlogits [%d,%d], logits of scale %s", len(ceRowsTargets), ceRowsV, list(ceRowsScales)),
					Proves: "the one-hot is subtracted and p normalised",
					Cannot: "errors that cancel within a row",
				}},
			Check[CrossEntropyImpl]{Name: "uniform-logits", Kind: Semantic, Run: ceUniform,
				Claim: "equal logits give loss log V and dlogits = dloss·(1/V − onehot)/count, with ignored rows present",
				Limit: "one point of the loss, where the softmax is exactly uniform",
				Long: Long{
					Tests:  "equal logits give loss log V and dlogits = dloss·(1/V − onehot)/count",
					Shapes: fmt.Sprintf("logits [%d,%d] all %s in turn, %d row(s) ignored", len(ceUniformTargets), ceUniformV, list(ceUniformLogits), ceIgnored(ceUniformTargets)),
					Proves: "the loss and gradient at a point known in closed form, the 1/count included",
					Cannot: "other points",
				}},
		),
		At: func(impl CrossEntropyImpl, s Sizes, seed uint64) Case[float64] {
			return ceCase(impl.CrossEntropyOps, s.Dim, ceTargets(s.B*s.T, s.Dim, 3), 2, seed)
		},
		At32: func(impl CrossEntropyImpl, s Sizes, seed uint64) Case[float32] {
			return ceCase(impl.F32, s.Dim, ceTargets(s.B*s.T, s.Dim, 3), 2, seed)
		},
		Reads: "B·T rows over a vocabulary of Dim, every third row from the second ignored",
	}
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
	const V = ceIgnoreV
	targets := ceIgnoreTargets
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
		return measured(fail("%s: ignored rows counted in the mean?", msg), d)
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
	return measured(pass("%d of %d rows counted: loss matches their mean (error %.1e); ignored rows' dlogits exactly 0", want, len(targets), d), d)
}

func ceRowsSumToZero(impl CrossEntropyImpl) Result {
	const V = ceRowsV
	targets := ceRowsTargets
	c := nn.CrossEntropy[float64]{V: V, IgnoreIndex: ceIgnore}
	var worst float64
	for x, scale := range ceRowsScales {
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
				return measured(fail("|logits| ~ %g, row %d: Σ dlogits = %.3g (max |dlogit| %.3g)", scale, i, s, m), e)
			}
			worst = max(worst, e)
		}
	}
	return measured(pass("every row, logits of scale %s: |Σ dlogits| / (1 + max |dlogit|) at most %.1e", list(ceRowsScales), worst), worst)
}

func ceUniform(impl CrossEntropyImpl) Result {
	const V = ceUniformV
	targets := ceUniformTargets
	const dloss = 0.75
	c := nn.CrossEntropy[float64]{V: V, IgnoreIndex: ceIgnore}
	var worst float64
	for _, z := range ceUniformLogits {
		logits := make([]float64, len(targets)*V)
		for i := range logits {
			logits[i] = z
		}
		loss, count, dlogits, err := ceRun(impl, c, logits, targets, dloss)
		if err != nil {
			return errored(err, "%v")
		}
		counted := len(targets) - ceIgnored(targets)
		want := make([]float64, len(dlogits))
		for i, t := range targets {
			if t == ceIgnore {
				continue
			}
			for v := range V {
				want[i*V+v] = dloss / float64(counted) / V // softmax of equal logits is 1/V
			}
			want[i*V+t] -= dloss / float64(counted)
		}
		if count != counted {
			return fail("logits all %g: count = %d, want %d", z, count, counted)
		}
		d, msg := compare(identical, pair{"loss", []float64{loss}, []float64{math.Log(V)}}, pair{"dlogits", dlogits, want})
		if msg != "" {
			return measured(fail("logits all %g: %s", z, msg), d)
		}
		worst = max(worst, d)
	}
	return measured(pass("logits all %s: loss = log %d and dlogits = dloss·(1/V − onehot)/count, max error %.1e", list(ceUniformLogits), V, worst), worst)
}
