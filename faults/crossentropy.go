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
		{Name: "ce-backward-mean-over-n", Impl: with(ref, func(i *checks.CrossEntropyImpl) { i.Backward = ceBackwardOverN }),
			Breaks: "dlogits divided by every row, ignored ones included, while the loss is the mean over the counted rows"},
		{Name: "ce-onehot-not-subtracted", Impl: with(ref, func(i *checks.CrossEntropyImpl) { i.Backward = ceOneHotKept }),
			Breaks: "dlogits = dloss·p/count: the one-hot of the target is not subtracted"},
		{Name: "ce-ignored-rows-get-gradient", Impl: with(ref, func(i *checks.CrossEntropyImpl) { i.Backward = ceIgnoredRowsDifferentiated }),
			Breaks: "ignored rows get dloss·p/count: they leave the loss but not the backward"},
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

func ceBackwardOverN(c nn.CrossEntropy[float64], dlogits, probs []float64, targets []int, n, count int, dloss float64) {
	c.Backward(dlogits, probs, targets, n, n, dloss) // count belongs here
}

func ceOneHotKept(c nn.CrossEntropy[float64], dlogits, probs []float64, targets []int, n, count int, dloss float64) {
	V := c.V
	for i, t := range targets {
		if t == c.IgnoreIndex {
			continue
		}
		for j := range V {
			dlogits[i*V+j] += dloss * probs[i*V+j] / float64(count) // − onehot belongs here
		}
	}
}

func ceIgnoredRowsDifferentiated(c nn.CrossEntropy[float64], dlogits, probs []float64, targets []int, n, count int, dloss float64) {
	c.Backward(dlogits, probs, targets, n, count, dloss)
	if count == 0 {
		return
	}
	V := c.V
	for i, t := range targets {
		if t == c.IgnoreIndex {
			for j := range V {
				dlogits[i*V+j] += dloss * probs[i*V+j] / float64(count)
			}
		}
	}
}
