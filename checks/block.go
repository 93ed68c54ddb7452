package checks

import (
	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
)

type (
	block64        = model.Block[float64]
	blockWeights64 = model.BlockWeights[float64]
	blockActs64    = model.BlockActs[float64]
)

// BlockImpl is a decoder block in float64, as method expressions of
// model.Block.
type BlockImpl struct {
	Forward  func(k block64, y []float64, a *blockActs64, x []float64, w *blockWeights64, c *attention.Config) error
	Backward func(k block64, dx []float64, dw *blockWeights64, dy, x []float64, w *blockWeights64, a *blockActs64, c *attention.Config)
}

// BlockReference is model.Block.
var BlockReference = BlockImpl{Forward: block64.Forward, Backward: block64.Backward}

func testBlock(dim, hq, hkv, dh, f int) block64 {
	return block64{
		Attn: layer64{Dim: dim, Hq: hq, Hkv: hkv, HeadDim: dh, RoPE: nn.RoPE[float64]{D: dh, Base: 10000}},
		MLP:  nn.SwiGLU[float64]{D: dim, F: f},
		Norm: nn.RMSNorm[float64]{D: dim, Eps: 1e-5},
	}
}

func blockWeights(k block64, seed uint64) *blockWeights64 {
	D, F := k.MLP.D, k.MLP.F
	w := &blockWeights64{
		AttnNorm: randn(seed, D, 0.1), Attn: *layerWeights(k.Attn, seed+1), MLPNorm: randn(seed+5, D, 0.1),
		Gate: randn(seed+6, F*D, 0.3), Up: randn(seed+7, F*D, 0.3), Down: randn(seed+8, D*F, 0.3),
	}
	for i := range w.AttnNorm {
		w.AttnNorm[i]++
		w.MLPNorm[i]++
	}
	return w
}

func blockDiff(impl BlockImpl, k block64, c *attention.Config, seed uint64) Diff {
	n, D := c.B*c.M, k.MLP.D
	x := randn(seed, n*D, 1)
	w := blockWeights(k, seed+10)
	a := k.NewBlockActs(c.B, c.M)
	forward := func(y []float64) {
		if err := impl.Forward(k, y, a, x, w, c); err != nil {
			panic(err)
		}
	}
	return Diff{
		Name: shape("B", c.B, "T", c.M, "Dim", D, "F", k.MLP.F, "Hq", k.Attn.Hq, "Hkv", k.Attn.Hkv),
		Inputs: []gradcheck.Param{{Name: "x", X: x}, {Name: "attn_norm", X: w.AttnNorm},
			{Name: "Wq", X: w.Attn.Wq}, {Name: "Wk", X: w.Attn.Wk}, {Name: "Wv", X: w.Attn.Wv}, {Name: "Wo", X: w.Attn.Wo},
			{Name: "mlp_norm", X: w.MLPNorm}, {Name: "gate", X: w.Gate}, {Name: "up", X: w.Up}, {Name: "down", X: w.Down}},
		Out:     n * D,
		Forward: forward,
		Backward: func(g [][]float64, dy []float64) {
			forward(make([]float64, n*D))
			dw := &blockWeights64{AttnNorm: g[1], Attn: weights64{Wq: g[2], Wk: g[3], Wv: g[4], Wo: g[5]}, MLPNorm: g[6], Gate: g[7], Up: g[8], Down: g[9]}
			impl.Backward(k, g[0], dw, dy, x, w, a, c)
		},
	}
}

// Block returns the checks of the decoder block.
func Block() []Check[BlockImpl] {
	small := func(impl BlockImpl) []Diff {
		k := testBlock(8, 4, 2, 4, 12)
		l := k.Attn
		return []Diff{blockDiff(impl, k, selfConfig(l, 2, 3, []bool{false, true, true, true, true, true}), 1)}
	}
	big := func(impl BlockImpl) []Diff {
		k := testBlock(32, 8, 2, 8, 64)
		return []Diff{blockDiff(impl, k, selfConfig(k.Attn, 2, 10, nil), 2)}
	}
	return append(gradientChecks("decoder block (x and all ten weights)", small, big),
		Check[BlockImpl]{Name: "future-invariance", Kind: Semantic, Run: blockFuture,
			Claim: "changing later tokens leaves earlier outputs of the whole block bit-identical",
			Limit: "causality of the forward only"},
	)
}

func blockFuture(impl BlockImpl) Result {
	k := testBlock(8, 4, 2, 4, 12)
	const T, cut = 6, 3
	c := selfConfig(k.Attn, 1, T, nil)
	D := k.MLP.D
	w := blockWeights(k, 80)
	x := randn(81, T*D, 1)
	run := func(x []float64) ([]float64, error) {
		y := make([]float64, T*D)
		err := protect(func() error { return impl.Forward(k, y, k.NewBlockActs(1, T), x, w, c) })
		return y, err
	}
	y, err := run(x)
	if err != nil {
		return errored(err, "%v")
	}
	x2 := clone(x)
	copy(x2[(cut+1)*D:], randn(82, (T-cut-1)*D, 1))
	y2, err := run(x2)
	if err != nil {
		return errored(err, "%v")
	}
	for i := range (cut + 1) * D {
		if y[i] != y2[i] {
			return fail("output of token %d changed when only tokens %d.. changed", i/D, cut+1)
		}
	}
	return pass("outputs of tokens 0..%d bit-identical after tokens %d..%d changed", cut, cut+1, T-1)
}
