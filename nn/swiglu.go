package nn

// SwiGLU is the gated MLP of Llama: model width D, hidden width F, three
// projections without bias in the Hugging Face layout
//
//	wGate (F, D)  mlp.gate_proj.weight
//	wUp   (F, D)  mlp.up_proj.weight
//	wDown (D, F)  mlp.down_proj.weight
//
// It is composed of Linear and SiLUMul, and its Backward runs their backwards
// in reverse order.
type SwiGLU[T Float] struct {
	D, F int // model width and hidden width
}

// Forward computes, for x (n, D) and y (n, D),
//
//	a = x wGateᵀ      u = x wUpᵀ      h = silu(a) ⊙ u      y = h wDownᵀ
//
// and saves the activations a, u and h, each (n, F), for the backward. y must
// not overlap x or the activations.
//
// It panics if D or F is not positive, n is negative, or a slice has the wrong
// length.
func (s SwiGLU[T]) Forward(y, a, u, h, x, wGate, wUp, wDown []T, n int) {
	s.check("SwiGLU.Forward", "y", y, x, wGate, wUp, wDown, a, u, h, n)
	expand := Linear[T]{In: s.D, Out: s.F}
	contract := Linear[T]{In: s.F, Out: s.D}
	expand.Forward(a, x, wGate, nil, n)   // a = x wGateᵀ
	expand.Forward(u, x, wUp, nil, n)     // u = x wUpᵀ
	SiLUMul[T]{}.Forward(h, a, u)         // h = silu(a) ⊙ u
	contract.Forward(y, h, wDown, nil, n) // y = h wDownᵀ
}

// Backward adds the gradients of a scalar loss into dx (n, D), dwGate (F, D),
// dwUp (F, D) and dwDown (D, F), given dy = ∂L/∂y (n, D), the inputs and the
// activations a, u and h saved by Forward:
//
//	dh = dy wDown      dwDown += dyᵀ h
//	da = dh ⊙ u ⊙ silu'(a)      du = dh ⊙ silu(a)
//	dx += da wGate + du wUp      dwGate += daᵀ x      dwUp += duᵀ x
//
// dx receives the sum of the gate and up paths. Backward adds into dx and the
// weight gradients; callers zero them. It allocates 3·n·F values of scratch
// for dh, da and du. The gradient buffers must not overlap the inputs.
//
// It panics if D or F is not positive, n is negative, or a slice has the wrong
// length.
func (s SwiGLU[T]) Backward(dx, dwGate, dwUp, dwDown, dy, x, wGate, wUp, wDown, a, u, h []T, n int) {
	const op = "SwiGLU.Backward"
	s.check(op, "dy", dy, x, wGate, wUp, wDown, a, u, h, n)
	mustLen(op, "dx", len(dx), n*s.D, "n*D")
	mustLen(op, "dwGate", len(dwGate), s.F*s.D, "F*D")
	mustLen(op, "dwUp", len(dwUp), s.F*s.D, "F*D")
	mustLen(op, "dwDown", len(dwDown), s.D*s.F, "D*F")
	expand := Linear[T]{In: s.D, Out: s.F}
	contract := Linear[T]{In: s.F, Out: s.D}
	// Fresh, zeroed scratch: the backwards below add into it.
	scratch := make([]T, 3*n*s.F)
	dh, da, du := scratch[:n*s.F], scratch[n*s.F:2*n*s.F], scratch[2*n*s.F:]
	// forward was: y = h wDownᵀ
	contract.Backward(dh, dwDown, nil, dy, h, wDown, n)
	// forward was: h = silu(a) ⊙ u
	SiLUMul[T]{}.Backward(da, du, dh, a, u)
	// forward was: u = x wUpᵀ and a = x wGateᵀ; x feeds both, so dx gets both
	expand.Backward(dx, dwUp, nil, du, x, wUp, n)
	expand.Backward(dx, dwGate, nil, da, x, wGate, n)
}

// check validates the sizes shared by Forward and Backward.
func (s SwiGLU[T]) check(op, outName string, out, x, wGate, wUp, wDown, a, u, h []T, n int) {
	mustPositive(op, "D", s.D)
	mustPositive(op, "F", s.F)
	mustRows(op, n)
	mustLen(op, outName, len(out), n*s.D, "n*D")
	mustLen(op, "x", len(x), n*s.D, "n*D")
	mustLen(op, "wGate", len(wGate), s.F*s.D, "F*D")
	mustLen(op, "wUp", len(wUp), s.F*s.D, "F*D")
	mustLen(op, "wDown", len(wDown), s.D*s.F, "D*F")
	mustLen(op, "a", len(a), n*s.F, "n*F")
	mustLen(op, "u", len(u), n*s.F, "n*F")
	mustLen(op, "h", len(h), n*s.F, "n*F")
}
