package checks

import (
	"fmt"
	"math"
	"math/cmplx"
	"slices"

	"github.com/attnlab/attnlab/nn"
)

// RoPEOps is a RoPE forward and backward in precision T, with the
// signatures of nn.RoPE's methods taken as method expressions.
type RoPEOps[T nn.Float] struct {
	Forward  func(r nn.RoPE[T], y, x []T, pos []int, B, H, T int)
	Backward func(r nn.RoPE[T], dx, dy []T, pos []int, B, H, T int)
}

// RoPEImpl is a rotary position embedding: its float64 and float32 paths.
type RoPEImpl struct {
	RoPEOps[float64]
	F32 RoPEOps[float32]
}

func ropeOps[T nn.Float]() RoPEOps[T] {
	return RoPEOps[T]{Forward: nn.RoPE[T].Forward, Backward: nn.RoPE[T].Backward}
}

// RoPEReference is nn.RoPE.
var RoPEReference = RoPEImpl{ropeOps[float64](), ropeOps[float32]()}

// ropeCase is one RoPE configuration with per-token positions (B, T).
type ropeCase struct {
	r       nn.RoPE[float64]
	B, H, T int
	pos     []int
}

func (c ropeCase) name() string {
	s := shape("B", c.B, "H", c.H, "T", c.T, "D", c.r.D) + ", " + c.r.Pairing.String()
	if c.r.Scaling.Kind != nn.NoScaling {
		s += fmt.Sprintf(", %v×%g", c.r.Scaling.Kind, c.r.Scaling.Factor)
	}
	return s
}

// size is the length of x (B, H, T, D).
func (c ropeCase) size() int { return c.B * c.H * c.T * c.r.D }

// rope returns a RoPE of width D with the given pairing and scaling.
func ropeOf(D int, base float64, p nn.Pairing, kind nn.ScalingKind, factor float64) nn.RoPE[float64] {
	return nn.RoPE[float64]{D: D, Base: base, Pairing: p, Scaling: nn.Scaling{Kind: kind, Factor: factor}}
}

// ropeSpreadLimit bounds the positions of ropeSpread.
const ropeSpreadLimit = 5003

// ropeSpread returns n positions below ropeSpreadLimit that are neither
// contiguous nor sorted.
func ropeSpread(n int) []int {
	pos := make([]int, n)
	for i := range pos {
		pos[i] = (i*i*37 + 11*i + 5) % ropeSpreadLimit
	}
	return pos
}

func ropeCaseOf[T nn.Float](ops RoPEOps[T], c ropeCase, seed uint64) Case[T] {
	x := randT[T](seed, c.size(), 1)
	r := nn.RoPE[T](c.r)
	return Case[T]{
		Name:     c.name(),
		Inputs:   []Input[T]{{"x", x}},
		Out:      c.size(),
		Forward:  func(y []T) error { ops.Forward(r, y, x, c.pos, c.B, c.H, c.T); return nil },
		Backward: func(g [][]T, dy []T) error { ops.Backward(r, g[0], dy, c.pos, c.B, c.H, c.T); return nil },
	}
}

// ropeSmall covers both pairings, both scalings, odd T and H, and positions
// per token: contiguous, out of order and beyond 1000.
func ropeSmall() []ropeCase {
	return []ropeCase{
		{ropeOf(2, 10000, nn.Half, nn.NoScaling, 0), 1, 1, 1, []int{3}},
		{ropeOf(6, 10000, nn.Half, nn.NoScaling, 0), 2, 3, 5, []int{0, 1, 2, 3, 4, 1000, 7, 4095, 1001, 2}},
		{ropeOf(8, 500000, nn.Interleaved, nn.LinearScaling, 4), 1, 3, 3, []int{5, 1234, 17}},
		{ropeOf(8, 10000, nn.Half, nn.NTKScaling, 8), 2, 1, 3, []int{2048, 3, 1, 0, 9, 3000}},
		{ropeOf(4, 10000, nn.Interleaved, nn.NTKScaling, 2), 1, 5, 1, []int{777}},
	}
}

func ropeBig() []ropeCase {
	return []ropeCase{
		{ropeOf(16, 10000, nn.Half, nn.NoScaling, 0), 2, 4, 33, ropeSpread(66)},
		{ropeOf(32, 500000, nn.Interleaved, nn.LinearScaling, 2), 1, 7, 17, ropeSpread(17)},
	}
}

func ropeCases[T nn.Float](ops RoPEOps[T], big bool) []Case[T] {
	var cs []Case[T]
	if big {
		for x, c := range ropeBig() {
			cs = append(cs, ropeCaseOf(ops, c, uint64(40+x)))
		}
		return cs
	}
	for x, c := range ropeSmall() {
		cs = append(cs, ropeCaseOf(ops, c, uint64(30+x)))
	}
	return cs
}

// ropeConfigs are the pairing × scaling combinations the semantic checks
// sweep, at width D.
func ropeConfigs(D int) []nn.RoPE[float64] {
	var rs []nn.RoPE[float64]
	for _, p := range []nn.Pairing{nn.Half, nn.Interleaved} {
		rs = append(rs, ropeOf(D, 10000, p, nn.NoScaling, 0), ropeOf(D, 10000, p, nn.LinearScaling, 4), ropeOf(D, 500000, p, nn.NTKScaling, 8))
	}
	return rs
}

// The shapes, positions and shifts of the semantic checks.
var (
	ropeZeroShape  = [4]int{2, 3, 5, 8}  // B, H, T, D of position-zero-identity
	ropeNormShape  = [4]int{2, 3, 7, 16} // of norm-preserving
	ropeDefShape   = [4]int{2, 3, 4, 8}  // of hf-rotate-half
	ropePermShape  = [4]int{2, 3, 5, 10} // of pairings-permutation
	ropeRelD       = 8                   // head width of relative-position
	ropeRelPairs   = [][2]int{{3, 1}, {0, 5}, {40, 40}, {2, 100}}
	ropeRelShifts  = []int{1, 7, 1000, 4000}
	ropeDefinedPos = []int{1000, 1, 4095, 7, 0, 513, 2, 2}
)

func ropeShape(s [4]int) string { return fmt.Sprintf("x [%d,%d,%d,%d]", s[0], s[1], s[2], s[3]) }

// RoPE returns the suite of RoPE.
func RoPE() Suite[RoPEImpl] {
	spec := gradSpec[RoPEImpl]{op: "RoPE", ref: RoPEReference, dirs: 4,
		cases:   func(i RoPEImpl, big bool) []Case[float64] { return ropeCases(i.RoPEOps, big) },
		cases32: func(i RoPEImpl, big bool) []Case[float32] { return ropeCases(i.F32, big) }}
	nConfigs := len(ropeConfigs(ropeNormShape[3]))
	var small []string
	for _, c := range append(ropeSmall(), ropeBig()[0]) {
		small = append(small, c.name())
	}
	return Suite[RoPEImpl]{
		Guide: OpGuide{
			What: "Rotary position embedding: each pair of features of a query or key head is rotated by the angle p·θ_k, " +
				"θ_k = base^(−2k/D). Pairs are (k, k+D/2) in the half pairing of Hugging Face and (2k, 2k+1) in Meta's interleaved one.",
			Forward: []Step{
				{Eq: "[y₀; y₁] = R(pθ_k) [x₀; x₁],  R(a) = [cos a  −sin a; sin a  cos a]", Shape: "x, y [B,H,T,D], positions [B,T], θ [D/2]",
					Why: "a rotation per pair; (R(pθ)q)ᵀ(R(tθ)k) = qᵀR((t−p)θ)k, so scores see only the position difference"},
			},
			Backward: []Step{
				{Eq: "[dx₀; dx₁] = R(pθ_k)ᵀ [dy₀; dy₁] = R(−pθ_k) [dy₀; dy₁]", Shape: "dx, dy [B,H,T,D]",
					Why: "for a fixed position RoPE is an orthogonal linear map; its transpose is the rotation by the opposite angle. Positions and frequencies are not learned and get no gradient"},
			},
			Notes: []string{"Position 0 is the identity and every position preserves norms; neither property can tell a wrong angle from a right one, which is why hf-rotate-half recomputes the published definitions."},
		},
		Checks: append(spec.checks(),
			Check[RoPEImpl]{Name: "position-zero-identity", Kind: Semantic, Run: ropePositionZero,
				Claim: "at position 0 every token comes out bit-identical, for both pairings and every scaling",
				Limit: "one position; other positions are checked against the definitions",
				Long: Long{
					Tests:  "at position 0, y = x bit for bit, both pairings, with and without linear and NTK scaling",
					Shapes: fmt.Sprintf("%s, %d configurations", ropeShape(ropeZeroShape), nConfigs),
					Proves: "angles are pos·θ: position 0 rotates nothing",
					Cannot: "any other position",
				}},
			Check[RoPEImpl]{Name: "norm-preserving", Kind: Semantic, Run: ropeNormPreserving,
				Claim: fmt.Sprintf("‖y‖ = ‖x‖ for every head vector within %g relative, at positions up to %d", identical, ropeSpreadLimit-1),
				Limit: "any rotation passes, a wrong angle or pairing included",
				Long: Long{
					Tests:  fmt.Sprintf("‖y‖ = ‖x‖ for every head vector within %g relative, at positions up to %d", identical, ropeSpreadLimit-1),
					Shapes: fmt.Sprintf("%s, %d configurations", ropeShape(ropeNormShape), nConfigs),
					Proves: "each pair is rotated, not scaled",
					Cannot: "the angle or the pairing: any rotation passes",
				}},
			Check[RoPEImpl]{Name: "relative-position", Kind: Semantic, Run: ropeRelativePosition,
				Claim: fmt.Sprintf("q·k after rotating q at p and k at t equals the same at p+s and t+s within %g (shifts up to %d): scores see only p − t", identical, slices.Max(ropeRelShifts)),
				Limit: "holds for any angle linear in the position; the frequencies are checked by hf-rotate-half",
				Long: Long{
					Tests:  fmt.Sprintf("q·k after rotating q at p and k at t equals the same at p+s and t+s, s = %s", list(ropeRelShifts)),
					Shapes: fmt.Sprintf("D = %d; %d shifted pairs (p, t) from %v over %d configurations", ropeRelD, len(ropeRelPairs)*len(ropeRelShifts)*len(ropeConfigs(ropeRelD)), ropeRelPairs, len(ropeConfigs(ropeRelD))),
					Proves: "scores depend on positions only through p − t",
					Cannot: "the frequencies: any angle linear in position passes",
				}},
			Check[RoPEImpl]{Name: "backward-inverts-forward", Kind: Semantic, Run: ropeBackwardInverts,
				Claim: "the backward applied to the forward's output returns the input: it is the rotation by −θ, the transpose of an orthogonal map",
				Limit: "checks the backward against this forward, not against the definition",
				Long: Long{
					Tests:  "backward applied to forward(x) returns x",
					Shapes: list(small),
					Proves: "the backward is the rotation by −θ, the transpose of the forward's orthogonal map",
					Cannot: "that the forward matches its definition",
				}},
			Check[RoPEImpl]{Name: "hf-rotate-half", Kind: Semantic, Run: ropeDefinitions,
				Claim: "half equals Hugging Face's x·cos + rotate_half(x)·sin, interleaved Meta's complex product on (2k, 2k+1), at explicit per-token positions, with linear and NTK scaling",
				Limit: "the definitions are recomputed here from their published formulas; a shared misreading of them would pass",
				Long: Long{
					Tests:  "half pairing equals Hugging Face's x·cos + rotate_half(x)·sin; interleaved equals Meta's complex product on (2k, 2k+1); at explicit per-token positions, with linear and NTK scaling",
					Shapes: fmt.Sprintf("%s, positions %v, %d configurations", ropeShape(ropeDefShape), ropeDefinedPos, nConfigs),
					Proves: "the forward matches the two published definitions bit for bit",
					Cannot: "a misreading shared by the definition recomputed here and the implementation",
				}},
			Check[RoPEImpl]{Name: "pairings-permutation", Kind: Semantic, Run: ropePairingsPermutation,
				Claim: "interleaved(x) = P⁻¹ half(P x), P taking features (2k, 2k+1) to (k, k+D/2), the permutation of q/k weight rows between the checkpoints",
				Limit: "relates the two pairings to each other, not either one to its definition",
				Long: Long{
					Tests:  "interleaved(x) = P⁻¹ half(P x), with P taking features (2k, 2k+1) to (k, k+D/2)",
					Shapes: ropeShape(ropePermShape),
					Proves: "the two pairings are the same rotation on permuted features: the permutation of q/k weight rows between checkpoints",
					Cannot: "either pairing against its definition",
				}},
		),
		At: func(impl RoPEImpl, s Sizes, seed uint64) Case[float64] {
			return ropeCaseOf(impl.RoPEOps, ropeSized(s), seed)
		},
		At32: func(impl RoPEImpl, s Sizes, seed uint64) Case[float32] {
			return ropeCaseOf(impl.F32, ropeSized(s), seed)
		},
		Reads: fmt.Sprintf("x [B,Hq,T,D], base 10000, the given pairing, positions spread below %d", ropeSpreadLimit),
	}
}

func ropeSized(s Sizes) ropeCase {
	return ropeCase{ropeOf(s.D, 10000, s.Pairing, nn.NoScaling, 0), s.B, s.Hq, s.T, ropeSpread(s.B * s.T)}
}

// ropeForward runs impl's forward on a fresh output.
func ropeForward(impl RoPEImpl, c ropeCase, x []float64) ([]float64, error) {
	y := make([]float64, len(x))
	err := protect(func() error { impl.Forward(c.r, y, x, c.pos, c.B, c.H, c.T); return nil })
	return y, err
}

func ropePositionZero(impl RoPEImpl) Result {
	B, H, T, D := ropeZeroShape[0], ropeZeroShape[1], ropeZeroShape[2], ropeZeroShape[3]
	for x, r := range ropeConfigs(D) {
		c := ropeCase{r, B, H, T, make([]int, B*T)}
		in := randn(uint64(50+x), c.size(), 1)
		y, err := ropeForward(impl, c, in)
		if err != nil {
			return errored(err, c.name()+": %v")
		}
		if d, msg := compare(0, pair{"y", y, in}); msg != "" {
			return measured(fail("%s: %s", c.name(), msg), d)
		}
	}
	return pass("y = x bit for bit at position 0, both pairings, without scaling and with linear and NTK scaling")
}

func ropeNormPreserving(impl RoPEImpl) Result {
	B, H, T, D := ropeNormShape[0], ropeNormShape[1], ropeNormShape[2], ropeNormShape[3]
	var worst float64
	for x, r := range ropeConfigs(D) {
		c := ropeCase{r, B, H, T, ropeSpread(B * T)}
		in := randn(uint64(60+x), c.size(), 1)
		y, err := ropeForward(impl, c, in)
		if err != nil {
			return errored(err, c.name()+": %v")
		}
		for v := 0; v < len(in); v += D {
			nx, ny := math.Sqrt(ropeDot(in[v:v+D], in[v:v+D])), math.Sqrt(ropeDot(y[v:v+D], y[v:v+D]))
			e := math.Abs(ny-nx) / nx
			if !(e <= identical) {
				return measured(fail("%s, head vector %d: ‖y‖ = %.17g, ‖x‖ = %.17g (relative error %.2g > %.2g)", c.name(), v/D, ny, nx, e, identical), e)
			}
			worst = max(worst, e)
		}
	}
	return measured(pass("%d configurations, max relative change of ‖·‖ %.1e", len(ropeConfigs(D)), worst), worst)
}

func ropeRelativePosition(impl RoPEImpl) Result {
	D := ropeRelD
	var worst float64
	n := 0
	for x, r := range ropeConfigs(D) {
		qk := randn(uint64(70+x), 2*D, 1) // q and k as the two tokens of one sequence
		score := func(p, t int) (float64, error) {
			y, err := ropeForward(impl, ropeCase{r, 1, 1, 2, []int{p, t}}, qk)
			return ropeDot(y[:D], y[D:]), err
		}
		for _, pt := range ropeRelPairs {
			want, err := score(pt[0], pt[1])
			if err != nil {
				return errored(err, "%v")
			}
			for _, s := range ropeRelShifts {
				got, err := score(pt[0]+s, pt[1]+s)
				if err != nil {
					return errored(err, "%v")
				}
				d, _ := diff([]float64{got}, []float64{want})
				n++
				if d > identical {
					return measured(fail("%v/%v: q·k at (%d, %d) = %.12g, at (%d, %d) = %.12g (error %.2g > %.2g)",
						r.Pairing, r.Scaling.Kind, pt[0]+s, pt[1]+s, got, pt[0], pt[1], want, d, identical), d)
				}
				worst = max(worst, d)
			}
		}
	}
	return measured(pass("%d shifted pairs over both pairings and all scalings, max error %.1e", n, worst), worst)
}

func ropeBackwardInverts(impl RoPEImpl) Result {
	var worst float64
	for x, c := range append(ropeSmall(), ropeBig()[0]) {
		in := randn(uint64(80+x), c.size(), 1)
		y, err := ropeForward(impl, c, in)
		if err != nil {
			return errored(err, c.name()+": %v")
		}
		back := make([]float64, len(in))
		if err := protect(func() error { impl.Backward(c.r, back, y, c.pos, c.B, c.H, c.T); return nil }); err != nil {
			return errored(err, c.name()+": %v")
		}
		d, msg := compare(identical, pair{"backward(forward(x))", back, in})
		if msg != "" {
			return measured(fail("%s: %s", c.name(), msg), d)
		}
		worst = max(worst, d)
	}
	return measured(pass("backward(forward(x)) = x on every gradient case, max error %.1e", worst), worst)
}

// ropeInvFreq is θ_k = 1 / base^(2k/D), Hugging Face's
// inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2) / dim)) and Meta's
// freqs in precompute_freqs_cis, with the base of NTK-aware scaling,
// base·factor^(D/(D−2)).
func ropeInvFreq(r nn.RoPE[float64]) []float64 {
	base := r.Base
	if r.Scaling.Kind == nn.NTKScaling {
		base *= math.Pow(r.Scaling.Factor, float64(r.D)/float64(r.D-2))
	}
	inv := make([]float64, r.D/2)
	for k := range inv {
		inv[k] = 1 / math.Pow(base, float64(2*k)/float64(r.D))
	}
	return inv
}

// ropePublished rotates x (B, H, T, D) by the published definition of r's
// pairing: for half, Hugging Face's apply_rotary_pos_emb,
//
//	emb = cat(freqs, freqs)    y = x·cos(emb) + rotate_half(x)·sin(emb)
//	rotate_half(x) = cat(−x[D/2:], x[:D/2])
//
// and for interleaved, Meta's apply_rotary_emb: the pairs (2k, 2k+1) read as
// complex numbers and multiplied by polar(1, freqs). freqs = p·θ with p
// divided by the factor under linear scaling (HF's t / scaling_factor).
func ropePublished(r nn.RoPE[float64], x []float64, pos []int, B, H, T int) []float64 {
	D := r.D
	inv := ropeInvFreq(r)
	y := make([]float64, len(x))
	freqs, cos, sin, rot := make([]float64, D/2), make([]float64, D), make([]float64, D), make([]float64, D)
	for b := range B {
		for t := range T {
			p := float64(pos[b*T+t])
			if r.Scaling.Kind == nn.LinearScaling {
				p /= r.Scaling.Factor
			}
			for k := range freqs {
				freqs[k] = p * inv[k]
			}
			for j := range D {
				cos[j], sin[j] = math.Cos(freqs[j%(D/2)]), math.Sin(freqs[j%(D/2)])
			}
			for h := range H {
				o := ((b*H+h)*T + t) * D
				xh, yh := x[o:o+D], y[o:o+D]
				if r.Pairing == nn.Interleaved {
					for k, f := range freqs {
						z := complex(xh[2*k], xh[2*k+1]) * cmplx.Rect(1, f)
						yh[2*k], yh[2*k+1] = real(z), imag(z)
					}
					continue
				}
				for j := range D / 2 {
					rot[j], rot[j+D/2] = -xh[j+D/2], xh[j]
				}
				for j := range D {
					yh[j] = xh[j]*cos[j] + rot[j]*sin[j]
				}
			}
		}
	}
	return y
}

func ropeDefinitions(impl RoPEImpl) Result {
	B, H, T, D := ropeDefShape[0], ropeDefShape[1], ropeDefShape[2], ropeDefShape[3]
	pos := ropeDefinedPos
	var worst float64
	for x, r := range ropeConfigs(D) {
		c := ropeCase{r, B, H, T, pos}
		in := randn(uint64(90+x), c.size(), 1)
		y, err := ropeForward(impl, c, in)
		if err != nil {
			return errored(err, c.name()+": %v")
		}
		d, msg := compare(identical, pair{"y", y, ropePublished(r, in, pos, B, H, T)})
		if msg != "" {
			return measured(fail("%s: %s", c.name(), msg), d)
		}
		worst = max(worst, d)
	}
	return measured(pass("half = HF rotate_half, interleaved = Meta complex product, positions %v, max error %.1e", pos, worst), worst)
}

func ropePairingsPermutation(impl RoPEImpl) Result {
	B, H, T, D := ropePermShape[0], ropePermShape[1], ropePermShape[2], ropePermShape[3]
	var worst float64
	for x, r := range ropeConfigs(D) {
		if r.Pairing != nn.Interleaved {
			continue
		}
		half := r
		half.Pairing = nn.Half
		c := ropeCase{r, B, H, T, ropeSpread(B * T)}
		in := randn(uint64(100+x), c.size(), 1)
		// P: feature 2k → k, 2k+1 → k+D/2, per head vector
		px := make([]float64, len(in))
		for v := 0; v < len(in); v += D {
			for k := range D / 2 {
				px[v+k], px[v+k+D/2] = in[v+2*k], in[v+2*k+1]
			}
		}
		want, err := ropeForward(impl, c, in)
		if err != nil {
			return errored(err, c.name()+": %v")
		}
		hy, err := ropeForward(impl, ropeCase{half, B, H, T, c.pos}, px)
		if err != nil {
			return errored(err, c.name()+": %v")
		}
		got := make([]float64, len(hy)) // P⁻¹
		for v := 0; v < len(hy); v += D {
			for k := range D / 2 {
				got[v+2*k], got[v+2*k+1] = hy[v+k], hy[v+k+D/2]
			}
		}
		d, msg := compare(identical, pair{"P⁻¹ half(P x)", got, want})
		if msg != "" {
			return measured(fail("%s: %s", c.name(), msg), d)
		}
		worst = max(worst, d)
	}
	return measured(pass("interleaved(x) = P⁻¹ half(P x) at D = %d, without scaling and with linear and NTK scaling, max error %.1e", D, worst), worst)
}

func ropeDot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
