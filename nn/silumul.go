package nn

import "math"

// SiLUMul is the gate of a SwiGLU MLP: the SiLU of the gate branch times the
// up branch, elementwise. It has no hyper-parameters.
type SiLUMul[T Float] struct{}

// Forward computes, elementwise over slices of one length,
//
//	h = silu(a) ⊙ u      silu(a) = a·σ(a),  σ(a) = 1/(1 + e^(−a))
//
// h may be a or u itself (the update is elementwise), but Backward needs a
// and u.
//
// It panics if the slices differ in length.
func (SiLUMul[T]) Forward(h, a, u []T) {
	mustLen("SiLUMul.Forward", "a", len(a), len(h), "len(h)")
	mustLen("SiLUMul.Forward", "u", len(u), len(h), "len(h)")
	if sigmoids32(h, a) { // h = σ(a) first, then scaled in place
		for j := range h {
			h[j] *= a[j] * u[j]
		}
		return
	}
	for j := range h {
		h[j] = a[j] * sigmoid(a[j]) * u[j]
	}
}

// Backward adds the gradients of a scalar loss into da and du, given
// dh = ∂L/∂h and the inputs a and u:
//
//	da += dh ⊙ u ⊙ silu'(a)      silu'(a) = σ(a)·(1 + a·(1 − σ(a)))
//	du += dh ⊙ silu(a)
//
// Each branch receives the other branch's value times dh; the gate branch
// also passes through the derivative of SiLU. Backward adds into da and du;
// callers zero them. The gradient buffers must not overlap the inputs.
//
// It panics if the slices differ in length.
func (SiLUMul[T]) Backward(da, du, dh, a, u []T) {
	n := len(dh)
	mustLen("SiLUMul.Backward", "da", len(da), n, "len(dh)")
	mustLen("SiLUMul.Backward", "du", len(du), n, "len(dh)")
	mustLen("SiLUMul.Backward", "a", len(a), n, "len(dh)")
	mustLen("SiLUMul.Backward", "u", len(u), n, "len(dh)")
	var sig []T
	if _, ok := any(a).([]float32); ok {
		sig = make([]T, n)
		if !sigmoids32(sig, a) {
			sig = nil
		}
	}
	for j, g := range dh {
		// forward was: h[j] = a[j]·σ(a[j])·u[j]
		var s T
		if sig != nil {
			s = sig[j]
		} else {
			s = sigmoid(a[j])
		}
		da[j] += g * u[j] * s * (1 + a[j]*(1-s)) // d(a·σ(a))/da = σ + a·σ·(1 − σ)
		du[j] += g * a[j] * s
	}
}

// sigmoid returns 1/(1 + e^(−a)), evaluated in float64 on the side where the
// exponent is not positive, so that it never overflows.
func sigmoid[T Float](a T) T {
	x := float64(a)
	if x >= 0 {
		return T(1 / (1 + math.Exp(-x)))
	}
	e := math.Exp(x)
	return T(e / (1 + e))
}
