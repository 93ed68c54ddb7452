package faults

import (
	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

type (
	layer64   = attention.Layer[float64]
	weights64 = attention.LayerWeights[float64]
	acts64    = attention.LayerActs[float64]
)

// Layer returns the faults of the attention layer.
func Layer() []Fault[checks.LayerImpl] {
	ref := checks.LayerReference
	return []Fault[checks.LayerImpl]{
		{Name: "layer-dx-missing-v-path", Impl: with(ref, func(i *checks.LayerImpl) { i.Backward = layerWithoutVPath }),
			Breaks: "dx sums the Q and K paths only: the V projection's gradient never reaches x"},
		{Name: "layer-positions-from-index", FDBlind: true, Impl: with(ref, func(i *checks.LayerImpl) {
			i.Forward, i.Backward = layerIndexPositionsForward, layerIndexPositionsBackward
		}),
			Breaks: "RoPE rotates by array index instead of the tokens' positions: empty cache slots stretch every distance"},
	}
}

func layerWithoutVPath(l layer64, dx []float64, dw *weights64, dy, x []float64, w *weights64, a *acts64, c *attention.Config) {
	l.Backward(dx, dw, dy, x, w, a, c)
	// take back what the V path added: dx −= DVProj Wv
	vpath := make([]float64, len(dx))
	nn.Linear[float64]{In: l.Dim, Out: l.Hkv * l.HeadDim}.Backward(vpath, make([]float64, len(w.Wv)), nil, a.DVProj, x, w.Wv, c.B*c.M)
	for i := range dx {
		dx[i] -= vpath[i]
	}
}

func indexPositions(c *attention.Config) *attention.Config {
	d := *c
	d.QPos, d.KPos = nil, nil // positions fall back to array indices
	return &d
}

func layerIndexPositionsForward(l layer64, y []float64, a *acts64, x []float64, w *weights64, c *attention.Config) error {
	return l.Forward(y, a, x, w, indexPositions(c))
}

func layerIndexPositionsBackward(l layer64, dx []float64, dw *weights64, dy, x []float64, w *weights64, a *acts64, c *attention.Config) {
	l.Backward(dx, dw, dy, x, w, a, indexPositions(c))
}
