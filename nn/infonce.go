package nn

import (
	"fmt"
	"math"
)

// InfoNCE is the contrastive loss of a dual encoder trained with in-batch
// negatives (van den Oord et al., arXiv:1807.03748; DPR [4]): B queries q (B, D) and N ≥ B documents d (N, D), where
// document i < B is the positive of query i and is a negative for every
// other query, and documents B..N−1 are extra (hard) negatives shared by
// all queries. With temperature τ,
//
//	S[i,j] = q[i,:]·d[j,:] / τ                                    (B, N)
//	L_q   = (1/B) Σ_i ( log Σ_{j: !mask[i,j]} exp S[i,j] − S[i,i] )
//
// which is the mean cross-entropy of each row's softmax against column i.
// With Symmetric, the document→query direction is added: each positive
// document j < B picks its query among the B queries,
//
//	L_d = (1/B) Σ_{j<B} ( log Σ_{i: !mask[i,j]} exp S[i,j] − S[j,j] )
//	L   = (L_q + L_d) / 2
//
// and L = L_q otherwise. Hard-negative columns have no query of their own,
// so only the first B columns enter L_d.
//
// # False negatives
//
// mask (B, N) marks pairs (i, j) that must not count as negatives: a
// document j that also answers query i (in code search, another copy of the
// positive's code). A masked entry leaves both denominators; its gradient is
// exactly zero. The positive is never masked: mask[i,i] must be false. nil
// masks nothing.
//
// # Temperature
//
// τ may be fixed or learned. Backward returns ∂L/∂τ; a temperature learned
// as log τ (CLIP's logit scale is its negative) takes ∂L/∂log τ = τ·∂L/∂τ.
type InfoNCE[T Float] struct {
	B, N, D   int  // queries, documents (B positives, then N−B hard negatives), width
	Symmetric bool // add the document→query direction
}

// InfoNCEActs holds what Forward saves for Backward, and the ∂L/∂S that
// Backward computes on the way.
type InfoNCEActs[T Float] struct {
	S  []T // similarities over τ (B, N)
	P  []T // row softmax of S over unmasked entries (B, N); 0 where masked
	PC []T // Symmetric: column softmax of S[:, :B] over unmasked entries (B, B), [i*B+j]; else nil
	DS []T // set by Backward: ∂L/∂S (B, N), overwritten on each call
}

// NewActs returns the activations of the loss's shapes.
func (c InfoNCE[T]) NewActs() *InfoNCEActs[T] {
	a := &InfoNCEActs[T]{S: make([]T, c.B*c.N), P: make([]T, c.B*c.N), DS: make([]T, c.B*c.N)}
	if c.Symmetric {
		a.PC = make([]T, c.B*c.B)
	}
	return a
}

// Forward computes the similarities, their softmaxes and the loss, saving
// S, P and PC in a. The log-sum-exps subtract the row (column) maximum and
// the loss is summed in float64.
//
// It panics if the sizes are not 1 ≤ B ≤ N and D ≥ 1, τ is not a positive
// finite number, a slice has the wrong length, or the mask covers a
// positive.
func (c InfoNCE[T]) Forward(a *InfoNCEActs[T], q, d []T, tau T, mask []bool) T {
	c.check("InfoNCE.Forward", a, q, d, tau, mask)
	B, N, D := c.B, c.N, c.D
	masked := func(i, j int) bool { return mask != nil && mask[i*N+j] }
	// pass 1: S = q dᵀ / τ
	inv := 1 / tau
	for i := range B {
		qi := q[i*D : (i+1)*D]
		for j := range N {
			dj := d[j*D : (j+1)*D][:len(qi)]
			var s T
			for k, v := range qi {
				s += v * dj[k]
			}
			a.S[i*N+j] = s * inv
		}
	}
	// pass 2: row softmax over the unmasked entries, and L_q
	var lq float64
	for i := range B {
		si, pi := a.S[i*N:(i+1)*N], a.P[i*N:(i+1)*N]
		mx := si[i] // the positive is never masked: a safe starting maximum
		for j, s := range si {
			if !masked(i, j) {
				mx = max(mx, s)
			}
		}
		var z float64
		for j, s := range si {
			pi[j] = 0
			if !masked(i, j) {
				e := math.Exp(float64(s - mx))
				pi[j] = T(e)
				z += e
			}
		}
		for j := range pi {
			pi[j] = T(float64(pi[j]) / z)
		}
		// −log p[i,i] = log Σ_j e^(S[i,j] − max) − (S[i,i] − max)
		lq += math.Log(z) - float64(si[i]-mx)
	}
	loss := lq / float64(B)
	if !c.Symmetric {
		return T(loss)
	}
	// pass 3: column softmax of the positives' columns over the queries, and L_d
	var ld float64
	for j := range B {
		mx := a.S[j*N+j]
		for i := range B {
			if !masked(i, j) {
				mx = max(mx, a.S[i*N+j])
			}
		}
		var z float64
		for i := range B {
			a.PC[i*B+j] = 0
			if !masked(i, j) {
				e := math.Exp(float64(a.S[i*N+j] - mx))
				a.PC[i*B+j] = T(e)
				z += e
			}
		}
		for i := range B {
			a.PC[i*B+j] = T(float64(a.PC[i*B+j]) / z)
		}
		ld += math.Log(z) - float64(a.S[j*N+j]-mx)
	}
	return T((loss + ld/float64(B)) / 2)
}

// Backward adds dloss times the gradients of the loss into dq (B, D),
// dd (N, D) and *dtau, given the activations Forward saved in a:
//
//	∂L/∂S[i,j] = w/B · (P[i,j] − [i = j])  +  w/B · (PC[i,j] − [i = j])   (second term: Symmetric, j < B)
//	dq[i,:] += Σ_j ∂L/∂S[i,j] · d[j,:] / τ
//	dd[j,:] += Σ_i ∂L/∂S[i,j] · q[i,:] / τ
//	dτ      += −(1/τ) Σ_{i,j} ∂L/∂S[i,j] · S[i,j]
//
// with w = 1/2 when Symmetric and 1 otherwise. Masked entries have P = PC = 0
// and get exactly zero. It writes ∂L/∂S (dloss included) into a.DS. Backward
// adds into dq, dd and *dtau; callers zero them. dtau may be nil when τ is
// fixed.
//
// It panics on the conditions of Forward.
func (c InfoNCE[T]) Backward(dq, dd []T, dtau *T, dloss T, q, d []T, tau T, mask []bool, a *InfoNCEActs[T]) {
	c.check("InfoNCE.Backward", a, q, d, tau, mask)
	if len(dq) != len(q) || len(dd) != len(d) {
		panic(fmt.Sprintf("nn: InfoNCE.Backward: len(dq) = %d, len(dd) = %d, want B*D = %d and N*D = %d", len(dq), len(dd), len(q), len(d)))
	}
	B, N, D := c.B, c.N, c.D
	w := dloss / T(B)
	if c.Symmetric {
		w /= 2
	}
	// forward was: L_q = (1/B) Σ_i (log Σ_j exp S[i,j] − S[i,i]); the
	// softmax's derivative P − onehot, weighted by the mean and the half
	for i := range B {
		for j := range N {
			a.DS[i*N+j] = w * a.P[i*N+j]
		}
		a.DS[i*N+i] -= w
	}
	if c.Symmetric {
		// forward was: L_d = (1/B) Σ_j (log Σ_i exp S[i,j] − S[j,j]): the same
		// along the columns of the positives
		for i := range B {
			for j := range B {
				a.DS[i*N+j] += w * a.PC[i*B+j]
			}
			a.DS[i*N+i] -= w
		}
	}
	// forward was: S[i,j] = q[i,:]·d[j,:] / τ
	inv := 1 / tau
	var dt T
	for i := range B {
		qi, dqi := q[i*D:(i+1)*D], dq[i*D:(i+1)*D]
		for j := range N {
			g := a.DS[i*N+j]
			if g == 0 {
				continue // masked entries, and exact zeros: nothing to add
			}
			dt += g * a.S[i*N+j]
			dj, ddj := d[j*D:(j+1)*D], dd[j*D:(j+1)*D]
			gs := g * inv
			for k := range qi {
				dqi[k] += gs * dj[k]
				ddj[k] += gs * qi[k]
			}
		}
	}
	// ∂S[i,j]/∂τ = −S[i,j]/τ
	if dtau != nil {
		*dtau -= dt * inv
	}
}

func (c InfoNCE[T]) check(op string, a *InfoNCEActs[T], q, d []T, tau T, mask []bool) {
	B, N, D := c.B, c.N, c.D
	switch {
	case B < 1 || N < B || D < 1:
		panic(fmt.Sprintf("nn: %s: B = %d, N = %d, D = %d: want 1 <= B <= N and D >= 1", op, B, N, D))
	case !(tau > 0) || math.IsInf(float64(tau), 0):
		panic(fmt.Sprintf("nn: %s: τ = %v, want a finite τ > 0", op, tau))
	case len(q) != B*D || len(d) != N*D:
		panic(fmt.Sprintf("nn: %s: len(q) = %d, len(d) = %d, want B*D = %d and N*D = %d", op, len(q), len(d), B*D, N*D))
	case mask != nil && len(mask) != B*N:
		panic(fmt.Sprintf("nn: %s: len(mask) = %d, want B*N = %d", op, len(mask), B*N))
	case len(a.S) != B*N || len(a.P) != B*N || len(a.DS) != B*N || c.Symmetric && len(a.PC) != B*B:
		panic(fmt.Sprintf("nn: %s: activations of the wrong size (see NewActs)", op))
	}
	for i := range B {
		if mask != nil && mask[i*N+i] {
			panic(fmt.Sprintf("nn: %s: mask[%d, %d] is set: the positive of query %d is masked", op, i, i, i))
		}
	}
}

// DuplicateMask writes the false-negative mask of InfoNCE into dst (B, N):
// document j is masked for query i when it is not i's positive but has the
// positive's key (keys has one entry per document, N = len(keys); the key
// of a code document is its text up to white space, say). The positive
// itself is never masked.
//
// It panics if B > len(keys) or len(dst) != B·len(keys).
func DuplicateMask(dst []bool, keys []string, B int) {
	N := len(keys)
	if B > N || len(dst) != B*N {
		panic(fmt.Sprintf("nn: DuplicateMask: B = %d, %d keys, len(dst) = %d: want B <= N and len(dst) = B*N", B, N, len(dst)))
	}
	for i := range B {
		for j, k := range keys {
			dst[i*N+j] = j != i && k == keys[i]
		}
	}
}
