package nn

import (
	"fmt"
	"math"
)

// DefaultIgnoreIndex is PyTorch's default ignore_index (−100), the target
// value Hugging Face uses for padding and masked-out labels.
const DefaultIgnoreIndex = -100

// CrossEntropy is the softmax cross-entropy of rows of logits over a
// vocabulary of V entries, averaged over the rows whose target is not
// IgnoreIndex, as PyTorch's F.cross_entropy with reduction "mean".
//
// The zero value ignores target 0, a real token. Set IgnoreIndex, normally to
// DefaultIgnoreIndex, or to any value outside [0, V) to count every row.
type CrossEntropy[T Float] struct {
	V           int // vocabulary size: logits per row
	IgnoreIndex int // rows with this target are skipped
}

// Forward computes the softmax of each row of logits (n, V) into probs
// (n, V), and the mean negative log-likelihood of the targets (n) over the
// counted rows, those whose target is not IgnoreIndex:
//
//	probs[i,:] = softmax(logits[i,:])
//	loss = (1/count) Σ_{i counted} −log probs[i,targets[i]]
//
// count is the number of counted rows. When it is 0, Forward returns loss 0
// and count 0; PyTorch returns NaN there, which would poison a running sum.
// probs is computed for every row, ignored ones included. probs may be
// logits itself (an in-place softmax); partial overlap is not allowed.
//
// The log-softmax is taken with the row maximum subtracted, so exp never
// overflows, and the loss is summed in float64.
//
// It panics if V is not positive, n is negative, a target other than
// IgnoreIndex is outside [0, V) (naming its row and value), or a slice has
// the wrong length. Targets are checked before anything is written.
func (c CrossEntropy[T]) Forward(probs, logits []T, targets []int, n int) (loss T, count int) {
	c.check("CrossEntropy.Forward", "logits", probs, logits, targets, n)
	V := c.V
	var sum float64
	for i := range n {
		li := logits[i*V : (i+1)*V]
		pi := probs[i*V : (i+1)*V][:len(li)]
		// pass 1: the row maximum; subtracting it keeps every exponent <= 0
		mx := li[0]
		for _, v := range li[1:] {
			mx = max(mx, v)
		}
		// the target's logit, read before pass 2 overwrites it when probs is logits
		tgt := targets[i]
		var zt T
		if tgt != c.IgnoreIndex {
			zt = li[tgt] - mx
		}
		// pass 2: exponentials and their sum (elementwise, so probs may be logits)
		var z T
		if expShifted32(pi, li, mx) {
			for _, e := range pi {
				z += e
			}
		} else {
			for j, v := range li {
				e := T(math.Exp(float64(v - mx)))
				pi[j] = e
				z += e
			}
		}
		// pass 3: normalise
		inv := 1 / z
		for j := range pi {
			pi[j] *= inv
		}
		if tgt == c.IgnoreIndex {
			continue
		}
		// −log p[t] = log Σ_j e^(z_j − max) − (z_t − max)
		sum += math.Log(float64(z)) - float64(zt)
		count++
	}
	if count == 0 {
		return 0, 0
	}
	return T(sum / float64(count)), count
}

// Backward adds the gradient of dloss·loss with respect to the logits into
// dlogits (n, V), given the probs saved by Forward:
//
//	dlogits[i,:] += dloss·(probs[i,:] − onehot(targets[i])) / count
//
// for the counted rows; ignored rows get nothing. count is the divisor of the
// mean: the count returned by Forward, or the total over several Forward
// calls when one batch is split into several. With count 0 Backward adds
// nothing. Backward adds into dlogits; callers zero it. dlogits must not
// overlap probs.
//
// It panics if V is not positive, n or count is negative, a target other than
// IgnoreIndex is outside [0, V), or a slice has the wrong length.
func (c CrossEntropy[T]) Backward(dlogits, probs []T, targets []int, n, count int, dloss T) {
	const op = "CrossEntropy.Backward"
	c.check(op, "dlogits", probs, dlogits, targets, n)
	mustNonNegative(op, "count", count)
	if count == 0 {
		return
	}
	V := c.V
	scale := dloss / T(count) // the mean's 1/count and the upstream dloss
	for i, tgt := range targets {
		if tgt == c.IgnoreIndex {
			continue // an ignored row does not enter the loss
		}
		pi := probs[i*V : (i+1)*V]
		di := dlogits[i*V : (i+1)*V][:len(pi)]
		// forward was: loss_i = log Σ_j exp(z_j) − z_t, so
		// ∂loss_i/∂z_j = softmax(z)_j − [j == t] = p_j − onehot_j
		for j, p := range pi {
			di[j] += scale * p
		}
		di[tgt] -= scale
	}
}

// check validates sizes and every target. other is the second (n, V) slice:
// logits for the forward, dlogits for the backward.
func (c CrossEntropy[T]) check(op, otherName string, probs, other []T, targets []int, n int) {
	mustPositive(op, "V", c.V)
	mustRows(op, n)
	mustLen(op, "probs", len(probs), n*c.V, "n*V")
	mustLen(op, otherName, len(other), n*c.V, "n*V")
	mustLen(op, "targets", len(targets), n, "n")
	for i, tgt := range targets {
		if tgt != c.IgnoreIndex && (tgt < 0 || tgt >= c.V) {
			panic(fmt.Sprintf("nn: %s: targets[%d] = %d is outside [0, V) with V = %d and is not IgnoreIndex = %d",
				op, i, tgt, c.V, c.IgnoreIndex))
		}
	}
}
