package checks

import (
	"fmt"
	"math"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/nn"
)

type (
	layer64   = attention.Layer[float64]
	weights64 = attention.LayerWeights[float64]
	acts64    = attention.LayerActs[float64]
)

// LayerOps is an attention layer (projections, RoPE, attention, output
// projection) in precision T, as method expressions of attention.Layer.
type LayerOps[T nn.Float] struct {
	Forward  func(l attention.Layer[T], y []T, a *attention.LayerActs[T], x []T, w *attention.LayerWeights[T], c *attention.Config) error
	Backward func(l attention.Layer[T], dx []T, dw *attention.LayerWeights[T], dy, x []T, w *attention.LayerWeights[T], a *attention.LayerActs[T], c *attention.Config)
}

// LayerImpl is an attention layer: its float64 path and its float32 path
// (GEMM projections, fused attention tiles).
type LayerImpl struct {
	LayerOps[float64]
	F32 LayerOps[float32]
}

func layerOps[T nn.Float]() LayerOps[T] {
	return LayerOps[T]{Forward: attention.Layer[T].Forward, Backward: attention.Layer[T].Backward}
}

// LayerReference is attention.Layer.
var LayerReference = LayerImpl{layerOps[float64](), layerOps[float32]()}

// testLayer is a small layer with grouped-query heads.
func testLayer(hq, hkv int) layer64 {
	return layer64{Dim: 8, Hq: hq, Hkv: hkv, HeadDim: 4, RoPE: nn.RoPE[float64]{D: 4, Base: 10000}}
}

// layerAs is l in precision T.
func layerAs[T nn.Float](l layer64) attention.Layer[T] {
	return attention.Layer[T]{Dim: l.Dim, Hq: l.Hq, Hkv: l.Hkv, HeadDim: l.HeadDim, RoPE: nn.RoPE[T](l.RoPE)}
}

func layerWeightsT[T nn.Float](l layer64, seed uint64) *attention.LayerWeights[T] {
	s := 1 / math.Sqrt(float64(l.Dim))
	q, kv := l.Hq*l.HeadDim, l.Hkv*l.HeadDim
	return &attention.LayerWeights[T]{Wq: randT[T](seed, q*l.Dim, s), Wk: randT[T](seed+1, kv*l.Dim, s), Wv: randT[T](seed+2, kv*l.Dim, s), Wo: randT[T](seed+3, l.Dim*q, s)}
}

func layerWeights(l layer64, seed uint64) *weights64 { return layerWeightsT[float64](l, seed) }

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

// configName names an attention configuration by its sizes and mask.
func configName(c *attention.Config) string {
	s := shape("B", c.B, "T", c.M)
	if c.QValid != nil {
		pads := 0
		for _, v := range c.QValid {
			if !v {
				pads++
			}
		}
		s += fmt.Sprintf(", %d padding", pads)
	}
	return s
}

func layerCase[T nn.Float](ops LayerOps[T], l64 layer64, c *attention.Config, seed uint64) Case[T] {
	l := layerAs[T](l64)
	n := c.B * c.M
	x := randT[T](seed, n*l.Dim, 1)
	w := layerWeightsT[T](l64, seed+10)
	a := l.NewLayerActs(c.B, c.M)
	forward := func(y []T) error { return ops.Forward(l, y, a, x, w, c) }
	return Case[T]{
		Name:    configName(c) + ", " + shape("Dim", l.Dim, "Hq", l.Hq, "Hkv", l.Hkv, "Dh", l.HeadDim),
		Inputs:  []Input[T]{{"x", x}, {"Wq", w.Wq}, {"Wk", w.Wk}, {"Wv", w.Wv}, {"Wo", w.Wo}},
		Out:     n * l.Dim,
		Forward: forward,
		Backward: func(g [][]T, dy []T) error {
			if err := forward(make([]T, n*l.Dim)); err != nil {
				return err
			}
			ops.Backward(l, g[0], &attention.LayerWeights[T]{Wq: g[1], Wk: g[2], Wv: g[3], Wo: g[4]}, dy, x, w, a, c)
			return nil
		},
	}
}

func layerCases[T nn.Float](ops LayerOps[T], big bool) []Case[T] {
	if big {
		l := layer64{Dim: 32, Hq: 8, Hkv: 2, HeadDim: 8, RoPE: nn.RoPE[float64]{D: 8, Base: 10000}}
		return []Case[T]{layerCase(ops, l, selfConfig(l, 2, 12, nil), 3)}
	}
	l := testLayer(4, 2)
	return []Case[T]{
		layerCase(ops, l, selfConfig(l, 2, 4, []bool{false, true, true, true, true, true, true, true}), 1),
		layerCase(ops, testLayer(2, 1), selfConfig(testLayer(2, 1), 1, 3, nil), 2),
	}
}

// The shapes of the semantic checks.
var (
	layerFutureT, layerFutureCut = 6, 2
	layerPadL                    = 5
	layerPadValid                = [][]bool{
		{false, false, true, true, true, true, true},
		{true, true, true, true, false, false, true},
	}
	layerShiftT, layerShift = 5, 1000
	layerShiftTol           = 1e-9            // what the rounding of angles near 1000 radians allows
	layerGQAHeads           = [3]int{4, 2, 4} // Hq, Hkv of the GQA layer, Hkv of the MHA one
	layerGQAB, layerGQAT    = 1, 4
)

// Layer returns the suite of the attention layer.
func Layer() Suite[LayerImpl] {
	spec := gradSpec[LayerImpl]{op: "attention layer (x and Wq, Wk, Wv, Wo)", ref: LayerReference, dirs: 4,
		cases:   func(i LayerImpl, big bool) []Case[float64] { return layerCases(i.LayerOps, big) },
		cases32: func(i LayerImpl, big bool) []Case[float32] { return layerCases(i.F32, big) }}
	l := testLayer(4, 2)
	return Suite[LayerImpl]{
		Guide: OpGuide{
			What: "The attention sublayer of a Llama block: q, k, v projections, RoPE at the tokens' positions, GQA attention (the fused kernel), output projection.",
			Forward: []Step{
				{Eq: "q = x Wqᵀ,  k = x Wkᵀ,  v = x Wvᵀ", Shape: "x [B·T,Dim], Wq [Hq·Dh,Dim], Wk, Wv [Hkv·Dh,Dim]", Why: "projections, then split into heads"},
				{Eq: "q = RoPE(q, qpos),  k = RoPE(k, kpos)", Shape: "[B,H,T,Dh]", Why: "positions, never array indices"},
				{Eq: "o = attention(q, k, v),  y = o Woᵀ", Shape: "o [B·T,Hq·Dh], Wo [Dim,Hq·Dh] → y [B·T,Dim]", Why: "the attention op above"},
			},
			Backward: []Step{
				{Eq: "do = dy Wo,  dWo = dyᵀ o", Shape: "[B·T,Hq·Dh], [Dim,Hq·Dh]", Why: "the output projection"},
				{Eq: "dq, dk, dv = attention backward", Shape: "head layout", Why: "the V path and the Q/K path of the attention op"},
				{Eq: "dq, dk rotated back by −θ (RoPE backward)", Shape: "[B,H,T,Dh]", Why: "the transpose of the rotation"},
				{Eq: "dx = dq Wq + dk Wk + dv Wv,  dWq = dqᵀ x, …", Shape: "dx [B·T,Dim]",
					Why: "q, k and v all come from x: its gradient is the sum of the three paths"},
			},
		},
		Checks: append(spec.checks(),
			Check[LayerImpl]{Name: "future-invariance", Kind: Semantic, Run: layerFuture,
				Claim: "changing later tokens' inputs leaves earlier outputs of the layer bit-identical",
				Limit: "causality of the forward only",
				Long: Long{
					Tests:  fmt.Sprintf("change the inputs of tokens %d..%d; the outputs of tokens 0..%d must be bit-identical", layerFutureCut+1, layerFutureT-1, layerFutureCut),
					Shapes: fmt.Sprintf("x [%d,%d], Hq=%d, Hkv=%d", layerFutureT, l.Dim, l.Hq, l.Hkv),
					Proves: "causality through projections, RoPE and attention",
					Cannot: "the gradients",
				}},
			Check[LayerImpl]{Name: "padding-invariance", Kind: Semantic, Run: layerPadding,
				Claim: "padding on the left or inside (empty cache slots) leaves real tokens' outputs unchanged: RoPE positions count real tokens, not array slots",
				Limit: "left padding alone cannot tell positions from indices (RoPE is relative); the inside gap can",
				Long: Long{
					Tests:  "padding on the left or inside (empty cache slots) leaves real tokens' outputs unchanged: RoPE positions count real tokens, not array slots",
					Shapes: fmt.Sprintf("%d real tokens; validity %s", layerPadL, list(boolRows(layerPadValid))),
					Proves: "positions come from the tokens, not from array indices",
					Cannot: "left padding alone (RoPE is relative, a uniform shift is invisible); the inside gap is what tells",
				}},
			Check[LayerImpl]{Name: "position-shift", Kind: Semantic, Run: layerShiftCheck,
				Claim: fmt.Sprintf("shifting every position by %d leaves the outputs unchanged: with RoPE on q and k, scores depend only on position differences", layerShift),
				Limit: fmt.Sprintf("exact in real arithmetic; rounding of the large angles allows %g", layerShiftTol),
				Long: Long{
					Tests:  fmt.Sprintf("shifting every position by %d leaves the outputs unchanged", layerShift),
					Shapes: fmt.Sprintf("x [%d,%d]", layerShiftT, l.Dim),
					Proves: "with RoPE on q and k, scores see only position differences",
					Cannot: fmt.Sprintf("exact in real arithmetic only; rounding of large angles allows %g", layerShiftTol),
				}},
			Check[LayerImpl]{Name: "gqa-equals-mha", Kind: Semantic, Run: layerGQA,
				Claim: "a GQA layer equals an MHA layer whose Wk, Wv rows repeat each KV head over its group; dWk, dWv equal the group sums",
				Limit: "the contiguous head grouping is taken as the definition",
				Long: Long{
					Tests:  "a GQA layer equals an MHA layer whose Wk, Wv rows repeat each KV head over its group; dWk, dWv equal the group sums",
					Shapes: fmt.Sprintf("Wk, Wv [%d·%d,%d] against [%d·%d,%d]; B=%d, T=%d", layerGQAHeads[1], l.HeadDim, l.Dim, layerGQAHeads[2], l.HeadDim, l.Dim, layerGQAB, layerGQAT),
					Proves: "head mapping and gradient accumulation through the projections",
					Cannot: "that contiguous grouping is what a checkpoint expects",
				}},
		),
		At: func(impl LayerImpl, s Sizes, seed uint64) Case[float64] {
			l := layerSized(s)
			return layerCase(impl.LayerOps, l, selfConfig(l, s.B, s.T, nil), seed)
		},
		At32: func(impl LayerImpl, s Sizes, seed uint64) Case[float32] {
			l := layerSized(s)
			return layerCase(impl.F32, l, selfConfig(l, s.B, s.T, nil), seed)
		},
		Reads: "B sequences of T tokens of width Dim, Hq and Hkv heads of D, causal, RoPE with the given pairing",
	}
}

func layerSized(s Sizes) layer64 {
	return layer64{Dim: s.Dim, Hq: s.Hq, Hkv: s.Hkv, HeadDim: s.D, RoPE: nn.RoPE[float64]{D: s.D, Base: 10000, Pairing: s.Pairing}}
}

// boolRows draws validity rows as strings of 1 (real) and 0 (padding).
func boolRows(rows [][]bool) []string {
	var out []string
	for _, r := range rows {
		var b strings.Builder
		for _, v := range r {
			b.WriteByte("01"[b2i(v)])
		}
		out = append(out, b.String())
	}
	return out
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
	T, cut := layerFutureT, layerFutureCut
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
	L := layerPadL
	w := layerWeights(l, 50)
	x := randn(51, L*l.Dim, 1)
	want, _, _, err := runLayer(impl, l, selfConfig(l, 1, L, nil), x, w, nil)
	if err != nil {
		return errored(err, "unpadded: %v")
	}
	var worst float64
	// Two pads on the left, and two empty slots inside (a batched cache
	// whose row is shorter than the others, then a new token).
	for _, valid := range layerPadValid {
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
			return measured(fail("validity %v: %s", valid, msg), d)
		}
	}
	return measured(pass("real tokens' outputs unchanged by 2 left pads and by 2 empty slots inside, max error %.1e", worst), worst)
}

func layerShiftCheck(impl LayerImpl) Result {
	l := testLayer(4, 2)
	T, shift := layerShiftT, layerShift
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
	d, msg := compare(layerShiftTol, pair{"y", got, want})
	if msg != "" {
		msg = fmt.Sprintf("positions shifted by %d: %s", shift, msg)
	}
	return compared(d, msg, "positions shifted by %d: outputs unchanged, max error %.1e", shift, d)
}

func layerGQA(impl LayerImpl) Result {
	gqa, mha := testLayer(layerGQAHeads[0], layerGQAHeads[1]), testLayer(layerGQAHeads[0], layerGQAHeads[2])
	B, T := layerGQAB, layerGQAT
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
	return compared(d, msg, "y, dx, dWq, dWo equal; dWk, dWv equal the MHA group sums, max error %.1e", d)
}
