package model

import (
	"fmt"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/nn"
)

// NewCache returns a KV cache for B rows of up to capacity tokens.
func (m *Model[T]) NewCache(B, capacity int) *attention.KVCache[T] {
	c := m.Config
	return attention.NewKVCache[T](c.NumHiddenLayers, B, c.NumKeyValueHeads, capacity, c.Head())
}

// Step runs a chunk of M tokens per row (tokens and valid are (B, M); valid
// nil means all real) through the model against the cache, which it
// extends, and writes the chunk's logits (B·M, V). Positions continue from
// what the cache holds. It returns an error naming the token for an id
// outside the vocabulary or a position beyond max_position_embeddings, and
// an *attention.CapacityError when the cache is full; the cache is unchanged
// then.
func (m *Model[T]) Step(logits []T, cache *attention.KVCache[T], p *Params[T], tokens []int, valid []bool, M int) error {
	c := m.Config
	if len(tokens) != cache.B*M {
		return fmt.Errorf("model: %d tokens, want B*M = %d", len(tokens), cache.B*M)
	}
	for i, tok := range tokens {
		real := valid == nil || valid[i]
		if real && (tok < 0 || tok >= c.VocabSize) {
			return fmt.Errorf("model: token %d (row %d) is %d, outside the vocabulary [0, %d)", i, i/M, tok, c.VocabSize)
		}
		if real && cache.Next[i/M]+countReal(valid, i/M*M, i) >= c.MaxPositionEmbeddings {
			return fmt.Errorf("model: token %d (row %d) would take position %d, beyond max_position_embeddings = %d", i, i/M, cache.Next[i/M]+countReal(valid, i/M*M, i), c.MaxPositionEmbeddings)
		}
	}
	slot, cfg, err := cache.Append(c.NumAttentionHeads, M, valid)
	if err != nil {
		return err
	}
	return m.StepAt(logits, cache, p, tokens, slot, cfg)
}

// countReal counts the real tokens in valid[from:to].
func countReal(valid []bool, from, to int) int {
	if valid == nil {
		return to - from
	}
	n := 0
	for _, ok := range valid[from:to] {
		if ok {
			n++
		}
	}
	return n
}

// StepAt is Step after the chunk's slots are reserved: it runs the chunk
// with the given attention config (from KVCache.Append) and stores its keys
// and values at slot.
func (m *Model[T]) StepAt(logits []T, cache *attention.KVCache[T], p *Params[T], tokens []int, slot int, cfg *attention.Config) error {
	c := m.Config
	if c.SlidingWindow != 0 || c.AttnLogitSoftcapping != 0 { // the model's variants on the cache's mask
		v := *cfg
		v.Window, v.Softcap = c.SlidingWindow, c.AttnLogitSoftcapping
		cfg = &v
	}
	n, D, V := cfg.B*cfg.M, c.HiddenSize, c.VocabSize
	work := &cache.Scratch
	defer work.Release(work.Mark())
	x, y := work.Take(n*D), work.Take(n*D)
	for i, tok := range tokens {
		if !cfg.QValid[i] {
			tok = 0 // padding may hold any id
		}
		if tok < 0 || tok >= V {
			panic(fmt.Sprintf("model: StepAt: token %d is %d, outside the vocabulary [0, %d)", i, tok, V))
		}
		copy(x[i*D:(i+1)*D], p.Embed[tok*D:(tok+1)*D])
	}
	for l := range p.Layers {
		if err := m.Block.ForwardCached(y, x, &p.Layers[l], cache, l, slot, cfg); err != nil {
			return err
		}
		x, y = y, x
	}
	rstd := work.Take(n)
	m.Block.Norm.Forward(y, rstd, x, p.Norm, n)
	nn.Linear[T]{In: D, Out: V}.Forward(logits, y, p.Head(), nil, n)
	capLogits(logits[:n*V], c.FinalLogitSoftcapping)
	return nil
}

// ForwardCached is the block on a chunk against the cache (see
// attention.Layer.ForwardCached): the inference path, without backward.
func (k Block[T]) ForwardCached(y, x []T, w *BlockWeights[T], cache *attention.KVCache[T], layer, slot int, cfg *attention.Config) error {
	n, D, F := cfg.B*cfg.M, k.MLP.D, k.MLP.F
	work := &cache.Scratch
	defer work.Release(work.Mark())
	x1, rstd := work.Take(n*D), work.Take(n)
	k.Norm.Forward(x1, rstd, x, w.AttnNorm, n)
	att := work.Take(n * D)
	if err := k.Attn.ForwardCached(att, x1, &w.Attn, cache, layer, slot, cfg); err != nil {
		return err
	}
	h := att // h = x + Attn(RMSNorm(x)), in place
	for i := range h {
		h[i] += x[i]
	}
	k.Norm.Forward(x1, rstd, h, w.MLPNorm, n)
	a, u, g := work.Take(n*F), work.Take(n*F), work.Take(n*F)
	k.MLP.Forward(y, a, u, g, x1, w.Gate, w.Up, w.Down, n)
	for i := range y[:n*D] { // y = h + SwiGLU(RMSNorm(h))
		y[i] += h[i]
	}
	return nil
}
