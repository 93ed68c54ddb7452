package faults

import (
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/model"
)

// DecoderVariants returns the faults of the model's variants
// (checks.DecoderVariantsConfig): backwards that forget one of them.
func DecoderVariants() []Fault[checks.DecoderImpl] {
	ref := checks.DecoderVariantsReference
	return []Fault[checks.DecoderImpl]{
		{Name: "final-softcap-no-factor", Note: "The logits are capped in the forward; the backward passes dlogits through as if they were not. Finite differences see the missing 1 − tanh² factor in every gradient.",
			Impl:   with(ref, func(d *checks.DecoderImpl) { d.Backward = backwardUncappedLogits }),
			Breaks: "final_logit_softcapping's factor 1 − (t/c)² dropped from the LM head's backward"},
		{Name: "layer-sinks-no-grad", Note: "The sinks take part in every layer's forward; the backward never adds their gradient, so they would never train. Only finite differences of self_attn.sinks see it.",
			Impl:   with(ref, func(d *checks.DecoderImpl) { d.Backward = backwardWithoutSinkGrad }),
			Breaks: "the layers' backward leaves self_attn.sinks without gradient (attention.SinkGrad never called)"},
	}
}

// backwardUncappedLogits is the backward of a model whose config has no
// final_logit_softcapping: the forward's cap is forgotten.
func backwardUncappedLogits(m *model64, g, p *model.Params[float64], a *model.Acts[float64], b *model.Batch) {
	mm := *m
	mm.Config.FinalLogitSoftcapping = 0
	mm.Backward(g, p, a, b)
}

// backwardWithoutSinkGrad is the backward of layers that do not know they
// have sinks: the attention backward is the same (the sink is in the saved
// lse), the sinks' gradient is never added.
func backwardWithoutSinkGrad(m *model64, g, p *model.Params[float64], a *model.Acts[float64], b *model.Batch) {
	mm := *m
	mm.Block.Attn.Sinks = false
	mm.Backward(g, p, a, b)
}
