package lab

import (
	"sync"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/faults"
)

// Op is one row of the registry: an operation whose implementations have
// type I, with everything the lab, attnlab explain, attnlab gradcheck and
// the oracle know of it. Its Name is the one name of the operation
// everywhere: the lab's sections, explain, gradcheck -op; Oracle names the
// op of attnlab ref (and of the PyTorch oracle) that computes it.
type Op[I any] struct {
	Name      string
	Impl      string // what the correct implementation is
	Reference I
	Suite     checks.Suite[I] // checks, long form, sized instances
	Faults    []faults.Fault[I]
	Oracle    string // "" when no oracle op computes it
}

// Ops returns the registry, one row per operation, in the order the lab
// runs them. The rows are built once; they hold no state a run changes.
func Ops() []Runner { return registry() }

var registry = sync.OnceValue(func() []Runner {
	return []Runner{
		Op[checks.Impl]{Name: "attention", Impl: "reference attention (attention.Reference), float64; float32 path the same",
			Reference: checks.AttentionReference, Suite: checks.Attention(), Faults: faults.Attention(), Oracle: "attention"},
		Op[checks.Impl]{Name: "attention-flash", Impl: "fused FlashAttention-2 style kernel (attention.FlashRun), float64; float32 path with SIMD tiles",
			Reference: checks.FlashAttention, Suite: checks.Flash(), Oracle: "attention"},
		Op[checks.Impl]{Name: "attention-variants", Impl: "reference attention with softcap, ALiBi and sinks (attention.Reference, attention.SinkGrad), float64; float32 path the same",
			Reference: checks.AttentionReference, Suite: checks.Variants(), Faults: faults.Variants(), Oracle: "attention"},
		Op[checks.Impl]{Name: "attention-flash-variants", Impl: "the fused kernel (attention.FlashRun) with softcap, ALiBi and sinks, float64; float32 path with SIMD tiles",
			Reference: checks.FlashAttention, Suite: checks.FlashVariants(), Oracle: "attention"},
		Op[checks.RMSNormImpl]{Name: "rmsnorm", Impl: "nn.RMSNorm, float64 and float32",
			Reference: checks.RMSNormReference, Suite: checks.RMSNorm(), Faults: faults.RMSNorm(), Oracle: "rmsnorm"},
		Op[checks.RoPEImpl]{Name: "rope", Impl: "nn.RoPE, float64 and float32",
			Reference: checks.RoPEReference, Suite: checks.RoPE(), Faults: faults.RoPE(), Oracle: "rope"},
		Op[checks.SwiGLUImpl]{Name: "swiglu", Impl: "nn.SwiGLU, float64 and float32 (vectorised sigmoid)",
			Reference: checks.SwiGLUReference, Suite: checks.SwiGLU(), Faults: faults.SwiGLU(), Oracle: "swiglu"},
		Op[checks.CrossEntropyImpl]{Name: "crossentropy", Impl: "nn.CrossEntropy, ignore index −100, float64 and float32 (vectorised exp)",
			Reference: checks.CrossEntropyReference, Suite: checks.CrossEntropy(), Faults: faults.CrossEntropy()},
		Op[checks.LinearImpl]{Name: "linear", Impl: "nn.Linear, float64 and float32 (GEMM)",
			Reference: checks.LinearReference, Suite: checks.Linear(), Faults: faults.Linear()},
		Op[checks.EmbeddingImpl]{Name: "embedding", Impl: "nn.Embedding, float64 and float32",
			Reference: checks.EmbeddingReference, Suite: checks.Embedding(), Faults: faults.Embedding()},
		Op[checks.LayerImpl]{Name: "attention-layer", Impl: "attention.Layer (projections, RoPE, GQA attention), float64 and float32",
			Reference: checks.LayerReference, Suite: checks.Layer(), Faults: faults.Layer()},
		Op[checks.BlockImpl]{Name: "block", Impl: "model.Block (RMSNorm, attention layer, SwiGLU, residuals), float64 and float32",
			Reference: checks.BlockReference, Suite: checks.Block(), Faults: faults.Block(), Oracle: "block"},
		Op[checks.DecoderImpl]{Name: "decoder", Impl: "model.Model: training pass and KV-cache decoding, float64 and float32",
			Reference: checks.DecoderReference, Suite: checks.Decoder(), Faults: faults.Decoder(), Oracle: "decoder"},
		Op[checks.DecoderImpl]{Name: "decoder-variants", Impl: "model.Model with sliding_window 3, attn_logit_softcapping 2, final_logit_softcapping 5 and attention sinks: training pass and KV-cache decoding, float64 and float32",
			Reference: checks.DecoderVariantsReference, Suite: checks.DecoderOf(checks.DecoderVariantsReference), Faults: faults.DecoderVariants()},
		Op[checks.InfoNCEImpl]{Name: "infonce", Impl: "nn.Head (MeanPool, L2Norm, InfoNCE): the contrastive head retrieve/dense trains, float64 and float32",
			Reference: checks.InfoNCEReference, Suite: checks.InfoNCE(), Faults: faults.InfoNCE()},
		Op[checks.ListwiseImpl]{Name: "listwise", Impl: "nn.PairPool and Listwise: the pooling, scoring head and listwise loss of a cross-encoder reranker, float64 and float32",
			Reference: checks.ListwiseReference, Suite: checks.Listwise(), Faults: faults.Listwise()},
	}
})
