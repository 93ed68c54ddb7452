package checks

import (
	"fmt"
	"math"
	"math/cmplx"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/nn"
)

// RoPEImpl is a RoPE forward and backward in float64, with the signatures of
// nn.RoPE's methods taken as method expressions.
type RoPEImpl struct {
	Forward  func(r nn.RoPE[float64], y, x []float64, pos []int, B, H, T int)
	Backward func(r nn.RoPE[float64], dx, dy []float64, pos []int, B, H, T int)
}

// RoPEReference is nn.RoPE.
var RoPEReference = RoPEImpl{Forward: nn.RoPE[float64].Forward, Backward: nn.RoPE[float64].Backward}

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

// ropeSpread returns n positions below 5003 that are neither contiguous
// nor sorted.
func ropeSpread(n int) []int {
	pos := make([]int, n)
	for i := range pos {
		pos[i] = (i*i*37 + 11*i + 5) % 5003
	}
	return pos
}

func ropeDiff(impl RoPEImpl, c ropeCase, seed uint64) Diff {
	x := randn(seed, c.size(), 1)
	return Diff{
		Name:     c.name(),
		Inputs:   []gradcheck.Param{{Name: "x", X: x}},
		Out:      c.size(),
		Forward:  func(y []float64) { impl.Forward(c.r, y, x, c.pos, c.B, c.H, c.T) },
		Backward: func(g [][]float64, dy []float64) { impl.Backward(c.r, g[0], dy, c.pos, c.B, c.H, c.T) },
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

// ropeConfigs are the pairing × scaling combinations the semantic checks
// sweep, at width D.
func ropeConfigs(D int) []nn.RoPE[float64] {
	var rs []nn.RoPE[float64]
	for _, p := range []nn.Pairing{nn.Half, nn.Interleaved} {
		rs = append(rs, ropeOf(D, 10000, p, nn.NoScaling, 0), ropeOf(D, 10000, p, nn.LinearScaling, 4), ropeOf(D, 500000, p, nn.NTKScaling, 8))
	}
	return rs
}

// RoPE returns the checks of RoPE.
func RoPE() []Check[RoPEImpl] {
	small := func(impl RoPEImpl) []Diff {
		var ds []Diff
		for x, c := range ropeSmall() {
			ds = append(ds, ropeDiff(impl, c, uint64(30+x)))
		}
		return ds
	}
	big := func(impl RoPEImpl) []Diff {
		return []Diff{
			ropeDiff(impl, ropeCase{ropeOf(16, 10000, nn.Half, nn.NoScaling, 0), 2, 4, 33, ropeSpread(66)}, 40),
			ropeDiff(impl, ropeCase{ropeOf(32, 500000, nn.Interleaved, nn.LinearScaling, 2), 1, 7, 17, ropeSpread(17)}, 41),
		}
	}
	return append(gradientChecks("RoPE", small, big),
		Check[RoPEImpl]{Name: "position-zero-identity", Kind: Semantic, Run: ropePositionZero,
			Claim: "at position 0 every token comes out bit-identical, for both pairings and every scaling",
			Limit: "one position; other positions are checked against the definitions"},
		Check[RoPEImpl]{Name: "norm-preserving", Kind: Semantic, Run: ropeNormPreserving,
			Claim: "‖y‖ = ‖x‖ for every head vector within 1e-12 relative, at positions up to 5000",
			Limit: "any rotation passes, a wrong angle or pairing included"},
		Check[RoPEImpl]{Name: "relative-position", Kind: Semantic, Run: ropeRelativePosition,
			Claim: "q·k after rotating q at p and k at t equals the same at p+s and t+s within 1e-12 (shifts up to 4000): scores see only p − t",
			Limit: "holds for any angle linear in the position; the frequencies are checked by hf-rotate-half"},
		Check[RoPEImpl]{Name: "backward-inverts-forward", Kind: Semantic, Run: ropeBackwardInverts,
			Claim: "the backward applied to the forward's output returns the input: it is the rotation by −θ, the transpose of an orthogonal map",
			Limit: "checks the backward against this forward, not against the definition"},
		Check[RoPEImpl]{Name: "hf-rotate-half", Kind: Semantic, Run: ropeDefinitions,
			Claim: "half equals Hugging Face's x·cos + rotate_half(x)·sin, interleaved Meta's complex product on (2k, 2k+1), at explicit per-token positions, with linear and NTK scaling",
			Limit: "the definitions are recomputed here from their published formulas; a shared misreading of them would pass"},
		Check[RoPEImpl]{Name: "pairings-permutation", Kind: Semantic, Run: ropePairingsPermutation,
			Claim: "interleaved(x) = P⁻¹ half(P x), P taking features (2k, 2k+1) to (k, k+D/2), the permutation of q/k weight rows between the checkpoints",
			Limit: "relates the two pairings to each other, not either one to its definition"},
	)
}

// ropeForward runs impl's forward on a fresh output.
func ropeForward(impl RoPEImpl, c ropeCase, x []float64) ([]float64, error) {
	y := make([]float64, len(x))
	err := protect(func() error { impl.Forward(c.r, y, x, c.pos, c.B, c.H, c.T); return nil })
	return y, err
}

func ropePositionZero(impl RoPEImpl) Result {
	const B, H, T, D = 2, 3, 5, 8
	for x, r := range ropeConfigs(D) {
		c := ropeCase{r, B, H, T, make([]int, B*T)}
		in := randn(uint64(50+x), c.size(), 1)
		y, err := ropeForward(impl, c, in)
		if err != nil {
			return errored(err, c.name()+": %v")
		}
		if d, msg := compare(0, pair{"y", y, in}); msg != "" {
			res := fail("%s: %s", c.name(), msg)
			res.Error = d
			return res
		}
	}
	return pass("y = x bit for bit at position 0, both pairings, without scaling and with linear and NTK scaling")
}

func ropeNormPreserving(impl RoPEImpl) Result {
	const B, H, T, D = 2, 3, 7, 16
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
				res := fail("%s, head vector %d: ‖y‖ = %.17g, ‖x‖ = %.17g (relative error %.2g > %.2g)", c.name(), v/D, ny, nx, e, identical)
				res.Error = e
				return res
			}
			worst = max(worst, e)
		}
	}
	res := pass("%d configurations, max relative change of ‖·‖ %.1e", len(ropeConfigs(D)), worst)
	res.Error = worst
	return res
}

func ropeRelativePosition(impl RoPEImpl) Result {
	const D = 8
	var worst float64
	n := 0
	for x, r := range ropeConfigs(D) {
		qk := randn(uint64(70+x), 2*D, 1) // q and k as the two tokens of one sequence
		score := func(p, t int) (float64, error) {
			y, err := ropeForward(impl, ropeCase{r, 1, 1, 2, []int{p, t}}, qk)
			return ropeDot(y[:D], y[D:]), err
		}
		for _, pt := range [][2]int{{3, 1}, {0, 5}, {40, 40}, {2, 100}} {
			want, err := score(pt[0], pt[1])
			if err != nil {
				return errored(err, "%v")
			}
			for _, s := range []int{1, 7, 1000, 4000} {
				got, err := score(pt[0]+s, pt[1]+s)
				if err != nil {
					return errored(err, "%v")
				}
				d, _ := diff([]float64{got}, []float64{want})
				n++
				if d > identical {
					res := fail("%v/%v: q·k at (%d, %d) = %.12g, at (%d, %d) = %.12g (error %.2g > %.2g)",
						r.Pairing, r.Scaling.Kind, pt[0]+s, pt[1]+s, got, pt[0], pt[1], want, d, identical)
					res.Error = d
					return res
				}
				worst = max(worst, d)
			}
		}
	}
	res := pass("%d shifted pairs over both pairings and all scalings, max error %.1e", n, worst)
	res.Error = worst
	return res
}

func ropeBackwardInverts(impl RoPEImpl) Result {
	var worst float64
	for x, c := range append(ropeSmall(), ropeCase{ropeOf(16, 10000, nn.Half, nn.NoScaling, 0), 2, 4, 33, ropeSpread(66)}) {
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
			res := fail("%s: %s", c.name(), msg)
			res.Error = d
			return res
		}
		worst = max(worst, d)
	}
	res := pass("backward(forward(x)) = x on every gradient case, max error %.1e", worst)
	res.Error = worst
	return res
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
	const B, H, T, D = 2, 3, 4, 8
	pos := []int{1000, 1, 4095, 7, 0, 513, 2, 2}
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
			res := fail("%s: %s", c.name(), msg)
			res.Error = d
			return res
		}
		worst = max(worst, d)
	}
	res := pass("half = HF rotate_half, interleaved = Meta complex product, positions %v, max error %.1e", pos, worst)
	res.Error = worst
	return res
}

func ropePairingsPermutation(impl RoPEImpl) Result {
	const B, H, T, D = 2, 3, 5, 10
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
			res := fail("%s: %s", c.name(), msg)
			res.Error = d
			return res
		}
		worst = max(worst, d)
	}
	res := pass("interleaved(x) = P⁻¹ half(P x) at D = %d, without scaling and with linear and NTK scaling, max error %.1e", D, worst)
	res.Error = worst
	return res
}

func ropeDot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
