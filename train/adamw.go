package train

import (
	"fmt"
	"math"

	"github.com/attnlab/attnlab/nn"
)

// Param is one parameter tensor with its gradient, as the optimiser sees it.
type Param[T nn.Float] struct {
	Name    string
	X, Grad []T
	Decay   bool // whether weight decay applies (not to norms and embeddings, by default)
}

// AdamW is PyTorch's torch.optim.AdamW. The zero value is not usable: set
// the hyper-parameters (PyTorch's defaults are Beta1 0.9, Beta2 0.999, Eps
// 1e-8, WeightDecay 0.01).
type AdamW[T nn.Float] struct {
	Beta1, Beta2, Eps, WeightDecay float64

	Step int            // steps taken
	M, V map[string][]T // first and second moments, by parameter name
}

// NewAdamW returns an optimiser with the given hyper-parameters.
func NewAdamW[T nn.Float](beta1, beta2, eps, weightDecay float64) *AdamW[T] {
	return &AdamW[T]{Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: weightDecay, M: map[string][]T{}, V: map[string][]T{}}
}

// Update applies one step at learning rate lr to every parameter:
//
//	x ← x·(1 − lr·wd)                        (decoupled decay, if Decay)
//	m ← β₁m + (1−β₁)g      v ← β₂v + (1−β₂)g²
//	x ← x − lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)
//
// in the order of operations of torch.optim.AdamW (single-tensor path).
func (o *AdamW[T]) Update(params []Param[T], lr float64) {
	o.Step++
	bc1 := 1 - math.Pow(o.Beta1, float64(o.Step))
	bc2 := 1 - math.Pow(o.Beta2, float64(o.Step))
	stepSize := lr / bc1
	bc2Sqrt := math.Sqrt(bc2)
	for _, p := range params {
		if len(p.X) != len(p.Grad) {
			panic(fmt.Sprintf("train: AdamW: param %q has %d values and %d gradients", p.Name, len(p.X), len(p.Grad)))
		}
		m, v := o.M[p.Name], o.V[p.Name]
		if m == nil {
			m, v = make([]T, len(p.X)), make([]T, len(p.X))
			o.M[p.Name], o.V[p.Name] = m, v
		}
		decay := T(1)
		if p.Decay && o.WeightDecay != 0 {
			decay = T(1 - lr*o.WeightDecay)
		}
		b1, b2 := T(o.Beta1), T(o.Beta2)
		for i, g := range p.Grad {
			x := p.X[i] * decay
			m[i] = m[i]*b1 + g*(1-b1)
			v[i] = v[i]*b2 + g*g*(1-b2)
			denom := T(math.Sqrt(float64(v[i])))/T(bc2Sqrt) + T(o.Eps)
			p.X[i] = x - T(stepSize)*(m[i]/denom)
		}
	}
}

// ClipGradNorm scales every gradient by min(1, maxNorm/(‖g‖ + 1e-6)), where
// ‖g‖ is the 2-norm over all of them, as torch.nn.utils.clip_grad_norm_
// does, and returns ‖g‖ before clipping. maxNorm ≤ 0 only measures. A NaN
// or infinite norm is returned as is and nothing is scaled.
func ClipGradNorm[T nn.Float](params []Param[T], maxNorm float64) float64 {
	var ss float64
	for _, p := range params {
		var s float64 // the norm of each tensor, then the norm of the norms, as PyTorch
		for _, g := range p.Grad {
			s += float64(g) * float64(g)
		}
		n := math.Sqrt(s)
		ss += n * n
	}
	norm := math.Sqrt(ss)
	if maxNorm <= 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm
	}
	coef := maxNorm / (norm + 1e-6)
	if coef < 1 {
		c := T(coef)
		for _, p := range params {
			for i := range p.Grad {
				p.Grad[i] *= c
			}
		}
	}
	return norm
}

// Schedule is linear warmup to Peak over Warmup steps, then cosine decay to
// Min at step Total (and Min after).
type Schedule struct {
	Peak   float64 `flag:"lr"`
	Min    float64 `flag:"min-lr"`
	Warmup int     `flag:"warmup"`
	Total  int     `flag:"steps"`
}

// At returns the learning rate of step (0-based).
func (s Schedule) At(step int) float64 {
	switch {
	case step < s.Warmup:
		return s.Peak * float64(step+1) / float64(s.Warmup)
	case step >= s.Total:
		return s.Min
	}
	progress := float64(step-s.Warmup) / float64(max(1, s.Total-s.Warmup))
	return s.Min + 0.5*(s.Peak-s.Min)*(1+math.Cos(math.Pi*progress))
}
