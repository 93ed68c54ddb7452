package nn

// Head is the contrastive head of a dual encoder, from the token vectors an
// encoder produces to the InfoNCE loss:
//
//	q = normalise(meanpool(xq, validQ))     (B, D)
//	d = normalise(meanpool(xd, validD))     (N, D)
//	L = InfoNCE(q, d, τ, mask)
//
// for B queries of Tq tokens and N documents of Td tokens. The lab checks
// Head itself (checks.InfoNCE) with finite differences; retrieve/dense
// trains with it, pooling each sequence at its own length and calling
// ForwardPooled and BackwardPooled.
type Head[T Float] struct {
	Loss   InfoNCE[T]
	Tq, Td int // tokens per query and per document
	Eps    T   // of the normalisation (PyTorch: 1e-12)
}

// HeadActs holds what Head.Forward saves for the backward.
type HeadActs[T Float] struct {
	PQ, PD []T // pooled vectors (B, D), (N, D)
	NQ, ND []T // their norms (B), (N)
	Q, D   []T // unit vectors (B, D), (N, D): the embeddings
	Loss   *InfoNCEActs[T]

	dq, dd, dpq, dpd []T
}

// NewActs returns activations of the head's shapes.
func (h Head[T]) NewActs() *HeadActs[T] {
	B, N, D := h.Loss.B, h.Loss.N, h.Loss.D
	return &HeadActs[T]{
		PQ: make([]T, B*D), PD: make([]T, N*D), NQ: make([]T, B), ND: make([]T, N),
		Q: make([]T, B*D), D: make([]T, N*D), Loss: h.Loss.NewActs(),
		dq: make([]T, B*D), dd: make([]T, N*D), dpq: make([]T, B*D), dpd: make([]T, N*D),
	}
}

// Forward returns the loss for token vectors xq (B, Tq, D) and xd (N, Td, D)
// with validity validQ (B·Tq) and validD (N·Td) (nil: no padding), saving
// the activations in a.
//
// It panics on the conditions of MeanPool, L2Norm and InfoNCE.
func (h Head[T]) Forward(a *HeadActs[T], xq []T, validQ []bool, xd []T, validD []bool, tau T, mask []bool) T {
	B, N, D := h.Loss.B, h.Loss.N, h.Loss.D
	pool := MeanPool[T]{D: D}
	// pass 1: one vector per sequence
	pool.Forward(a.PQ, xq, validQ, B, h.Tq)
	pool.Forward(a.PD, xd, validD, N, h.Td)
	return h.ForwardPooled(a, tau, mask)
}

// ForwardPooled is Forward from the pooled vectors a.PQ (B, D) and a.PD
// (N, D), which the caller has filled: the head of a trainer whose
// sequences each have a length of their own (retrieve/dense), pooled one
// by one.
func (h Head[T]) ForwardPooled(a *HeadActs[T], tau T, mask []bool) T {
	B, N, D := h.Loss.B, h.Loss.N, h.Loss.D
	norm := L2Norm[T]{D: D, Eps: h.Eps}
	// pass 2: unit vectors, so that q·d is the cosine
	norm.Forward(a.Q, a.NQ, a.PQ, B)
	norm.Forward(a.D, a.ND, a.PD, N)
	// pass 3: similarities over τ and the loss
	return h.Loss.Forward(a.Loss, a.Q, a.D, tau, mask)
}

// Backward adds dloss times the gradients of the loss into dxq (B, Tq, D),
// dxd (N, Td, D) and *dtau (nil when τ is fixed), given the activations
// Forward saved. Backward adds into dxq, dxd and *dtau; callers zero them.
func (h Head[T]) Backward(dxq, dxd []T, dtau *T, dloss T, a *HeadActs[T], validQ, validD []bool, tau T, mask []bool) {
	B, N, D := h.Loss.B, h.Loss.N, h.Loss.D
	pool := MeanPool[T]{D: D}
	clear(a.dpq)
	clear(a.dpd)
	h.BackwardPooled(a.dpq, a.dpd, dtau, dloss, a, tau, mask)
	// forward was: pq = meanpool(xq), pd = meanpool(xd)
	pool.Backward(dxq, a.dpq, validQ, B, h.Tq)
	pool.Backward(dxd, a.dpd, validD, N, h.Td)
}

// BackwardPooled is Backward down to the pooled vectors: it adds dloss
// times the gradients into dpq (B, D), dpd (N, D) and *dtau, given the
// activations ForwardPooled saved. Callers zero dpq and dpd.
func (h Head[T]) BackwardPooled(dpq, dpd []T, dtau *T, dloss T, a *HeadActs[T], tau T, mask []bool) {
	B, N, D := h.Loss.B, h.Loss.N, h.Loss.D
	norm := L2Norm[T]{D: D, Eps: h.Eps}
	// forward was: L = InfoNCE(q, d, τ)
	clear(a.dq)
	clear(a.dd)
	h.Loss.Backward(a.dq, a.dd, dtau, dloss, a.Q, a.D, tau, mask, a.Loss)
	// forward was: q = normalise(pq), d = normalise(pd)
	norm.Backward(dpq, a.dq, a.Q, a.NQ, B)
	norm.Backward(dpd, a.dd, a.D, a.ND, N)
}
