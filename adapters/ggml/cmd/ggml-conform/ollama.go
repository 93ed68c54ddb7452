package main

import (
	"fmt"
	"slices"

	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"

	"github.com/attnlab/attnlab/conform"
)

// ollamaMask is the additive mask [M, N] that ollama's own Go KV cache
// (kvcache.Causal, the cache of ollama's Go model engine, which runs the
// model on ggml) builds for r: its code, run as a model runs it. The N − M
// keys before the chunk are one batch stored at positions 0 … N−M−1, then
// the chunk is the next batch at positions N−M … N−1, one sequence; a
// window W makes it the sliding-window cache ollama's Gemma 2/3, OLMo 3,
// gpt-oss and Gemma 3n models use (NewSWACache(W) there; here
// NewSWAMemCache(W, capacity), the same mask rule with every cell kept, so
// that the mask's columns are the keys in order); a request that is not
// causal is ollama's SetCausal with every query excepted. The mask is what
// the cache's buildMask passes to ml.Context.FromFloats, captured there.
func ollamaMask(r *conform.Request) ([]float32, error) {
	past := r.N - r.M
	if past < 0 {
		return nil, fmt.Errorf("ollama's KV cache holds the chunk's own keys: a chunk of %d queries needs at least %d keys, got %d", r.M, r.M, r.N)
	}
	c := kvcache.NewCausalCache(nil)
	if r.Window > 0 {
		c = kvcache.NewSWAMemCache(int32(r.Window), int32(r.N+1), nil)
	}
	c.SetConfig(ml.CacheConfig{CachePadding: 1, MaskDType: ml.DTypeF32})
	c.Init(nil, ml.DTypeF32, 1, r.N, r.N)
	defer c.Close()
	ctx := &maskCtx{}
	batch := func(from, to int) input.Batch {
		b := input.Batch{}
		for p := from; p < to; p++ {
			b.Positions, b.Sequences = append(b.Positions, int32(p)), append(b.Sequences, 0)
		}
		return b
	}
	if past > 0 {
		if err := c.StartForward(ctx, batch(0, past), false); err != nil {
			return nil, err
		}
	}
	if err := c.StartForward(ctx, batch(past, r.N), false); err != nil {
		return nil, err
	}
	if !r.Causal {
		except := make([]int, r.M)
		for i := range except {
			except[i] = i
		}
		c.SetCausal(ctx, kvcache.CausalOptions{Except: except})
	}
	if !slices.Equal(ctx.shape, []int{r.N, r.M}) || !slices.Equal(ctx.locs, seq(past, r.N)) {
		return nil, fmt.Errorf("ollama's cache built a mask of shape %v over cells %v, want [%d %d] over cells %d…%d", ctx.shape, ctx.locs, r.N, r.M, past, r.N-1)
	}
	return ctx.mask, nil
}

func seq(from, to int) []int32 {
	s := make([]int32, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, int32(i))
	}
	return s
}

// maskCtx is the ml.Context the cache builds its inputs in: it keeps the
// last mask and cell locations it is given. The cache calls nothing else
// of it while it builds a mask; any other method panics (the embedded
// interface is nil).
type maskCtx struct {
	ml.Context
	mask  []float32
	shape []int
	locs  []int32
}

func (c *maskCtx) Input() ml.Context { return c }

func (c *maskCtx) FromInts(s []int32, shape ...int) ml.Tensor {
	c.locs = slices.Clone(s)
	return nilTensor{}
}

func (c *maskCtx) FromFloats(s []float32, shape ...int) ml.Tensor {
	c.mask, c.shape = slices.Clone(s), slices.Clone(shape)
	return nilTensor{}
}

type nilTensor struct{ ml.Tensor }
