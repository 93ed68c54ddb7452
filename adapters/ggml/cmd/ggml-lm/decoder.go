package main

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/adapters/ggml/internal/ggml"
	"github.com/attnlab/attnlab/model"
)

// decoder runs attnlab's Llama-style model (model.Config, HF tensor names)
// as ggml graphs: one graph for the prompt (prefill), one per new token,
// each built in a reused arena, as llama.cpp builds a graph per batch.
//
// The graph is llama.cpp's for a Llama block, with three differences it
// states: RoPE is ggml's NEOX mode applied to the checkpoint's q_proj and
// k_proj as they are (HF's rotate_half pairing; llama.cpp's converter
// permutes those rows and uses its NORM mode instead, the same rotation);
// only the last position's logits are computed (llama.cpp's default for
// generation); and the KV cache holds exactly the tokens so far (llama.cpp
// pads it to a multiple of 256 cells and masks the rest).
type decoder struct {
	cfg     model.Config
	flash   bool
	kv      ggml.Type
	hd      int // head dimension
	weights *ggml.Ctx
	embed   ggml.Tensor // [D, V], also the LM head when tied
	norm    ggml.Tensor
	lmHead  ggml.Tensor
	layers  []layerWeights
	cache   *ggml.Ctx
	k, v    []ggml.Tensor // per layer: K [hd·Hkv, capacity]; V likewise, or Vᵀ [capacity, hd·Hkv] without flash
	cap     int
	arena   *ggml.Arena
	runner  *ggml.Runner
	logits  []float32
}

type layerWeights struct {
	attnNorm, wq, wk, wv, wo, mlpNorm, gate, up, down ggml.Tensor
}

// newDecoder copies the weights p of m into ggml tensors (F32, as stored)
// and allocates a KV cache of capacity positions. flash chooses
// flash_attn_ext over mul_mat → soft_max_ext → mul_mat; kv the cache's type.
func newDecoder(m *model.Model[float32], p *model.Params[float32], capacity int, flash bool, kv ggml.Type, threads int) (*decoder, error) {
	c := m.Config
	switch {
	case c.SlidingWindow != 0:
		return nil, fmt.Errorf("config sliding_window = %d: this decoder runs plain Llama attention", c.SlidingWindow)
	case c.AttnLogitSoftcapping != 0 || c.FinalLogitSoftcapping != 0:
		return nil, fmt.Errorf("config softcapping: this decoder runs plain Llama attention")
	case c.AttentionSinks:
		return nil, fmt.Errorf("config attention_sinks: this decoder runs plain Llama attention")
	}
	D, F, V, hd := c.HiddenSize, c.IntermediateSize, c.VocabSize, c.Head()
	qd, kvd := c.NumAttentionHeads*hd, c.NumKeyValueHeads*hd
	d := &decoder{cfg: c, flash: flash, kv: kv, hd: hd, cap: capacity, runner: ggml.NewRunner(threads), logits: make([]float32, V)}
	nTensors := 3 + 9*c.NumHiddenLayers
	d.weights = ggml.NewCtx(4*c.NumParams() + (nTensors+8)*ggml.Overhead() + 1<<16)
	put := func(x []float32, ne ...int) ggml.Tensor {
		t := d.weights.New(ggml.F32, ne...)
		t.SetF32(x)
		return t
	}
	// a HF weight (out, in) row-major is the ggml tensor [in, out]:
	// mul_mat(W, x [in, T]) = (W x) [out, T]
	d.embed = put(p.Embed, D, V)
	d.norm = put(p.Norm, D)
	d.lmHead = d.embed
	if p.LMHead != nil {
		d.lmHead = put(p.LMHead, D, V)
	}
	for _, l := range p.Layers {
		d.layers = append(d.layers, layerWeights{
			attnNorm: put(l.AttnNorm, D), wq: put(l.Attn.Wq, D, qd), wk: put(l.Attn.Wk, D, kvd), wv: put(l.Attn.Wv, D, kvd),
			wo: put(l.Attn.Wo, qd, D), mlpNorm: put(l.MLPNorm, D),
			gate: put(l.Gate, D, F), up: put(l.Up, D, F), down: put(l.Down, F, D),
		})
	}
	es := 4
	if kv == ggml.F16 {
		es = 2
	}
	L := c.NumHiddenLayers
	d.cache = ggml.NewCtx(2*L*capacity*kvd*es + (2*L+4)*ggml.Overhead() + 1<<16)
	for range L {
		d.k = append(d.k, d.cache.New(kv, kvd, capacity))
		if flash {
			d.v = append(d.v, d.cache.New(kv, kvd, capacity))
		} else {
			d.v = append(d.v, d.cache.New(kv, capacity, kvd)) // transposed, as llama.cpp's non-flash cache
		}
	}
	d.arena = ggml.NewArena(d.stepBytes(capacity, capacity))
	return d, nil
}

// stepBytes bounds the memory of the graph of T new tokens with nKV keys:
// the data of every tensor it creates, their headers and the graph's.
func (d *decoder) stepBytes(T, nKV int) int {
	c := d.cfg
	D, F, V, hd := c.HiddenSize, c.IntermediateSize, c.VocabSize, d.hd
	qd, kvd := c.NumAttentionHeads*hd, c.NumKeyValueHeads*hd
	perLayer := T * (10*D + 4*qd + 4*kvd + 3*F + 2*c.NumAttentionHeads*nKV) // scores and probabilities without flash
	floats := c.NumHiddenLayers*perLayer + 3*T + nKV*T + 3*D + V
	nodes := 48*c.NumHiddenLayers + 32
	return 4*floats + nodes*ggml.Overhead() + ggml.GraphOverhead(nodes) + 1<<20
}

func (d *decoder) close() {
	d.weights.Free()
	d.cache.Free()
	d.arena.Free()
	d.runner.Close()
}

// step runs the tokens ids at positions pos0, pos0+1, … through the model,
// appending their K and V to the cache, and returns the logits of the last
// one (valid until the next step).
func (d *decoder) step(ids []int, pos0 int) ([]float32, error) {
	T, nKV := len(ids), pos0+len(ids)
	if T == 0 || nKV > d.cap {
		return nil, fmt.Errorf("%d tokens at position %d: the cache holds %d", T, pos0, d.cap)
	}
	c := d.cfg
	D, hd, Hq, Hkv := c.HiddenSize, d.hd, c.NumAttentionHeads, c.NumKeyValueHeads
	kvd := Hkv * hd
	eps, scale := float32(c.RMSNormEps), float32(1/math.Sqrt(float64(hd)))
	ctx := d.arena.Ctx()
	defer ctx.Free()
	g := ctx.NewGraph(48*c.NumHiddenLayers + 32)

	tok, pos := ctx.New(ggml.I32, T), ctx.New(ggml.I32, T)
	ids32, pos32 := make([]int32, T), make([]int32, T)
	for t, id := range ids {
		ids32[t], pos32[t] = int32(id), int32(pos0+t)
	}
	tok.SetI32(ids32)
	pos.SetI32(pos32)
	// the causal mask of the prompt: position pos0+t sees keys 0…pos0+t;
	// one new token sees every key, and gets no mask
	var mask ggml.Tensor
	if T > 1 {
		typ := ggml.F32
		if d.flash {
			typ = ggml.F16 // what flash_attn_ext reads; llama.cpp casts its mask to it
		}
		mask = ctx.New(typ, nKV, T)
		m := make([]float32, nKV*T)
		for t := range T {
			for j := pos0 + t + 1; j < nKV; j++ {
				m[t*nKV+j] = ggml.NegInf
			}
		}
		mask.SetF32(m)
	}

	x := ctx.GetRows(d.embed, tok) // [D, T]
	for l, w := range d.layers {
		// h = x + Attn(RMSNorm(x))
		h := ctx.Mul(ctx.RMSNorm(x, eps), w.attnNorm)
		q := ctx.RopeNeoX(ctx.Reshape3D(ctx.MulMat(w.wq, h), hd, Hq, T), pos, hd, float32(c.RopeTheta))
		k := ctx.RopeNeoX(ctx.Reshape3D(ctx.MulMat(w.wk, h), hd, Hkv, T), pos, hd, float32(c.RopeTheta))
		v := ctx.MulMat(w.wv, h) // [hd·Hkv, T]
		es := d.k[l].ElemSize()
		// the new K and V go into the cache first (expanded before the
		// attention that reads the cache, so computed before it)
		g.Expand(ctx.Cpy(k, ctx.View3D(d.k[l], hd, Hkv, T, hd*es, kvd*es, pos0*kvd*es)))
		if d.flash {
			g.Expand(ctx.Cpy(ctx.Reshape3D(v, hd, Hkv, T), ctx.View3D(d.v[l], hd, Hkv, T, hd*es, kvd*es, pos0*kvd*es)))
		} else {
			g.Expand(ctx.Cpy(ctx.Transpose(v), ctx.View2D(d.v[l], T, kvd, d.cap*es, pos0*es)))
		}
		kc := ctx.View3D(d.k[l], hd, nKV, Hkv, kvd*es, hd*es, 0) // [hd, nKV, Hkv]
		qp := ctx.Permute(q, 0, 2, 1, 3)                         // [hd, T, Hq]
		var o ggml.Tensor                                        // [hd·Hq, T]
		if d.flash {
			vc := ctx.View3D(d.v[l], hd, nKV, Hkv, kvd*es, hd*es, 0)
			o = ctx.Reshape2D(ctx.FlashAttnExt(qp, kc, vc, mask, scale, 0, 0), hd*Hq, T)
		} else {
			kq := ctx.MulMat(kc, qp) // [nKV, T, Hq]
			ggml.MulMatPrecF32(kq)
			p := ctx.SoftMaxExt(kq, mask, scale, 0)
			vt := ctx.View3D(d.v[l], nKV, hd, Hkv, d.cap*es, hd*d.cap*es, 0) // [nKV, hd, Hkv]
			o = ctx.Reshape2D(ctx.Cont(ctx.Permute(ctx.MulMat(vt, p), 0, 2, 1, 3)), hd*Hq, T)
		}
		x = ctx.Add(x, ctx.MulMat(w.wo, o))
		// y = h + SwiGLU(RMSNorm(h))
		h2 := ctx.Mul(ctx.RMSNorm(x, eps), w.mlpNorm)
		x = ctx.Add(x, ctx.MulMat(w.down, ctx.SwiGLU(ctx.MulMat(w.gate, h2), ctx.MulMat(w.up, h2))))
	}
	last := ctx.View2D(x, D, 1, D*4, (T-1)*D*4)
	out := ctx.MulMat(d.lmHead, ctx.Mul(ctx.RMSNorm(last, eps), d.norm)) // [V, 1]
	g.Expand(out)
	if err := d.runner.Compute(g); err != nil {
		return nil, err
	}
	out.F32(d.logits)
	return d.logits, nil
}
