package checks

import (
	"fmt"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
)

type (
	block64        = model.Block[float64]
	blockWeights64 = model.BlockWeights[float64]
	blockActs64    = model.BlockActs[float64]
)

// BlockOps is a decoder block in precision T, as method expressions of
// model.Block.
type BlockOps[T nn.Float] struct {
	Forward  func(k model.Block[T], y []T, a *model.BlockActs[T], x []T, w *model.BlockWeights[T], c *attention.Config) error
	Backward func(k model.Block[T], dx []T, dw *model.BlockWeights[T], dy, x []T, w *model.BlockWeights[T], a *model.BlockActs[T], c *attention.Config)
}

// BlockImpl is a decoder block: its float64 and float32 paths.
type BlockImpl struct {
	BlockOps[float64]
	F32 BlockOps[float32]
}

func blockOps[T nn.Float]() BlockOps[T] {
	return BlockOps[T]{Forward: model.Block[T].Forward, Backward: model.Block[T].Backward}
}

// BlockReference is model.Block.
var BlockReference = BlockImpl{blockOps[float64](), blockOps[float32]()}

func testBlock(dim, hq, hkv, dh, f int) block64 {
	return block64{
		Attn: layer64{Dim: dim, Hq: hq, Hkv: hkv, HeadDim: dh, RoPE: nn.RoPE[float64]{D: dh, Base: 10000}},
		MLP:  nn.SwiGLU[float64]{D: dim, F: f},
		Norm: nn.RMSNorm[float64]{D: dim, Eps: 1e-5},
	}
}

// blockAs is k in precision T.
func blockAs[T nn.Float](k block64) model.Block[T] {
	return model.Block[T]{Attn: layerAs[T](k.Attn), MLP: nn.SwiGLU[T]{D: k.MLP.D, F: k.MLP.F}, Norm: nn.RMSNorm[T]{D: k.Norm.D, Eps: T(k.Norm.Eps)}}
}

func blockWeightsT[T nn.Float](k block64, seed uint64) *model.BlockWeights[T] {
	D, F := k.MLP.D, k.MLP.F
	one := func(x []float64) []T { // norm weights near one, as trained norms are
		for i := range x {
			x[i]++
		}
		return vec.Convert[T](x)
	}
	return &model.BlockWeights[T]{
		AttnNorm: one(randn(seed, D, 0.1)), Attn: *layerWeightsT[T](k.Attn, seed+1), MLPNorm: one(randn(seed+5, D, 0.1)),
		Gate: randT[T](seed+6, F*D, 0.3), Up: randT[T](seed+7, F*D, 0.3), Down: randT[T](seed+8, D*F, 0.3),
	}
}

func blockWeights(k block64, seed uint64) *blockWeights64 { return blockWeightsT[float64](k, seed) }

func blockCase[T nn.Float](ops BlockOps[T], k64 block64, c *attention.Config, seed uint64) Case[T] {
	k := blockAs[T](k64)
	n, D := c.B*c.M, k.MLP.D
	x := randT[T](seed, n*D, 1)
	w := blockWeightsT[T](k64, seed+10)
	a := k.NewBlockActs(c.B, c.M)
	forward := func(y []T) error { return ops.Forward(k, y, a, x, w, c) }
	return Case[T]{
		Name: configName(c) + ", " + shape("Dim", D, "F", k.MLP.F, "Hq", k.Attn.Hq, "Hkv", k.Attn.Hkv, "Dh", k.Attn.HeadDim),
		Inputs: []Input[T]{{"x", x}, {"attn_norm", w.AttnNorm},
			{"Wq", w.Attn.Wq}, {"Wk", w.Attn.Wk}, {"Wv", w.Attn.Wv}, {"Wo", w.Attn.Wo},
			{"mlp_norm", w.MLPNorm}, {"gate", w.Gate}, {"up", w.Up}, {"down", w.Down}},
		Out:     n * D,
		Forward: forward,
		Backward: func(g [][]T, dy []T) error {
			if err := forward(make([]T, n*D)); err != nil {
				return err
			}
			dw := &model.BlockWeights[T]{AttnNorm: g[1], Attn: attention.LayerWeights[T]{Wq: g[2], Wk: g[3], Wv: g[4], Wo: g[5]}, MLPNorm: g[6], Gate: g[7], Up: g[8], Down: g[9]}
			ops.Backward(k, g[0], dw, dy, x, w, a, c)
			return nil
		},
	}
}

func blockCases[T nn.Float](ops BlockOps[T], big bool) []Case[T] {
	if big {
		k := testBlock(32, 8, 2, 8, 64)
		return []Case[T]{blockCase(ops, k, selfConfig(k.Attn, 2, 10, nil), 2)}
	}
	k := testBlock(8, 4, 2, 4, 12)
	return []Case[T]{blockCase(ops, k, selfConfig(k.Attn, 2, 3, []bool{false, true, true, true, true, true}), 1)}
}

// The shape of future-invariance.
var blockFutureT, blockFutureCut = 6, 3

// Block returns the suite of the decoder block.
func Block() Suite[BlockImpl] {
	spec := gradSpec[BlockImpl]{op: "decoder block (x and all ten weights)", ref: BlockReference, dirs: 4,
		cases:   func(i BlockImpl, big bool) []Case[float64] { return blockCases(i.BlockOps, big) },
		cases32: func(i BlockImpl, big bool) []Case[float32] { return blockCases(i.F32, big) }}
	k := testBlock(8, 4, 2, 4, 12)
	return Suite[BlockImpl]{
		Guide: OpGuide{
			What: "One pre-norm Llama decoder block: h = x + Attn(RMSNorm(x)), y = h + SwiGLU(RMSNorm(h)).",
			Forward: []Step{
				{Eq: "h = x + Attn(RMSNorm(x))", Shape: "[B·T,Dim]", Why: "residual around the attention sublayer"},
				{Eq: "y = h + SwiGLU(RMSNorm(h))", Shape: "[B·T,Dim]", Why: "residual around the MLP"},
			},
			Backward: []Step{
				{Eq: "dh = dy + RMSNorm′ᵀ(SwiGLU′ᵀ(dy))", Shape: "[B·T,Dim]", Why: "the residual passes dy straight through and adds the sublayer's path"},
				{Eq: "dx = dh + RMSNorm′ᵀ(Attn′ᵀ(dh))", Shape: "[B·T,Dim]", Why: "the same at the first residual; dropping either identity term loses most of the gradient"},
			},
		},
		Checks: append(spec.checks(),
			Check[BlockImpl]{Name: "future-invariance", Kind: Semantic, Run: blockFuture,
				Claim: "changing later tokens leaves earlier outputs of the whole block bit-identical",
				Limit: "causality of the forward only",
				Long: Long{
					Tests:  fmt.Sprintf("change the inputs of tokens %d..%d; the block's outputs of tokens 0..%d must be bit-identical", blockFutureCut+1, blockFutureT-1, blockFutureCut),
					Shapes: fmt.Sprintf("x [%d,%d], F=%d, Hq=%d, Hkv=%d", blockFutureT, k.MLP.D, k.MLP.F, k.Attn.Hq, k.Attn.Hkv),
					Proves: "causality through norms, attention, MLP and residuals",
					Cannot: "the gradients",
				}},
		),
		At: func(impl BlockImpl, s Sizes, seed uint64) Case[float64] {
			k := blockSized(s)
			return blockCase(impl.BlockOps, k, selfConfig(k.Attn, s.B, s.T, nil), seed)
		},
		At32: func(impl BlockImpl, s Sizes, seed uint64) Case[float32] {
			k := blockSized(s)
			return blockCase(impl.F32, k, selfConfig(k.Attn, s.B, s.T, nil), seed)
		},
		Reads: "B sequences of T tokens of width Dim, Hq and Hkv heads of D, SwiGLU width F, causal",
	}
}

func blockSized(s Sizes) block64 {
	k := testBlock(s.Dim, s.Hq, s.Hkv, s.D, s.F)
	k.Attn.RoPE.Pairing = s.Pairing
	return k
}

func blockFuture(impl BlockImpl) Result {
	k := testBlock(8, 4, 2, 4, 12)
	T, cut := blockFutureT, blockFutureCut
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
