package model

import (
	"fmt"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
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
	return m.step(logits, cache, p, tokens, valid, M, M)
}

// step is Step writing the logits of the last tail positions of each row.
func (m *Model[T]) step(logits []T, cache *attention.KVCache[T], p *Params[T], tokens []int, valid []bool, M, tail int) error {
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
	return m.stepAt(logits, cache, p, tokens, slot, cfg, tail)
}

// StepLast is Step writing only the logits of the last rows positions of
// each row's chunk, rows = LastRows(M): logits is (B·rows, V), and the
// last position of row b is logits[(b·rows+rows−1)·V:][:V]. They are the
// bits Step writes for those positions (the output projection's product
// keeps at least vec.PackedMinRows rows, or all of them, so it is computed
// the same way), at a fraction of its cost when M is long: generation needs
// the last position only, and the projection onto the vocabulary of every
// prompt position was most of a prompt's time.
func (m *Model[T]) StepLast(logits []T, cache *attention.KVCache[T], p *Params[T], tokens []int, valid []bool, M int) error {
	return m.step(logits, cache, p, tokens, valid, M, LastRows(M))
}

// LastRows is the number of positions per row StepLast writes logits for:
// min(M, vec.PackedMinRows).
func LastRows(M int) int { return min(M, vec.PackedMinRows) }

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
	return m.stepAt(logits, cache, p, tokens, slot, cfg, cfg.M)
}

// stepAt is StepAt writing the logits of the last tail positions of each
// row (tail <= cfg.M).
func (m *Model[T]) stepAt(logits []T, cache *attention.KVCache[T], p *Params[T], tokens []int, slot int, cfg *attention.Config, tail int) error {
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
	if M := cfg.M; tail < M {
		// the last tail positions of each row, in place: row b's go to
		// rows b·tail.. (copy handles the overlap, which only moves down)
		for b := range cfg.B {
			copy(x[b*tail*D:(b+1)*tail*D], x[(b*M+M-tail)*D:(b*M+M)*D])
		}
		n = cfg.B * tail
	}
	rstd := work.Take(n)
	m.Block.Norm.Forward(y[:n*D], rstd, x[:n*D], p.Norm, n)
	nn.Linear[T]{In: D, Out: V}.Forward(logits, y[:n*D], p.Head(), nil, n)
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
