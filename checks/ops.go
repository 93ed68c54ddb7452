package checks

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

// Sizes are the dimensions of one op instance for OpDiff; each op reads the
// ones it needs.
type Sizes struct {
	B, T    int // sequences and tokens (rows = B·T)
	Dim     int // model width (rmsnorm, swiglu, layer, block)
	Hq, Hkv int // heads (rope uses Hq)
	HeadDim int // per head (rope, layer, block)
	F       int // SwiGLU hidden width (swiglu, block)
	Pairing nn.Pairing
}

var opDiffs = map[string]func(s Sizes, seed uint64) Diff{
	"rope": func(s Sizes, seed uint64) Diff {
		return ropeDiff(RoPEReference, ropeCase{ropeOf(s.HeadDim, 10000, s.Pairing, nn.NoScaling, 0), s.B, s.Hq, s.T, ropeSpread(s.B * s.T)}, seed)
	},
	"rmsnorm": func(s Sizes, seed uint64) Diff { return rmsnormDiff(RMSNormReference, s.B*s.T, s.Dim, 1e-5, seed) },
	"swiglu":  func(s Sizes, seed uint64) Diff { return swigluDiff(SwiGLUReference, s.B*s.T, s.Dim, s.F, 1, seed) },
	"layer": func(s Sizes, seed uint64) Diff {
		l := layer64{Dim: s.Dim, Hq: s.Hq, Hkv: s.Hkv, HeadDim: s.HeadDim, RoPE: nn.RoPE[float64]{D: s.HeadDim, Base: 10000, Pairing: s.Pairing}}
		return layerDiff(LayerReference, l, selfConfig(l, s.B, s.T, nil), seed)
	},
	"block": func(s Sizes, seed uint64) Diff {
		k := testBlock(s.Dim, s.Hq, s.Hkv, s.HeadDim, s.F)
		k.Attn.RoPE.Pairing = s.Pairing
		return blockDiff(BlockReference, k, selfConfig(k.Attn, s.B, s.T, nil), seed)
	},
}

// OpNames lists the ops OpDiff knows.
func OpNames() []string {
	names := make([]string, 0, len(opDiffs))
	for n := range opDiffs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// OpDiff returns the named op, with its reference implementation and random
// inputs, as a Diff for a finite-difference check at chosen sizes.
func OpDiff(op string, s Sizes, seed uint64) (Diff, error) {
	f, ok := opDiffs[op]
	if !ok {
		return Diff{}, fmt.Errorf("unknown op %q (known: %s)", op, strings.Join(OpNames(), ", "))
	}
	var d Diff
	err := protect(func() error { d = f(s, seed); return nil })
	return d, err
}

// Prepare returns the scalar loss L = Σ out ⊙ G of d (G fixed and random)
// and its inputs paired with their analytic gradients, ready for package
// gradcheck.
func (d Diff) Prepare() (func() float64, []gradcheck.Param, error) {
	loss, g := d.loss(1)
	grads, err := d.grads(g, nil)
	if err != nil {
		return nil, nil, err
	}
	return loss, d.params(grads), nil
}

// GradNorm returns ‖∇L‖ over all params: the scale against which a
// directional derivative's error is measured.
func GradNorm(params []gradcheck.Param) float64 {
	var norm float64
	for _, p := range params {
		for _, v := range p.Grad {
			norm += v * v
		}
	}
	return math.Sqrt(norm)
}
