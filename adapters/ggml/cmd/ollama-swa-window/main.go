// Command ollama-swa-window is the reproduction of
// docs/findings/ollama-swa-window.md: the attention mask that ollama's Go
// KV cache (kvcache.NewSWACache, the cache of its Gemma 2/3, Gemma 3n and
// OLMo 3 models) builds for a sliding window of W lets each query see W + 1
// keys, where llama.cpp's KV cache and Hugging Face transformers (the rule
// the models' sliding_window comes from) let it see W. Pure Go, against
// ollama's own kvcache package:
//
//	cd adapters/ggml && go run ./cmd/ollama-swa-window
//
// It exits 1 while a window of W shows W + 1 keys.
package main

import (
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"
)

// maskCtx is the ml.Context the cache builds its mask in; it keeps the
// mask. The cache calls nothing else of it here.
type maskCtx struct {
	ml.Context
	mask  []float32
	shape []int
}

type nilTensor struct{ ml.Tensor }

func (c *maskCtx) Input() ml.Context                          { return c }
func (c *maskCtx) FromInts(s []int32, shape ...int) ml.Tensor { return nilTensor{} }
func (c *maskCtx) FromFloats(s []float32, shape ...int) ml.Tensor {
	c.mask, c.shape = slices.Clone(s), slices.Clone(shape)
	return nilTensor{}
}

func main() {
	const W, T = 2, 6 // a window of 2, one batch of 6 tokens of one sequence
	cache := kvcache.NewSWACache(W, nil)
	cache.SetConfig(ml.CacheConfig{CachePadding: 1, MaskDType: ml.DTypeF32})
	cache.Init(nil, ml.DTypeF32, 1, 16, 16)
	ctx := &maskCtx{}
	batch := input.Batch{Positions: []int32{0, 1, 2, 3, 4, 5}, Sequences: []int{0, 0, 0, 0, 0, 0}}
	if err := cache.StartForward(ctx, batch, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n := ctx.shape[0] // keys (cells) per query row
	fmt.Printf("ollama kvcache.NewSWACache(%d): the mask of %d tokens at positions 0…%d (x: masked)\n", W, T, T-1)
	most := 0
	for i := range T {
		row, seen := "", 0
		for j := range n {
			if math.IsInf(float64(ctx.mask[i*n+j]), -1) {
				row += " x"
			} else {
				row += " ·"
				seen++
			}
		}
		fmt.Printf("  query at %d:%s   sees %d keys\n", i, row, seen)
		most = max(most, seen)
	}
	fmt.Printf("a window of %d shows up to %d keys; llama.cpp's KV cache (is_masked_swa: q_pos - k_pos >= W is masked) and transformers (kv_idx > q_idx - sliding_window) show %d\n", W, most, W)
	if most != W {
		os.Exit(1)
	}
}
