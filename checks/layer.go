package checks

import (
	"math"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

type (
	layer64   = attention.Layer[float64]
	weights64 = attention.LayerWeights[float64]
	acts64    = attention.LayerActs[float64]
)

// LayerImpl is an attention layer (projections, RoPE, attention, output
// projection) in float64, as method expressions of attention.Layer.
type LayerImpl struct {
	Forward  func(l layer64, y []float64, a *acts64, x []float64, w *weights64, c *attention.Config) error
	Backward func(l layer64, dx []float64, dw *weights64, dy, x []float64, w *weights64, a *acts64, c *attention.Config)
}

// LayerReference is attention.Layer.
var LayerReference = LayerImpl{Forward: layer64.Forward, Backward: layer64.Backward}

// testLayer is a small layer with grouped-query heads.
func testLayer(hq, hkv int) layer64 {
	return layer64{Dim: 8, Hq: hq, Hkv: hkv, HeadDim: 4, RoPE: nn.RoPE[float64]{D: 4, Base: 10000}}
}

func layerWeights(l layer64, seed uint64) *weights64 {
	s := 1 / math.Sqrt(float64(l.Dim))
	q, kv := l.Hq*l.HeadDim, l.Hkv*l.HeadDim
	return &weights64{Wq: randn(seed, q*l.Dim, s), Wk: randn(seed+1, kv*l.Dim, s), Wv: randn(seed+2, kv*l.Dim, s), Wo: randn(seed+3, l.Dim*q, s)}
}

// selfConfig is causal self-attention over B sequences of T tokens with the
// given validity (nil: all real), positions counted over real tokens.
func selfConfig(l layer64, B, T int, valid []bool) *attention.Config {
	c := &attention.Config{B: B, Hq: l.Hq, Hkv: l.Hkv, M: T, N: T, D: l.HeadDim, Dv: l.HeadDim, Causal: true}
	if valid != nil {
		pos := attention.PositionsFromValidity(valid, B, T)
		c.QValid, c.KValid, c.QPos, c.KPos = valid, valid, pos, pos
	}
	return c
}

func layerDiff(impl LayerImpl, l layer64, c *attention.Config, seed uint64) Diff {
	n := c.B * c.M
	x := randn(seed, n*l.Dim, 1)
	w := layerWeights(l, seed+10)
	a := l.NewLayerActs(c.B, c.M)
	forward := func(y []float64) {
		if err := impl.Forward(l, y, a, x, w, c); err != nil {
			panic(err)
		}
	}
	return Diff{
		Name:    shape("B", c.B, "T", c.M, "Dim", l.Dim, "Hq", l.Hq, "Hkv", l.Hkv),
		Inputs:  []gradcheck.Param{{Name: "x", X: x}, {Name: "Wq", X: w.Wq}, {Name: "Wk", X: w.Wk}, {Name: "Wv", X: w.Wv}, {Name: "Wo", X: w.Wo}},
		Out:     n * l.Dim,
		Forward: forward,
		Backward: func(g [][]float64, dy []float64) {
			forward(make([]float64, n*l.Dim))
			impl.Backward(l, g[0], &weights64{Wq: g[1], Wk: g[2], Wv: g[3], Wo: g[4]}, dy, x, w, a, c)
		},
	}
}

// Layer returns the checks of the attention layer.
func Layer() []Check[LayerImpl] {
	small := func(impl LayerImpl) []Diff {
		l := testLayer(4, 2)
		return []Diff{
			layerDiff(impl, l, selfConfig(l, 2, 4, []bool{false, true, true, true, true, true, true, true}), 1),
			layerDiff(impl, testLayer(2, 1), selfConfig(testLayer(2, 1), 1, 3, nil), 2),
		}
	}
	big := func(impl LayerImpl) []Diff {
		l := layer64{Dim: 32, Hq: 8, Hkv: 2, HeadDim: 8, RoPE: nn.RoPE[float64]{D: 8, Base: 10000}}
		return []Diff{layerDiff(impl, l, selfConfig(l, 2, 12, nil), 3)}
	}
	return append(gradientChecks("attention layer (x and Wq, Wk, Wv, Wo)", small, big),
		Check[LayerImpl]{Name: "future-invariance", Kind: Semantic, Run: layerFuture,
			Claim: "changing later tokens' inputs leaves earlier outputs of the layer bit-identical",
			Limit: "causality of the forward only"},
		Check[LayerImpl]{Name: "padding-invariance", Kind: Semantic, Run: layerPadding,
			Claim: "padding on the left or inside (empty cache slots) leaves real tokens' outputs unchanged: RoPE positions count real tokens, not array slots",
			Limit: "left padding alone cannot tell positions from indices (RoPE is relative); the inside gap can"},
		Check[LayerImpl]{Name: "position-shift", Kind: Semantic, Run: layerShift,
			Claim: "shifting every position by 1000 leaves the outputs unchanged: with RoPE on q and k, scores depend only on position differences",
			Limit: "exact in real arithmetic; rounding of the large angles allows 1e-9"},
		Check[LayerImpl]{Name: "gqa-equals-mha", Kind: Semantic, Run: layerGQA,
			Claim: "a GQA layer equals an MHA layer whose Wk, Wv rows repeat each KV head over its group; dWk, dWv equal the group sums",
			Limit: "the contiguous head grouping is taken as the definition"},
	)
}

// runLayer runs forward (and backward when dy is given) on fresh buffers.
func runLayer(impl LayerImpl, l layer64, c *attention.Config, x []float64, w *weights64, dy []float64) (y, dx []float64, dw *weights64, err error) {
	n := c.B * c.M
	a := l.NewLayerActs(c.B, c.M)
	y = make([]float64, n*l.Dim)
	err = protect(func() error {
		if err := impl.Forward(l, y, a, x, w, c); err != nil {
			return err
		}
		if dy != nil {
			dx, dw = make([]float64, n*l.Dim), l.NewLayerWeights()
			impl.Backward(l, dx, dw, dy, x, w, a, c)
		}
		return nil
	})
	return y, dx, dw, err
}

func layerFuture(impl LayerImpl) Result {
	l := testLayer(4, 2)
	const T, cut = 6, 2
	c := selfConfig(l, 1, T, nil)
	w := layerWeights(l, 40)
	x := randn(41, T*l.Dim, 1)
	y, _, _, err := runLayer(impl, l, c, x, w, nil)
	if err != nil {
		return errored(err, "%v")
	}
	x2 := clone(x)
	copy(x2[(cut+1)*l.Dim:], randn(42, (T-cut-1)*l.Dim, 1))
	y2, _, _, err := runLayer(impl, l, c, x2, w, nil)
	if err != nil {
		return errored(err, "%v")
	}
	for i := range (cut + 1) * l.Dim {
		if y[i] != y2[i] {
			return fail("output of token %d changed from %.17g to %.17g when only tokens %d.. changed", i/l.Dim, y[i], y2[i], cut+1)
		}
	}
	return pass("outputs of tokens 0..%d bit-identical after tokens %d..%d changed", cut, cut+1, T-1)
}

func layerPadding(impl LayerImpl) Result {
	l := testLayer(4, 2)
	const L = 5
	w := layerWeights(l, 50)
	x := randn(51, L*l.Dim, 1)
	want, _, _, err := runLayer(impl, l, selfConfig(l, 1, L, nil), x, w, nil)
	if err != nil {
		return errored(err, "unpadded: %v")
	}
	var worst float64
	// Two pads on the left, and two empty slots inside (a batched cache
	// whose row is shorter than the others, then a new token).
	for _, valid := range [][]bool{
		{false, false, true, true, true, true, true},
		{true, true, true, true, false, false, true},
	} {
		xp := randn(52, len(valid)*l.Dim, 1)
		var real []float64
		t := 0
		for i, v := range valid {
			if v {
				copy(xp[i*l.Dim:(i+1)*l.Dim], x[t*l.Dim:])
				t++
			}
		}
		got, _, _, err := runLayer(impl, l, selfConfig(l, 1, len(valid), valid), xp, w, nil)
		if err != nil {
			return errored(err, "padded: %v")
		}
		for i, v := range valid {
			if v {
				real = append(real, got[i*l.Dim:(i+1)*l.Dim]...)
			}
		}
		d, msg := compare(identical, pair{"y", real, want})
		worst = max(worst, d)
		if msg != "" {
			res := fail("validity %v: %s", valid, msg)
			res.Error = d
			return res
		}
	}
	res := pass("real tokens' outputs unchanged by 2 left pads and by 2 empty slots inside, max error %.1e", worst)
	res.Error = worst
	return res
}

func layerShift(impl LayerImpl) Result {
	l := testLayer(4, 2)
	const T, shift = 5, 1000
	w := layerWeights(l, 60)
	x := randn(61, T*l.Dim, 1)
	c := selfConfig(l, 1, T, nil)
	want, _, _, err := runLayer(impl, l, c, x, w, nil)
	if err != nil {
		return errored(err, "%v")
	}
	pos := make([]int, T)
	for i := range pos {
		pos[i] = i + shift
	}
	cs := *c
	cs.QPos, cs.KPos = pos, pos
	got, _, _, err := runLayer(impl, l, &cs, x, w, nil)
	if err != nil {
		return errored(err, "%v")
	}
	d, msg := compare(1e-9, pair{"y", got, want})
	res := pass("positions shifted by %d: outputs unchanged, max error %.1e", shift, d)
	if msg != "" {
		res = fail("positions shifted by %d: %s", shift, msg)
	}
	res.Error = d
	return res
}

func layerGQA(impl LayerImpl) Result {
	gqa, mha := testLayer(4, 2), testLayer(4, 4)
	const B, T = 1, 4
	w := layerWeights(gqa, 70)
	group, Dh, D := gqa.Hq/gqa.Hkv, gqa.HeadDim, gqa.Dim
	repeat := func(m []float64) []float64 { // rows of KV head g, repeated for each query head of its group
		out := make([]float64, 0, mha.Hkv*Dh*D)
		for h := range mha.Hkv {
			g := h / group
			out = append(out, m[g*Dh*D:(g+1)*Dh*D]...)
		}
		return out
	}
	wm := &weights64{Wq: w.Wq, Wk: repeat(w.Wk), Wv: repeat(w.Wv), Wo: w.Wo}
	x, dy := randn(71, B*T*D, 1), randn(72, B*T*D, 1)
	y1, dx1, dw1, err := runLayer(impl, gqa, selfConfig(gqa, B, T, nil), x, w, dy)
	if err != nil {
		return errored(err, "GQA: %v")
	}
	y2, dx2, dw2, err := runLayer(impl, mha, selfConfig(mha, B, T, nil), x, wm, dy)
	if err != nil {
		return errored(err, "MHA: %v")
	}
	sum := func(m []float64) []float64 { // group sums of per-head rows
		out := make([]float64, gqa.Hkv*Dh*D)
		for h := range mha.Hkv {
			g := h / group
			for i := range Dh * D {
				out[g*Dh*D+i] += m[h*Dh*D+i]
			}
		}
		return out
	}
	d, msg := compare(identical, pair{"y", y1, y2}, pair{"dx", dx1, dx2}, pair{"dWq", dw1.Wq, dw2.Wq},
		pair{"dWo", dw1.Wo, dw2.Wo}, pair{"dWk", dw1.Wk, sum(dw2.Wk)}, pair{"dWv", dw1.Wv, sum(dw2.Wv)})
	res := pass("y, dx, dWq, dWo equal; dWk, dWv equal the MHA group sums, max error %.1e", d)
	if msg != "" {
		res = fail("%s", msg)
	}
	res.Error = d
	return res
}
