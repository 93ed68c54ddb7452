package ggml

import "fmt"

// AttnSpec is the shape and the path of one attention graph, in attnlab's
// names: Q [B, Hq, M, D], K [B, Hkv, N, D], V [B, Hkv, N, Dv].
type AttnSpec struct {
	B, Hq, Hkv, M, N, D, Dv int
	// Flash selects ggml_flash_attn_ext (llama.cpp with flash attention
	// on); otherwise the graph llama.cpp builds with it off:
	// mul_mat(K, Q) at F32 precision → soft_max_ext(mask, scale) →
	// mul_mat(Vᵀ, P).
	Flash bool
	// KV is the type K and V are stored in: F32, or F16 as llama.cpp's
	// default cache holds them.
	KV Type
	// Mask adds an additive mask input [N, M, 1, B] (0 visible, −∞ not):
	// F16 for flash_attn_ext (the type its CPU kernel reads, llama.cpp
	// casts its mask to it), F32 for soft_max_ext.
	Mask bool
	// Sinks adds an input of one sink logit per query head (F32 [Hq]).
	Sinks   bool
	Scale   float32
	Softcap float32 // c > 0: each scaled score s becomes c·tanh(s/c)
}

// Attn is a built attention graph with its inputs.
type Attn struct {
	Spec                      AttnSpec
	Q, K, V, Mask, SinksLogit Tensor
	out                       Tensor
	ctx                       *Ctx
	graph                     *Graph
}

// NewAttn builds the graph of s. It panics if the shape is not one ggml
// takes (Hq not a multiple of Hkv, a size below 1).
func NewAttn(s AttnSpec) *Attn {
	if s.B < 1 || s.Hq < 1 || s.Hkv < 1 || s.M < 1 || s.N < 1 || s.D < 1 || s.Dv < 1 || s.Hq%s.Hkv != 0 {
		panic(fmt.Sprintf("ggml: attention shape %+v", s))
	}
	if s.KV != F32 && s.KV != F16 {
		panic("ggml: K/V type " + s.KV.String())
	}
	kvSize := 4
	if s.KV == F16 {
		kvSize = 2
	}
	f := func(n ...int) int {
		p := 1
		for _, x := range n {
			p *= x
		}
		return p
	}
	bytes := 4*f(s.B, s.Hq, s.M, s.D) + kvSize*f(s.B, s.Hkv, s.N, s.D+s.Dv) + 4*f(s.B, s.M, s.N) + 4*s.Hq +
		4*f(s.B, s.Hq, s.M, s.Dv) + 64*Overhead() + GraphOverhead(64) + 1<<16
	if !s.Flash {
		// scores and probabilities (and three more with softcap), Vᵀ
		bytes += 5*4*f(s.B, s.Hq, s.M, s.N) + kvSize*f(s.B, s.Hkv, s.N, s.Dv)
	}
	c := NewCtx(bytes)
	a := &Attn{Spec: s, ctx: c}
	a.Q = c.New(F32, s.D, s.M, s.Hq, s.B)
	a.K = c.New(s.KV, s.D, s.N, s.Hkv, s.B)
	a.V = c.New(s.KV, s.Dv, s.N, s.Hkv, s.B)
	if s.Mask {
		typ := F32
		if s.Flash {
			typ = F16
		}
		a.Mask = c.New(typ, s.N, s.M, 1, s.B)
	}
	if s.Sinks {
		a.SinksLogit = c.New(F32, s.Hq)
	}
	if s.Flash {
		a.out = c.FlashAttnExt(a.Q, a.K, a.V, a.Mask, s.Scale, 0, s.Softcap)
		if s.Sinks {
			FlashAttnAddSinks(a.out, a.SinksLogit)
		}
	} else {
		kq := c.MulMat(a.K, a.Q) // [N, M, Hq, B]
		MulMatPrecF32(kq)
		scale := s.Scale
		if s.Softcap > 0 {
			// llama.cpp caps the unscaled scores (its models fold the scale
			// into q); capping the scaled ones is the same graph with the
			// scale moved in front
			kq = c.Scale(c.Tanh(c.Scale(kq, s.Scale/s.Softcap)), s.Softcap)
			scale = 1
		}
		p := c.SoftMaxExt(kq, a.Mask, scale, 0)
		if s.Sinks {
			SoftMaxAddSinks(p, a.SinksLogit)
		}
		vt := c.Cont(c.Transpose(a.V)) // [N, Dv, Hkv, B], llama.cpp's transposed V cache
		a.out = c.MulMat(vt, p)        // [Dv, M, Hq, B]
	}
	a.graph = c.NewGraph(64, a.out)
	return a
}

// Free releases a's memory.
func (a *Attn) Free() { a.ctx.Free() }

// Compute runs the graph on r.
func (a *Attn) Compute(r *Runner) error { return r.Compute(a.graph) }

// Output returns O [B, Hq, M, Dv] of the last Compute.
func (a *Attn) Output() []float32 {
	s := a.Spec
	raw := make([]float32, s.B*s.Hq*s.M*s.Dv)
	a.out.F32(raw)
	if !s.Flash {
		return raw // mul_mat's [Dv, M, Hq, B] is [B, Hq, M, Dv]
	}
	// flash_attn_ext's output is permuted: [Dv, Hq, M, B]
	o := make([]float32, len(raw))
	for b := range s.B {
		for i := range s.M {
			for h := range s.Hq {
				copy(o[((b*s.Hq+h)*s.M+i)*s.Dv:][:s.Dv], raw[((b*s.M+i)*s.Hq+h)*s.Dv:][:s.Dv])
			}
		}
	}
	return o
}
