package model

import (
	"math/rand/v2"
	"strings"
)

// Init fills p as Hugging Face initialises a LlamaForCausalLM: every
// projection and the embedding from N(0, std²) (initializer_range, 0.02 by
// default), every RMSNorm weight with 1. The draw is deterministic for seed.
func (m *Model[T]) Init(p *Params[T], std float64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x11a3a))
	for _, t := range m.Tensors(p) {
		if strings.HasSuffix(t.Name, "norm.weight") {
			for i := range t.Data {
				t.Data[i] = 1
			}
			continue
		}
		for i := range t.Data {
			t.Data[i] = T(std * r.NormFloat64())
		}
	}
}
