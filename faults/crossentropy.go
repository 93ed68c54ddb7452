package faults

import (
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// CrossEntropy returns the faults of the cross-entropy loss: nn.CrossEntropy
// with its forward or backward replaced.
func CrossEntropy() []Fault[checks.CrossEntropyImpl] {
	ref := checks.CrossEntropyReference
	return []Fault[checks.CrossEntropyImpl]{
		{Name: "ce-no-mean", Impl: with(ref, func(i *checks.CrossEntropyImpl) { i.Backward = ceNoMean }),
			Breaks: "dlogits not divided by the count: the gradient of the sum, while the loss is the mean"},
		{Name: "ce-ignore-counted", FDBlind: true, Impl: with(ref, func(i *checks.CrossEntropyImpl) { i.Forward = ceIgnoreCounted }),
			Breaks: "ignored rows counted in the mean (divided by n, not by the non-ignored rows), in loss and gradient alike"},
		{Name: "ce-dlogits-assigned", FDBlind: true, Impl: with(ref, func(i *checks.CrossEntropyImpl) { i.Backward = ceDLogitsAssigned }),
			Breaks: "dlogits written with = instead of +=: gradients accumulated over micro-batches are lost"},
	}
}

func ceNoMean(c nn.CrossEntropy[float64], dlogits, probs []float64, targets []int, n, count int, dloss float64) {
	c.Backward(dlogits, probs, targets, n, min(count, 1), dloss) // divides by 1, not by count
}

// ceIgnoreCounted returns the loss divided by every row, and n as the count,
// so that the backward divides by n too.
func ceIgnoreCounted(c nn.CrossEntropy[float64], probs, logits []float64, targets []int, n int) (float64, int) {
	loss, count := c.Forward(probs, logits, targets, n)
	if n == 0 {
		return loss, count
	}
	return loss * float64(count) / float64(n), n
}

func ceDLogitsAssigned(c nn.CrossEntropy[float64], dlogits, probs []float64, targets []int, n, count int, dloss float64) {
	clear(dlogits)
	c.Backward(dlogits, probs, targets, n, count, dloss)
}
