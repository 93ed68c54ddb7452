package model

import (
	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/nn"
)

// Block is one pre-norm Llama decoder block: for x (B·T, Dim),
//
//	h = x + Attn(RMSNorm(x))
//	y = h + SwiGLU(RMSNorm(h))
//
// The two RMSNorms share width and ε but have their own weights.
type Block[T nn.Float] struct {
	Attn attention.Layer[T]
	MLP  nn.SwiGLU[T]
	Norm nn.RMSNorm[T]
}

// BlockWeights are a block's parameters, Hugging Face names in comments.
// Used for gradients too.
type BlockWeights[T nn.Float] struct {
	AttnNorm       []T                       // input_layernorm.weight (Dim)
	Attn           attention.LayerWeights[T] // self_attn.{q,k,v,o}_proj.weight
	MLPNorm        []T                       // post_attention_layernorm.weight (Dim)
	Gate, Up, Down []T                       // mlp.{gate,up,down}_proj.weight
}

// NewBlockWeights returns zeroed weights of the block's shapes.
func (k Block[T]) NewBlockWeights() *BlockWeights[T] {
	D, F := k.MLP.D, k.MLP.F
	return &BlockWeights[T]{
		AttnNorm: make([]T, D), Attn: *k.Attn.NewLayerWeights(), MLPNorm: make([]T, D),
		Gate: make([]T, F*D), Up: make([]T, F*D), Down: make([]T, D*F),
	}
}

// BlockActs holds what Forward saves for Backward, and Backward's
// intermediate gradients.
type BlockActs[T nn.Float] struct {
	X1, Rstd1 []T // RMSNorm(x) and its 1/r
	Attn      *attention.LayerActs[T]
	AttnOut   []T // Attn(RMSNorm(x))
	H         []T // x + AttnOut
	X2, Rstd2 []T // RMSNorm(h) and its 1/r
	A, U, G   []T // SwiGLU caches: gate and up projections, silu(A) ⊙ U

	// Set by Backward: ∂L/∂h (the residual stream between the sublayers),
	// and ∂L/∂X1, ∂L/∂X2.
	DH, DX1, DX2 []T

	mlpOut []T
}

// NewBlockActs returns activations for B sequences of T tokens.
func (k Block[T]) NewBlockActs(B, Tn int) *BlockActs[T] {
	n, D, F := B*Tn, k.MLP.D, k.MLP.F
	return &BlockActs[T]{
		X1: make([]T, n*D), Rstd1: make([]T, n), Attn: k.Attn.NewLayerActs(B, Tn), AttnOut: make([]T, n*D),
		H: make([]T, n*D), X2: make([]T, n*D), Rstd2: make([]T, n),
		A: make([]T, n*F), U: make([]T, n*F), G: make([]T, n*F),
		DH: make([]T, n*D), DX1: make([]T, n*D), DX2: make([]T, n*D), mlpOut: make([]T, n*D),
	}
}

// Forward computes y (B·T, Dim) from x and saves activations in a. It
// returns the attention's error for a valid query that sees no key.
func (k Block[T]) Forward(y []T, a *BlockActs[T], x []T, w *BlockWeights[T], c *attention.Config) error {
	n := c.B * c.M
	// h = x + Attn(RMSNorm(x))
	k.Norm.Forward(a.X1, a.Rstd1, x, w.AttnNorm, n)
	if err := k.Attn.Forward(a.AttnOut, a.Attn, a.X1, &w.Attn, c); err != nil {
		return err
	}
	for i := range a.H {
		a.H[i] = x[i] + a.AttnOut[i]
	}
	// y = h + SwiGLU(RMSNorm(h))
	k.Norm.Forward(a.X2, a.Rstd2, a.H, w.MLPNorm, n)
	k.MLP.Forward(a.mlpOut, a.A, a.U, a.G, a.X2, w.Gate, w.Up, w.Down, n)
	for i := range y[:len(a.H)] {
		y[i] = a.H[i] + a.mlpOut[i]
	}
	return nil
}

// Backward adds the gradients of a scalar loss into dx and dw, given
// dy = ∂L/∂y and the activations Forward saved. dx includes the residual
// paths. Backward adds into dx and dw; callers zero them.
func (k Block[T]) Backward(dx []T, dw *BlockWeights[T], dy, x []T, w *BlockWeights[T], a *BlockActs[T], c *attention.Config) {
	n := c.B * c.M
	// forward was: y = h + SwiGLU(RMSNorm(h)); the residual hands dy to h
	// unchanged, and the MLP path adds its part
	copy(a.DH, dy)
	clear(a.DX2)
	k.MLP.Backward(a.DX2, dw.Gate, dw.Up, dw.Down, dy, a.X2, w.Gate, w.Up, w.Down, a.A, a.U, a.G, n)
	k.Norm.Backward(a.DH, dw.MLPNorm, a.DX2, a.H, w.MLPNorm, a.Rstd2, n)
	// forward was: h = x + Attn(RMSNorm(x)); likewise
	for i, g := range a.DH {
		dx[i] += g
	}
	clear(a.DX1)
	k.Attn.Backward(a.DX1, &dw.Attn, a.DH, a.X1, &w.Attn, a.Attn, c)
	k.Norm.Backward(dx, dw.AttnNorm, a.DX1, x, w.AttnNorm, a.Rstd1, n)
}
