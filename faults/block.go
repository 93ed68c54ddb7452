package faults

import (
	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/model"
)

// Block returns the faults of the decoder block.
func Block() []Fault[checks.BlockImpl] {
	return []Fault[checks.BlockImpl]{
		{Name: "block-residual-grad-dropped", Impl: with(checks.BlockReference, func(i *checks.BlockImpl) { i.Backward = blockWithoutResidual }),
			Breaks: "the attention residual's gradient is dropped: dx gets only what flows back through the sublayer"},
	}
}

func blockWithoutResidual(k model.Block[float64], dx []float64, dw *model.BlockWeights[float64], dy, x []float64, w *model.BlockWeights[float64], a *model.BlockActs[float64], c *attention.Config) {
	k.Backward(dx, dw, dy, x, w, a, c)
	for i, g := range a.DH { // take back the residual's dx += ∂L/∂h
		dx[i] -= g
	}
}
