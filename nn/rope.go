package nn

import (
	"errors"
	"fmt"
	"math"
)

// Pairing says which two features of a head RoPE rotates together.
type Pairing int

const (
	// Half pairs feature k with feature k + D/2, Hugging Face's Llama
	// (rotate_half). The default, and the layout of HF checkpoints.
	Half Pairing = iota
	// Interleaved pairs feature 2k with feature 2k+1, Meta's original Llama
	// (a complex multiplication) and GPT-J.
	Interleaved
)

var pairingNames = [...]string{"half", "interleaved"}

// String returns "half" or "interleaved".
func (p Pairing) String() string {
	if p < 0 || int(p) >= len(pairingNames) {
		return fmt.Sprintf("Pairing(%d)", int(p))
	}
	return pairingNames[p]
}

// ParsePairing returns the pairing whose String is name, "half" or
// "interleaved".
func ParsePairing(name string) (Pairing, error) {
	for p, n := range pairingNames {
		if n == name {
			return Pairing(p), nil
		}
	}
	return 0, fmt.Errorf("nn: pairing %q: want half or interleaved", name)
}

// ScalingKind names a way of stretching RoPE to positions beyond the
// training length.
type ScalingKind int

const (
	// NoScaling uses positions and base as given. The default.
	NoScaling ScalingKind = iota
	// LinearScaling is position interpolation: positions are divided by
	// Factor, so pos·θ_k becomes (pos/Factor)·θ_k at every frequency
	// (Hugging Face rope_type "linear").
	LinearScaling
	// NTKScaling is NTK-aware base scaling: the base becomes
	// base·Factor^(D/(D−2)), which leaves the highest frequency θ_0 = 1 alone
	// and divides the lowest one, θ_{D/2−1}, by exactly Factor.
	NTKScaling
)

var scalingNames = [...]string{"none", "linear", "ntk"}

// String returns "none", "linear" or "ntk".
func (k ScalingKind) String() string {
	if k < 0 || int(k) >= len(scalingNames) {
		return fmt.Sprintf("ScalingKind(%d)", int(k))
	}
	return scalingNames[k]
}

// Scaling is a RoPE context-extension scheme and its factor (≥ 1). Factor is
// ignored when Kind is NoScaling.
type Scaling struct {
	Kind   ScalingKind
	Factor float64
}

// RoPE is the rotary position embedding: each pair of features of a query or
// key head is rotated by the angle pos·θ_k, with the frequencies
//
//	θ_k = base^(−2k/D),  k = 0 … D/2−1
//
// D is the rotated width (the head dimension) and must be even. Base is
// 10000 in Llama 1 and 2 and 500000 in Llama 3. Angles are computed in
// float64 and then converted to the element type, so float32 keeps its
// accuracy at large positions.
//
// The element type parameter is named E, not T, because T names the sequence
// length in the methods' arguments.
type RoPE[E Float] struct {
	D       int     // rotated width, even
	Base    float64 // base of the frequencies, > 0
	Pairing Pairing // which features rotate together; Half by default
	Scaling Scaling // context extension; none by default
}

// Validate reports whether r describes a rotation: D even and at least 2,
// Base positive and finite, a known Pairing, and a known scaling kind whose
// Factor is finite and at least 1 (NTK scaling also needs D > 2, for the
// exponent D/(D−2)).
func (r RoPE[E]) Validate() error {
	if msg := r.invalid(); msg != "" {
		return errors.New("nn: RoPE: " + msg)
	}
	return nil
}

// invalid describes what makes r invalid, or returns "".
func (r RoPE[E]) invalid() string {
	switch {
	case r.D < 2:
		return fmt.Sprintf("D = %d, want an even D >= 2", r.D)
	case r.D%2 != 0:
		return fmt.Sprintf("D = %d is odd; features rotate in pairs", r.D)
	case !(r.Base > 0) || math.IsInf(r.Base, 0):
		return fmt.Sprintf("Base = %v, want a finite base > 0", r.Base)
	case r.Pairing != Half && r.Pairing != Interleaved:
		return fmt.Sprintf("unknown %v", r.Pairing)
	}
	switch f := r.Scaling.Factor; r.Scaling.Kind {
	case NoScaling:
	case LinearScaling, NTKScaling:
		if !(f >= 1) || math.IsInf(f, 0) {
			return fmt.Sprintf("%v scaling Factor = %v, want a finite factor >= 1", r.Scaling.Kind, f)
		}
		if r.Scaling.Kind == NTKScaling && r.D == 2 {
			return "ntk scaling needs D > 2 (the base is raised to D/(D−2))"
		}
	default:
		return fmt.Sprintf("unknown %v", r.Scaling.Kind)
	}
	return ""
}

// CheckPositions returns an error naming the first position in pos that is
// negative or, when limit > 0, not below limit (for example the capacity of
// a KV cache or the longest trained context). A limit <= 0 checks only for
// negative positions.
func CheckPositions(pos []int, limit int) error {
	if msg := badPosition(pos, limit); msg != "" {
		return errors.New("nn: " + msg)
	}
	return nil
}

// badPosition describes the first position outside [0, limit), or returns "".
func badPosition(pos []int, limit int) string {
	for i, p := range pos {
		if p < 0 {
			return fmt.Sprintf("pos[%d] = %d is negative", i, p)
		}
		if limit > 0 && p >= limit {
			return fmt.Sprintf("pos[%d] = %d is not below the limit %d", i, p, limit)
		}
	}
	return ""
}

// Freqs returns the D/2 frequencies θ_k = base^(−2k/D), with the base
// raised to base·Factor^(D/(D−2)) under NTK scaling. Linear scaling acts on
// positions, not here. It panics if r is invalid (see Validate).
func (r RoPE[E]) Freqs() []float64 {
	r.mustValid("RoPE.Freqs")
	base := r.Base
	if r.Scaling.Kind == NTKScaling {
		base *= math.Pow(r.Scaling.Factor, float64(r.D)/float64(r.D-2))
	}
	theta := make([]float64, r.D/2)
	for k := range theta {
		// Hugging Face's inv_freq = 1 / base^(arange(0, D, 2)/D)
		theta[k] = 1 / math.Pow(base, float64(2*k)/float64(r.D))
	}
	return theta
}

// Angles fills the cos/sin tables (len(pos), D/2) of the rotation angles
//
//	cos[i*D/2+k] = cos(p·θ_k)    sin[i*D/2+k] = sin(p·θ_k)
//
// where p = pos[i], or pos[i]/Factor under linear scaling, and θ = Freqs().
// The angles are computed in float64. It panics if r is invalid, a position
// is negative, or a table has the wrong length.
func (r RoPE[E]) Angles(cos, sin []E, pos []int) {
	const op = "RoPE.Angles"
	r.mustValid(op)
	half := r.D / 2
	mustLen(op, "cos", len(cos), len(pos)*half, "len(pos)*D/2")
	mustLen(op, "sin", len(sin), len(pos)*half, "len(pos)*D/2")
	if msg := badPosition(pos, 0); msg != "" {
		panic("nn: " + op + ": " + msg)
	}
	theta := r.Freqs()
	for i, p := range pos {
		r.trig(cos[i*half:(i+1)*half], sin[i*half:(i+1)*half], theta, p)
	}
}

// Forward rotates every pair of features of x (B, H, T, D) into y by the
// angle of its token's position pos[b*T+t] (pos is (B, T)):
//
//	y[i0] = x[i0]·cos(p·θ_k) − x[i1]·sin(p·θ_k)
//	y[i1] = x[i0]·sin(p·θ_k) + x[i1]·cos(p·θ_k)
//
// where (i0, i1) = (k, k+D/2) for Half and (2k, 2k+1) for Interleaved. All
// heads of a token share its angles. y may be x itself; partial overlap is
// not allowed. Position 0 is the identity.
//
// It panics if r is invalid (see Validate: odd D among others), B, H or T is
// negative, a position is negative, or a slice has the wrong length.
func (r RoPE[E]) Forward(y, x []E, pos []int, B, H, T int) {
	theta, step, off := r.prepare("RoPE.Forward", "y", "x", y, x, pos, B, H, T)
	D, half := r.D, r.D/2
	cs := make([]E, D)
	cos, sin := cs[:half], cs[half:]
	for b := range B {
		for t := range T {
			// the angles of this token, shared by its heads
			r.trig(cos, sin, theta, pos[b*T+t])
			rotateToken(y, x, cos, sin, b, t, H, T, D, step, off)
		}
	}
}

// Rotate is Forward with the angles read from tables that Angles filled for
// the positions 0, 1, …, len(cos)/(D/2) − 1: the same results, without
// computing a sine per token, and without allocating (decoding rotates one
// token per layer and step). It panics like Forward, and if a position is
// beyond the tables.
func (r RoPE[E]) Rotate(y, x []E, pos []int, B, H, T int, cos, sin []E) {
	const op = "RoPE.Rotate"
	r.mustValid(op)
	mustNonNegative(op, "B", B)
	mustNonNegative(op, "H", H)
	mustNonNegative(op, "T", T)
	mustLen(op, "y", len(y), B*H*T*r.D, "B*H*T*D")
	mustLen(op, "x", len(x), B*H*T*r.D, "B*H*T*D")
	mustLen(op, "pos", len(pos), B*T, "B*T")
	D, half := r.D, r.D/2
	if len(cos) != len(sin) || len(cos)%half != 0 {
		panic(fmt.Sprintf("nn: %s: tables of %d and %d angles, want equal multiples of D/2 = %d", op, len(cos), len(sin), half))
	}
	if msg := badPosition(pos, 0); msg != "" {
		panic("nn: " + op + ": " + msg)
	}
	step, off := 1, half
	if r.Pairing == Interleaved {
		step, off = 2, 1
	}
	for b := range B {
		for t := range T {
			p := pos[b*T+t]
			if (p+1)*half > len(cos) {
				panic(fmt.Sprintf("nn: %s: position %d beyond the tables' %d", op, p, len(cos)/half))
			}
			rotateToken(y, x, cos[p*half:(p+1)*half], sin[p*half:(p+1)*half], b, t, H, T, D, step, off)
		}
	}
}

// rotateToken rotates the H heads of token t of row b by the angles cos,
// sin.
func rotateToken[E Float](y, x, cos, sin []E, b, t, H, T, D, step, off int) {
	for h := range H {
		o := ((b*H+h)*T + t) * D
		yh, xh := y[o:o+D], x[o:o+D]
		for k, c := range cos {
			i0, i1 := k*step, k*step+off
			x0, x1 := xh[i0], xh[i1] // both read before either is written: y may be x
			yh[i0] = x0*c - x1*sin[k]
			yh[i1] = x0*sin[k] + x1*c
		}
	}
}

// Backward adds the gradient of a scalar loss with respect to x into dx,
// given dy = ∂L/∂y, both (B, H, T, D). For a fixed position the forward is a
// rotation, an orthogonal linear map, so its transpose is the rotation by the
// opposite angle:
//
//	dx[i0] += dy[i0]·cos(p·θ_k) + dy[i1]·sin(p·θ_k)
//	dx[i1] += −dy[i0]·sin(p·θ_k) + dy[i1]·cos(p·θ_k)
//
// Positions and frequencies are not learned and get no gradient. Backward
// adds into dx; callers zero it. dx must not overlap dy.
//
// It panics if r is invalid, B, H or T is negative, a position is negative,
// or a slice has the wrong length.
func (r RoPE[E]) Backward(dx, dy []E, pos []int, B, H, T int) {
	theta, step, off := r.prepare("RoPE.Backward", "dx", "dy", dx, dy, pos, B, H, T)
	D, half := r.D, r.D/2
	cs := make([]E, D)
	cos, sin := cs[:half], cs[half:]
	for b := range B {
		for t := range T {
			r.trig(cos, sin, theta, pos[b*T+t])
			for h := range H {
				o := ((b*H+h)*T + t) * D
				dxh, dyh := dx[o:o+D], dy[o:o+D]
				for k, c := range cos {
					i0, i1 := k*step, k*step+off
					// forward was: y0 = x0·c − x1·s,  y1 = x0·s + x1·c,
					// i.e. y = R x with R = [c −s; s c]; so dx += Rᵀ dy, and
					// Rᵀ = [c s; −s c] is the rotation by −angle
					g0, g1 := dyh[i0], dyh[i1]
					dxh[i0] += g0*c + g1*sin[k]
					dxh[i1] += -g0*sin[k] + g1*c
				}
			}
		}
	}
}

// prepare validates the arguments shared by Forward and Backward and returns
// the frequencies and the pairing: pair k is (k·step, k·step + off), that is
// (k, k+D/2) for Half and (2k, 2k+1) for Interleaved.
func (r RoPE[E]) prepare(op, dstName, srcName string, dst, src []E, pos []int, B, H, T int) (theta []float64, step, off int) {
	r.mustValid(op)
	mustNonNegative(op, "B", B)
	mustNonNegative(op, "H", H)
	mustNonNegative(op, "T", T)
	mustLen(op, dstName, len(dst), B*H*T*r.D, "B*H*T*D")
	mustLen(op, srcName, len(src), B*H*T*r.D, "B*H*T*D")
	mustLen(op, "pos", len(pos), B*T, "B*T")
	if msg := badPosition(pos, 0); msg != "" {
		panic("nn: " + op + ": " + msg)
	}
	step, off = 1, r.D/2
	if r.Pairing == Interleaved {
		step, off = 2, 1
	}
	return r.Freqs(), step, off
}

// trig fills cos and sin (D/2) for one position, in float64 before the
// conversion to E.
func (r RoPE[E]) trig(cos, sin []E, theta []float64, pos int) {
	p := float64(pos)
	if r.Scaling.Kind == LinearScaling {
		p /= r.Scaling.Factor // position interpolation
	}
	for k, th := range theta {
		s, c := math.Sincos(p * th)
		cos[k], sin[k] = E(c), E(s)
	}
}

// mustValid panics with Validate's finding if r is invalid.
func (r RoPE[E]) mustValid(op string) {
	if msg := r.invalid(); msg != "" {
		panic("nn: " + op + ": " + msg)
	}
}
