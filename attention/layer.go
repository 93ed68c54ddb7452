package attention

import (
	"fmt"

	"github.com/attnlab/attnlab/nn"
)

// Layer is the attention sublayer of a Llama block: projections, RoPE at the
// tokens' positions, attention, output projection. For x (B·T, Dim):
//
//	q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ      (Hq, Hkv and Hkv heads of HeadDim)
//	q = RoPE(q, qpos), k = RoPE(k, kpos)
//	o = attention(q, k, v)               (the mask of the Config)
//	y = o Woᵀ
//
// Weights are in Hugging Face layout (see LayerWeights). The Config gives
// the batch, the mask and the positions; for self-attention over a sequence
// M = N = T, and RoPE rotates queries by their positions and keys by theirs.
// Attention runs on the fused kernels (FlashForward, FlashBackward), which
// the lab checks against the reference.
type Layer[T Float] struct {
	Dim     int // model width
	Hq, Hkv int // query and key/value heads
	HeadDim int // per head, for q, k and v alike
	RoPE    nn.RoPE[T]
	Sinks   bool // a learned sink logit per query head (LayerWeights.Sinks)
}

// LayerWeights are the projections of a Layer in Hugging Face layout:
// q_proj (Hq·HeadDim, Dim), k_proj and v_proj (Hkv·HeadDim, Dim), o_proj
// (Dim, Hq·HeadDim), and with Layer.Sinks the sink logits (Hq), as the
// open-weight GPT checkpoints name them self_attn.sinks. Used for
// gradients too.
type LayerWeights[T Float] struct {
	Wq, Wk, Wv, Wo []T
	Sinks          []T // nil without sinks
}

// NewLayerWeights returns zeroed weights of the layer's shapes.
func (l Layer[T]) NewLayerWeights() *LayerWeights[T] {
	q, kv := l.Hq*l.HeadDim, l.Hkv*l.HeadDim
	w := &LayerWeights[T]{
		Wq: make([]T, q*l.Dim), Wk: make([]T, kv*l.Dim), Wv: make([]T, kv*l.Dim), Wo: make([]T, l.Dim*q),
	}
	if l.Sinks {
		w.Sinks = make([]T, l.Hq)
	}
	return w
}

// withSinks returns c with the sink logits of w, or c itself for a layer
// without sinks.
func (l Layer[T]) withSinks(c *Config, w *LayerWeights[T]) *Config {
	if !l.Sinks {
		return c
	}
	if len(w.Sinks) != l.Hq {
		panic(fmt.Sprintf("attention: layer with sinks: len(Sinks) = %d, want Hq = %d", len(w.Sinks), l.Hq))
	}
	d := *c
	d.Sinks = make([]float64, l.Hq)
	for h, s := range w.Sinks {
		d.Sinks[h] = float64(s)
	}
	return &d
}

// LayerActs holds what Forward saves for Backward and the gradients Backward
// computes on the way, in two layouts: token layout (B·T, H·HeadDim), as the
// projections produce it, and head layout (B, H, T, HeadDim), as attention
// takes it.
type LayerActs[T Float] struct {
	Q, K, V []T // head layout; Q and K after RoPE
	LSE     []T // saved by the attention (B, Hq, T)
	O       []T // attention output, token layout: the input of Wo

	// Set by Backward: the gradients with respect to O (token layout), to
	// Q, K, V (head layout, after RoPE) and to the projection outputs
	// x Wqᵀ, x Wkᵀ, x Wvᵀ (token layout, before RoPE).
	DO, DQ, DK, DV         []T
	DQProj, DKProj, DVProj []T

	headO, headDO, work []T
}

// NewLayerActs returns activations for B sequences of T tokens.
func (l Layer[T]) NewLayerActs(B, Tn int) *LayerActs[T] {
	q, kv := B*Tn*l.Hq*l.HeadDim, B*Tn*l.Hkv*l.HeadDim
	return &LayerActs[T]{
		Q: make([]T, q), K: make([]T, kv), V: make([]T, kv),
		LSE: make([]T, B*l.Hq*Tn), O: make([]T, q),
		DO: make([]T, q), DQ: make([]T, q), DK: make([]T, kv), DV: make([]T, kv),
		DQProj: make([]T, q), DKProj: make([]T, kv), DVProj: make([]T, kv),
		headO: make([]T, q), headDO: make([]T, q), work: make([]T, q),
	}
}

// Forward computes y (B·T, Dim) from x (B·T, Dim) and saves activations in a.
// It returns the attention's error for a valid query that sees no key.
//
// It panics if c does not match the layer (Hq, Hkv, D = Dv = HeadDim,
// M = N) or a slice has the wrong length.
func (l Layer[T]) Forward(y []T, a *LayerActs[T], x []T, w *LayerWeights[T], c *Config) error {
	l.check(c)
	B, Tn, Dh := c.B, c.M, l.HeadDim
	n := B * Tn
	qpos, kpos := positions(c)
	qProj := nn.Linear[T]{In: l.Dim, Out: l.Hq * Dh}
	kvProj := nn.Linear[T]{In: l.Dim, Out: l.Hkv * Dh}
	// pass 1: projections, into head layout
	qProj.Forward(a.work, x, w.Wq, nil, n)
	toHeads(a.Q, a.work, B, Tn, l.Hq, Dh)
	kvProj.Forward(a.work[:n*l.Hkv*Dh], x, w.Wk, nil, n)
	toHeads(a.K, a.work, B, Tn, l.Hkv, Dh)
	kvProj.Forward(a.work[:n*l.Hkv*Dh], x, w.Wv, nil, n)
	toHeads(a.V, a.work, B, Tn, l.Hkv, Dh)
	// pass 2: RoPE, queries at their positions and keys at theirs
	l.RoPE.Forward(a.Q, a.Q, qpos, B, l.Hq, Tn)
	l.RoPE.Forward(a.K, a.K, kpos, B, l.Hkv, Tn)
	// pass 3: attention
	if err := FlashForward(a.headO, a.LSE, a.Q, a.K, a.V, l.withSinks(c, w)); err != nil {
		return err
	}
	fromHeads(a.O, a.headO, B, Tn, l.Hq, Dh)
	// pass 4: output projection
	nn.Linear[T]{In: l.Hq * Dh, Out: l.Dim}.Forward(y, a.O, w.Wo, nil, n)
	return nil
}

// Backward adds the gradients of a scalar loss into dx (B·T, Dim) and dw,
// given dy = ∂L/∂y and the activations Forward saved in a. dx is the sum of
// the three paths through Wq, Wk and Wv. Backward adds into dx and dw;
// callers zero them. It overwrites the gradient fields of a.
func (l Layer[T]) Backward(dx []T, dw *LayerWeights[T], dy, x []T, w *LayerWeights[T], a *LayerActs[T], c *Config) {
	l.check(c)
	B, Tn, Dh := c.B, c.M, l.HeadDim
	n := B * Tn
	qpos, kpos := positions(c)
	qProj := nn.Linear[T]{In: l.Dim, Out: l.Hq * Dh}
	kvProj := nn.Linear[T]{In: l.Dim, Out: l.Hkv * Dh}
	// forward was: y = O Woᵀ
	clear(a.DO)
	nn.Linear[T]{In: l.Hq * Dh, Out: l.Dim}.Backward(a.DO, dw.Wo, nil, dy, a.O, w.Wo, n)
	toHeads(a.headDO, a.DO, B, Tn, l.Hq, Dh)
	// forward was: O = attention(Q, K, V)
	clear(a.DQ)
	clear(a.DK)
	clear(a.DV)
	ac := l.withSinks(c, w)
	FlashBackward(a.DQ, a.DK, a.DV, a.headDO, a.Q, a.K, a.V, a.headO, a.LSE, ac)
	if l.Sinks { // dσ_h = −Σ exp(σ_h − lse) · rowsum(dO ⊙ O)
		SinkGrad(dw.Sinks, a.headO, a.LSE, a.headDO, ac)
	}
	// forward was: Q = RoPE(x Wqᵀ, qpos), K = RoPE(x Wkᵀ, kpos); the
	// backward rotates by the opposite angle
	clear(a.work)
	l.RoPE.Backward(a.work, a.DQ, qpos, B, l.Hq, Tn)
	fromHeads(a.DQProj, a.work, B, Tn, l.Hq, Dh)
	kvw := a.work[:n*l.Hkv*Dh]
	clear(kvw)
	l.RoPE.Backward(kvw, a.DK, kpos, B, l.Hkv, Tn)
	fromHeads(a.DKProj, kvw, B, Tn, l.Hkv, Dh)
	fromHeads(a.DVProj, a.DV, B, Tn, l.Hkv, Dh)
	// forward was: q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ; dx sums the three paths
	qProj.Backward(dx, dw.Wq, nil, a.DQProj, x, w.Wq, n)
	kvProj.Backward(dx, dw.Wk, nil, a.DKProj, x, w.Wk, n)
	kvProj.Backward(dx, dw.Wv, nil, a.DVProj, x, w.Wv, n)
}

func (l Layer[T]) check(c *Config) {
	if err := c.Validate(); err != nil {
		panic(err.Error())
	}
	if c.Hq != l.Hq || c.Hkv != l.Hkv || c.D != l.HeadDim || c.Dv != l.HeadDim || c.M != c.N || l.RoPE.D != l.HeadDim {
		panic(fmt.Sprintf("attention: layer Hq=%d Hkv=%d HeadDim=%d (RoPE D=%d) does not match config Hq=%d Hkv=%d D=%d Dv=%d M=%d N=%d",
			l.Hq, l.Hkv, l.HeadDim, l.RoPE.D, c.Hq, c.Hkv, c.D, c.Dv, c.M, c.N))
	}
}

// positions returns the query and key positions of c, (B, M) and (B, N).
func positions(c *Config) (qpos, kpos []int) {
	qpos, kpos = make([]int, c.B*c.M), make([]int, c.B*c.N)
	for b := range c.B {
		for i := range c.M {
			qpos[b*c.M+i] = c.QueryPos(b, i)
		}
		for j := range c.N {
			kpos[b*c.N+j] = c.KeyPos(b, j)
		}
	}
	return qpos, kpos
}

// toHeads copies src in token layout (B, T, H, Dh) to dst in head layout
// (B, H, T, Dh).
func toHeads[T Float](dst, src []T, B, Tn, H, Dh int) {
	for b := range B {
		for t := range Tn {
			for h := range H {
				copy(dst[((b*H+h)*Tn+t)*Dh:][:Dh], src[((b*Tn+t)*H+h)*Dh:][:Dh])
			}
		}
	}
}

// fromHeads is the inverse of toHeads.
func fromHeads[T Float](dst, src []T, B, Tn, H, Dh int) {
	for b := range B {
		for t := range Tn {
			for h := range H {
				copy(dst[((b*Tn+t)*H+h)*Dh:][:Dh], src[((b*H+h)*Tn+t)*Dh:][:Dh])
			}
		}
	}
}
