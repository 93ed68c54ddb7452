package faults

import (
	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
)

type (
	model64 = model.Model[float64]
	cache64 = attention.KVCache[float64]
)

// Decoder returns the faults of the whole model: the bugs of KV caches,
// positions, packing and labels that the design notes warn about.
func Decoder() []Fault[checks.DecoderImpl] {
	ref := checks.DecoderReference
	return []Fault[checks.DecoderImpl]{
		{Name: "chunk-mask-no-offset", FDBlind: true, Impl: with(ref, func(d *checks.DecoderImpl) { d.Append = appendTopLeft }),
			Breaks: "a chunk's causal mask is tril(ones(M, N)) by index, without the cache offset: the chunk loses its history"},
		{Name: "rope-restarts-per-chunk", FDBlind: true, Impl: with(ref, func(d *checks.DecoderImpl) { d.Append = appendPositionsFromZero }),
			Breaks: "each new chunk's positions start again at 0 instead of continuing after the cache"},
		{Name: "cached-k-rotated-twice", FDBlind: true, Impl: with(ref, func(d *checks.DecoderImpl) { d.StepAt = stepRotatingCache }),
			Breaks: "keys already in the cache are rotated again by their positions on every step"},
		{Name: "positions-from-slots", FDBlind: true, Impl: with(ref, func(d *checks.DecoderImpl) { d.Append = appendSlotPositions }),
			Breaks: "positions taken from cache slot indices: after a right-padded prefill a row's next tokens skip positions"},
		{Name: "packing-without-segments", FDBlind: true, Impl: with(ref, func(d *checks.DecoderImpl) { d.Full, d.Backward = fullWithoutSegments, backwardWithoutSegments }),
			Breaks: "packed documents separated only by restarting positions (an end-of-text token), no segment mask: they attend to each other"},
		{Name: "labels-not-shifted", FDBlind: true, Impl: with(ref, func(d *checks.DecoderImpl) { d.Full = fullUnshiftedLabels }),
			Breaks: "targets are the input tokens themselves: the model is trained to copy what it reads"},
	}
}

func appendTopLeft(c *cache64, hq, M int, valid []bool) (int, *attention.Config, error) {
	slot, cfg, err := c.Append(hq, M, valid)
	if cfg != nil {
		cfg.Convention = attention.TopLeft
	}
	return slot, cfg, err
}

func appendPositionsFromZero(c *cache64, hq, M int, valid []bool) (int, *attention.Config, error) {
	slot, cfg, err := c.Append(hq, M, valid)
	if err != nil {
		return slot, cfg, err
	}
	for b := range c.B {
		first := cfg.QPos[b*M]
		for t := range M {
			cfg.QPos[b*M+t] -= first
			c.Pos[b*c.Cap+slot+t] -= first
		}
	}
	return slot, cfg, err
}

func appendSlotPositions(c *cache64, hq, M int, valid []bool) (int, *attention.Config, error) {
	slot, cfg, err := c.Append(hq, M, valid)
	if err != nil {
		return slot, cfg, err
	}
	for b := range c.B {
		for t := range M {
			cfg.QPos[b*M+t] = slot + t
			c.Pos[b*c.Cap+slot+t] = slot + t
		}
	}
	return slot, cfg, err
}

func stepRotatingCache(m *model64, logits []float64, c *cache64, p *model.Params[float64], tokens []int, slot int, cfg *attention.Config) error {
	rope := m.Block.Attn.RoPE
	for l := range c.K {
		for b := range c.B {
			for g := range c.Hkv {
				for s := range slot { // every cached key, again
					k := c.K[l][((b*c.Hkv+g)*c.Cap+s)*c.HeadDim:][:c.HeadDim]
					rope.Forward(k, k, []int{c.Pos[b*c.Cap+s]}, 1, 1, 1)
				}
			}
		}
	}
	return m.StepAt(logits, c, p, tokens, slot, cfg)
}

// withoutSegments is b with its segment ids dropped, keeping what they
// implied for positions (restarting per document) and targets.
func withoutSegments(b *model.Batch) *model.Batch {
	d := *b
	d.Pos = b.Positions()
	d.Targets = b.ShiftedTargets()
	d.Seg = nil
	return &d
}

func fullWithoutSegments(m *model64, a *model.Acts[float64], p *model.Params[float64], b *model.Batch) (float64, int, error) {
	return m.Forward(a, p, withoutSegments(b))
}

func backwardWithoutSegments(m *model64, g, p *model.Params[float64], a *model.Acts[float64], b *model.Batch) {
	m.Backward(g, p, a, withoutSegments(b))
}

func fullUnshiftedLabels(m *model64, a *model.Acts[float64], p *model.Params[float64], b *model.Batch) (float64, int, error) {
	d := *b
	d.Targets = make([]int, len(b.Tokens))
	for i, tok := range b.Tokens {
		d.Targets[i] = tok
		if b.Valid != nil && !b.Valid[i] {
			d.Targets[i] = nn.DefaultIgnoreIndex
		}
	}
	return m.Forward(a, p, &d)
}
