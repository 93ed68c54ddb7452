package lab

import (
	"fmt"
	"strings"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/internal/memlimit"
)

// MaxSize bounds every count of checks.Sizes that attnlab gradcheck
// takes: far above what finite differences can check in a day, and small
// enough that the estimate of an instance's memory is computed from them
// exactly; within it, GradOptions.Validate holds the estimate against the
// memory available.
const MaxSize = 1 << 20

// footprints are, per operation, the flags of the sizes its instance reads
// and the float64 elements it holds at once at sizes s: inputs, output,
// the fixed G, the analytic gradients and what the forward and backward
// allocate (for attention, the reference's score matrices of B·Hq·M·N).
// Products saturate (memlimit.Mul).
var footprints = map[string]footprint{
	"attention":       {"b hq hkv m n d dv", attentionElems},
	"attention-flash": {"b hq hkv m n d dv", attentionElems},
	// the variants add the sinks and their gradient, and softcap's
	// recomputed scores
	"attention-variants":       {"b hq hkv m n d dv", variantElems},
	"attention-flash-variants": {"b hq hkv m n d dv", variantElems},
	"rope":                     {"b hq t d", func(s checks.Sizes) int { return m(6, s.B, s.Hq, s.T, s.D) }},
	"rmsnorm":                  {"b t dim", func(s checks.Sizes) int { return add(m(6, s.B, s.T, s.Dim), m(4, s.Dim), m(4, s.B, s.T)) }},
	"swiglu": {"b t dim f", func(s checks.Sizes) int {
		return add(m(6, s.B, s.T, s.Dim), m(12, s.Dim, s.F), m(8, s.B, s.T, s.F))
	}},
	"crossentropy":    {"b t dim", func(s checks.Sizes) int { return add(m(6, s.B, s.T, s.Dim), m(4, s.B, s.T)) }},
	"linear":          {"b t dim", func(s checks.Sizes) int { return add(m(6, s.B, s.T, s.Dim), m(5, s.Dim, s.Dim), m(4, s.Dim)) }},
	"embedding":       {"b t dim d", func(s checks.Sizes) int { return add(m(4, s.B, s.T, s.D), m(3, s.Dim, s.D), m(2, s.B, s.T)) }},
	"attention-layer": {"b t dim hq hkv d", layerElems},
	"block": {"b t dim hq hkv d f", func(s checks.Sizes) int {
		return add(layerElems(s), m(9, s.Dim, s.F), m(8, s.B, s.T, s.F), m(16, s.B, s.T, s.Dim))
	}},
	"decoder": {"b t dim hq hkv f", decoderElems},
	// the sinks and their moments, softcap's recomputed scores
	"decoder-variants": {"b t dim hq hkv f", func(s checks.Sizes) int {
		return add(decoderElems(s), m(8, 2, s.Hq), m(2, s.B, s.Hq, s.T, s.T))
	}},
	"infonce": {"b n t dim", func(s checks.Sizes) int {
		n := max(s.N, s.B)
		return add(m(4, s.B+n, s.T, s.Dim), m(6, s.B, n), m(4, s.B+n, s.Dim))
	}},
	"listwise": {"b n t dim", func(s checks.Sizes) int {
		t := max(s.T, 4)
		return add(m(4, s.B, s.N, t, s.Dim), m(6, s.B, s.N), m(4, s.B, s.N, s.Dim))
	}},
}

// scratch is what an instance allocates whatever its sizes: the tiles of
// the fused attention, small buffers.
const scratch = 1 << 16

type footprint struct {
	reads string // the flags, without their dash
	elems func(s checks.Sizes) int
}

// decoderElems is the decoder of the checks: 2 layers of width Dim, heads
// of Dim/Hq, a vocabulary of 11: the parameters four times (values,
// gradients and the model's copies), the activations of two passes.
func decoderElems(s checks.Sizes) int {
	const layers, vocab = 2, 11
	hd := max(s.Dim/max(s.Hq, 1), 1)
	q, kv := m(s.Hq, hd), m(s.Hkv, hd)
	block := add(m(2, s.Dim), m(2, q, s.Dim), m(2, kv, s.Dim), m(3, s.Dim, s.F))
	params := add(m(vocab, s.Dim), s.Dim, m(layers, block))
	token := add(m(layers+4, s.Dim), m(3, vocab), m(layers, add(m(8, s.Dim), m(3, s.F), m(8, q), m(6, kv), s.Hq)))
	return add(m(4, params), m(2, s.B, s.T, token), m(2, s.B, s.Hq, s.T, s.T))
}

func attentionElems(s checks.Sizes) int {
	q, k, v, o := m(s.B, s.Hq, s.M, s.D), m(s.B, s.Hkv, s.N, s.D), m(s.B, s.Hkv, s.N, s.Dv), m(s.B, s.Hq, s.M, s.Dv)
	// the fused kernel keeps a dQ per stripe of keys: up to 4 more
	return add(m(7, q), m(3, k), m(3, v), m(4, o), m(4, s.B, s.Hq, s.M, s.N), m(2, s.B, s.M, s.N), m(6, s.B, s.Hq, s.M))
}

func variantElems(s checks.Sizes) int {
	return add(attentionElems(s), m(s.B, s.Hq, s.M, s.N), m(4, s.Hq))
}

// layerElems is the attention layer at sizes s: B sequences of T tokens of
// width Dim, Hq and Hkv heads of D.
func layerElems(s checks.Sizes) int {
	q, kv := m(s.B, s.T, s.Hq, s.D), m(s.B, s.T, s.Hkv, s.D)
	w := add(m(6, s.Dim, s.Hq, s.D), m(6, s.Dim, s.Hkv, s.D))
	return add(m(6, s.B, s.T, s.Dim), w, m(12, q), m(8, kv), m(4, s.B, s.Hq, s.T, s.T), m(2, s.B, s.T, s.T))
}

func m(n ...int) int   { return memlimit.Mul(n...) }
func add(n ...int) int { return memlimit.Add(n...) }

// checkMemory holds the memory of o's instance against the memory
// available: its elements in float64 and the snapshot finite differences
// keep of them, and a float32 copy with Float32. The error names the flags
// of the sizes the operation reads.
func (o GradOptions) checkMemory() error {
	fp, ok := footprints[o.Op]
	if !ok {
		return nil // an unknown operation: GradCheck names it
	}
	per := 8 + 8
	if o.Float32 {
		per += 4
	}
	s := o.Sizes
	value := map[string]int{"b": s.B, "t": s.T, "m": s.M, "n": s.N, "dim": s.Dim, "hq": s.Hq, "hkv": s.Hkv, "d": s.D, "dv": s.Dv, "f": s.F}
	var what []string
	for _, f := range strings.Fields(fp.reads) {
		what = append(what, fmt.Sprintf("-%s %d", f, value[f]))
	}
	need := memlimit.Mul(memlimit.Add(fp.elems(s), scratch), per)
	return memlimit.Check("-op "+o.Op+" at "+strings.Join(what, " "), need, "inputs, outputs and gradients")
}
