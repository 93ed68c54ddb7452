package nn

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

type ropeBackward = func(dx, dy []float64, pos []int, B, H, T int)

// ropeFD builds a RoPE check over x (B, H, T, D) at the given positions.
func ropeFD(r RoPE[float64], pos []int, B, H, T int, seed uint64, backward ropeBackward) fdCase {
	rnd := newRand(seed)
	x, g := randn(rnd, B*H*T*r.D, 1), randn(rnd, B*H*T*r.D, 1)
	y := make([]float64, len(x))
	return fdCase{
		loss: func() float64 {
			r.Forward(y, x, pos, B, H, T)
			return dot(y, g)
		},
		inputs:   []input{{"x", x}},
		backward: func(grads [][]float64) { backward(grads[0], g, pos, B, H, T) },
	}
}

// naiveRotate rotates every pair of x (B, H, T, D) by sign·p·θ_k, with p the
// effective position (already divided by a linear-scaling factor) and
// θ_k = base^(−2k/D) written as a negative power, independently of Freqs.
func naiveRotate(x []float64, p []float64, B, H, T, D int, base float64, pairing Pairing, sign float64) []float64 {
	y := make([]float64, len(x))
	for b := range B {
		for h := range H {
			for t := range T {
				o := ((b*H+h)*T + t) * D
				for k := range D / 2 {
					i0, i1 := k, k+D/2
					if pairing == Interleaved {
						i0, i1 = 2*k, 2*k+1
					}
					ang := sign * p[b*T+t] * math.Pow(base, -2*float64(k)/float64(D))
					c, s := math.Cos(ang), math.Sin(ang)
					y[o+i0] = x[o+i0]*c - x[o+i1]*s
					y[o+i1] = x[o+i0]*s + x[o+i1]*c
				}
			}
		}
	}
	return y
}

func floats(pos []int) []float64 {
	p := make([]float64, len(pos))
	for i, v := range pos {
		p[i] = float64(v)
	}
	return p
}

// TestRoPEByHand takes D = 4, base = 100, so θ = (100^0, 100^(−1/2)) =
// (1, 0.1), and x = (1, 2, 3, 4) at position 1.
// Half pairs (x0, x2) at angle 1 and (x1, x3) at angle 0.1, as Hugging
// Face's x·cos + rotate_half(x)·sin with rotate_half(x) = (−3, −4, 1, 2):
// y = (cos 1 − 3 sin 1, 2 cos .1 − 4 sin .1, sin 1 + 3 cos 1, 2 sin .1 + 4 cos .1).
// Interleaved pairs (x0, x1) at angle 1 and (x2, x3) at angle 0.1:
// y = (cos 1 − 2 sin 1, sin 1 + 2 cos 1, 3 cos .1 − 4 sin .1, 3 sin .1 + 4 cos .1).
func TestRoPEByHand(t *testing.T) {
	c1, s1, c2, s2 := math.Cos(1), math.Sin(1), math.Cos(0.1), math.Sin(0.1)
	x := []float64{1, 2, 3, 4}
	for _, tc := range []struct {
		pairing Pairing
		want    []float64
	}{
		{Half, []float64{c1 - 3*s1, 2*c2 - 4*s2, s1 + 3*c1, 2*s2 + 4*c2}},
		{Interleaved, []float64{c1 - 2*s1, s1 + 2*c1, 3*c2 - 4*s2, 3*s2 + 4*c2}},
	} {
		y := make([]float64, 4)
		RoPE[float64]{D: 4, Base: 100, Pairing: tc.pairing}.Forward(y, x, []int{1}, 1, 1, 1)
		near(t, tc.pairing.String(), y, tc.want, 1e-15)
	}
}

func TestRoPEForward(t *testing.T) {
	rnd := newRand(1)
	for _, s := range []struct {
		B, H, T, D int
		pairing    Pairing
	}{{1, 1, 1, 2, Half}, {2, 3, 5, 6, Half}, {2, 3, 5, 6, Interleaved}, {1, 7, 3, 10, Interleaved}, {3, 1, 2, 4, Half}} {
		t.Run(fmt.Sprintf("B=%d/H=%d/T=%d/D=%d/%v", s.B, s.H, s.T, s.D, s.pairing), func(t *testing.T) {
			r := RoPE[float64]{D: s.D, Base: 10000, Pairing: s.pairing}
			x := randn(rnd, s.B*s.H*s.T*s.D, 1)
			pos := make([]int, s.B*s.T)
			for i := range pos {
				pos[i] = rnd.IntN(500)
			}
			y := make([]float64, len(x))
			r.Forward(y, x, pos, s.B, s.H, s.T)
			near(t, "y", y, naiveRotate(x, floats(pos), s.B, s.H, s.T, s.D, 10000, s.pairing, 1), 1e-12)
			// in place
			r.Forward(x, x, pos, s.B, s.H, s.T)
			near(t, "in place", x, y, 0)
		})
	}
}

// TestRoPEPositionZeroIsIdentity: cos 0 = 1 and sin 0 = 0 exactly, so
// position 0 returns x bit for bit, under every pairing and scaling.
func TestRoPEPositionZeroIsIdentity(t *testing.T) {
	x := randn(newRand(2), 2*3*4*8, 1)
	for _, r := range []RoPE[float64]{
		{D: 8, Base: 10000},
		{D: 8, Base: 500000, Pairing: Interleaved},
		{D: 8, Base: 10000, Scaling: Scaling{LinearScaling, 4}},
		{D: 8, Base: 10000, Scaling: Scaling{NTKScaling, 8}},
	} {
		y := make([]float64, len(x))
		r.Forward(y, x, make([]int, 2*4), 2, 3, 4)
		for i := range x {
			if y[i] != x[i] {
				t.Fatalf("%+v: y[%d] = %v, x[%d] = %v", r, i, y[i], i, x[i])
			}
		}
	}
}

// TestRoPEPreservesNorm: a rotation keeps the norm of every head vector.
func TestRoPEPreservesNorm(t *testing.T) {
	const B, H, T, D = 2, 3, 4, 16
	rnd := newRand(3)
	x := randn(rnd, B*H*T*D, 1)
	pos := []int{0, 1, 17, 4095, 3, 100, 2048, 100000}
	for _, pairing := range []Pairing{Half, Interleaved} {
		y := make([]float64, len(x))
		RoPE[float64]{D: D, Base: 10000, Pairing: pairing}.Forward(y, x, pos, B, H, T)
		for v := 0; v < len(x); v += D {
			nx, ny := math.Sqrt(dot(x[v:v+D], x[v:v+D])), math.Sqrt(dot(y[v:v+D], y[v:v+D]))
			if math.Abs(nx-ny) > 1e-12*nx {
				t.Errorf("%v: head vector at %d: |x| = %.17g, |y| = %.17g", pairing, v, nx, ny)
			}
		}
	}
}

// TestRoPERelativePosition checks the property RoPE exists for (004, Q010):
// (R(p)q)·(R(t)k) = qᵀ R(t−p) k depends on t − p only, so shifting both
// positions by the same amount leaves the score unchanged.
func TestRoPERelativePosition(t *testing.T) {
	const D = 8
	rnd := newRand(4)
	q, k := randn(rnd, D, 1), randn(rnd, D, 1)
	for _, pairing := range []Pairing{Half, Interleaved} {
		r := RoPE[float64]{D: D, Base: 10000, Pairing: pairing}
		score := func(p, t int) float64 {
			rq, rk := make([]float64, D), make([]float64, D)
			r.Forward(rq, q, []int{p}, 1, 1, 1)
			r.Forward(rk, k, []int{t}, 1, 1, 1)
			return dot(rq, rk)
		}
		scale := math.Sqrt(dot(q, q) * dot(k, k))
		for _, pt := range [][2]int{{0, 0}, {3, 7}, {7, 3}, {10, 50}, {99, 100}} {
			p, tt := pt[0], pt[1]
			base := score(p, tt)
			for _, s := range []int{1, 13, 250} {
				if got := score(p+s, tt+s); math.Abs(got-base) > 1e-12*scale {
					t.Errorf("%v: score(%d, %d) = %.17g, score(%d, %d) = %.17g", pairing, p, tt, base, p+s, tt+s, got)
				}
			}
			if p <= tt {
				if got := score(0, tt-p); math.Abs(got-base) > 1e-12*scale {
					t.Errorf("%v: score(%d, %d) = %.17g, qᵀR(t−p)k = %.17g", pairing, p, tt, base, got)
				}
			}
		}
	}
}

// TestRoPEBackwardIsInverseRotation checks that Backward adds the rotation
// by −angle, computed independently, and that Backward undoes Forward.
func TestRoPEBackwardIsInverseRotation(t *testing.T) {
	const B, H, T, D = 2, 2, 3, 6
	rnd := newRand(5)
	dy := randn(rnd, B*H*T*D, 1)
	pos := []int{0, 5, 9, 2, 3, 700}
	for _, r := range []RoPE[float64]{
		{D: D, Base: 10000},
		{D: D, Base: 10000, Pairing: Interleaved},
		{D: D, Base: 10000, Scaling: Scaling{LinearScaling, 3}},
	} {
		dx := make([]float64, len(dy))
		r.Backward(dx, dy, pos, B, H, T)
		p := floats(pos)
		if r.Scaling.Kind == LinearScaling {
			for i := range p {
				p[i] /= r.Scaling.Factor
			}
		}
		near(t, fmt.Sprintf("%v/%v", r.Pairing, r.Scaling.Kind), dx, naiveRotate(dy, p, B, H, T, D, r.Base, r.Pairing, -1), 1e-13)
		// Rᵀ R = I
		y, back := make([]float64, len(dy)), make([]float64, len(dy))
		r.Forward(y, dy, pos, B, H, T)
		r.Backward(back, y, pos, B, H, T)
		near(t, "Backward(Forward(x))", back, dy, 1e-14)
	}
}

// TestRoPEPairingsArePermutations checks interleaved(x) = P⁻¹ half(P x),
// where P takes the interleaved layout to the half layout: x[2k] → k,
// x[2k+1] → k + D/2. The same multiplications happen, so the match is exact.
func TestRoPEPairingsArePermutations(t *testing.T) {
	const B, H, T, D = 2, 3, 2, 10
	rnd := newRand(6)
	x := randn(rnd, B*H*T*D, 1)
	pos := []int{0, 7, 31, 1000}
	permute := func(x []float64, inverse bool) []float64 {
		y := make([]float64, len(x))
		for v := 0; v < len(x); v += D {
			for k := range D / 2 {
				if inverse {
					y[v+2*k], y[v+2*k+1] = x[v+k], x[v+k+D/2]
				} else {
					y[v+k], y[v+k+D/2] = x[v+2*k], x[v+2*k+1]
				}
			}
		}
		return y
	}
	inter, half := make([]float64, len(x)), make([]float64, len(x))
	RoPE[float64]{D: D, Base: 10000, Pairing: Interleaved}.Forward(inter, x, pos, B, H, T)
	RoPE[float64]{D: D, Base: 10000, Pairing: Half}.Forward(half, permute(x, false), pos, B, H, T)
	near(t, "interleaved vs P⁻¹ half P", permute(half, true), inter, 0)
}

// TestRoPELinearScaling checks position interpolation: factor f at position
// p is the unscaled rotation at p/f, including fractional p/f.
func TestRoPELinearScaling(t *testing.T) {
	const D = 8
	plain := RoPE[float64]{D: D, Base: 10000}
	scaled := RoPE[float64]{D: D, Base: 10000, Scaling: Scaling{LinearScaling, 4}}
	theta := plain.Freqs()
	// Scaling leaves the frequencies alone.
	near(t, "freqs", scaled.Freqs(), theta, 0)
	// 6/4 = 1.5: the angles are 1.5·θ_k.
	cos, sin := make([]float64, D/2), make([]float64, D/2)
	scaled.Angles(cos, sin, []int{6})
	for k, th := range theta {
		if c, s := math.Cos(1.5*th), math.Sin(1.5*th); math.Abs(cos[k]-c) > 1e-16 || math.Abs(sin[k]-s) > 1e-16 {
			t.Errorf("k=%d: (cos, sin) = (%.17g, %.17g), want (%.17g, %.17g)", k, cos[k], sin[k], c, s)
		}
	}
	// 20/4 = 5 exactly: the whole rotation equals the unscaled one at 5.
	x := randn(newRand(7), 2*D, 1)
	y1, y2 := make([]float64, 2*D), make([]float64, 2*D)
	scaled.Forward(y1, x, []int{20, 8}, 1, 1, 2)
	plain.Forward(y2, x, []int{5, 2}, 1, 1, 2)
	near(t, "f=4 at (20, 8) vs none at (5, 2)", y1, y2, 0)
}

// TestRoPENTKBase checks NTK-aware scaling by hand: D = 4, base 10000,
// factor 4 gives base' = 10000·4^(4/2) = 160000, so θ = (1, 160000^(−1/2))
// = (1, 1/400), where the unscaled θ is (1, 1/100). In general the highest
// frequency θ_0 = 1 is kept and the lowest is divided by exactly the factor.
func TestRoPENTKBase(t *testing.T) {
	got := RoPE[float64]{D: 4, Base: 10000, Scaling: Scaling{NTKScaling, 4}}.Freqs()
	near(t, "θ", got, []float64{1, 0.0025}, 1e-15)
	const D, f = 16, 8
	plain := RoPE[float64]{D: D, Base: 500000}.Freqs()
	ntk := RoPE[float64]{D: D, Base: 500000, Scaling: Scaling{NTKScaling, f}}.Freqs()
	if ntk[0] != 1 {
		t.Errorf("θ_0 = %v, want 1", ntk[0])
	}
	if last := D/2 - 1; math.Abs(ntk[last]-plain[last]/f) > 1e-14*plain[last] {
		t.Errorf("lowest frequency %.17g, want %.17g / %d", ntk[last], plain[last], f)
	}
}

func TestRoPEGrad(t *testing.T) {
	const B, H, T = 2, 3, 3
	pos := []int{0, 1, 2, 5, 6, 7} // item 1 after a cache of 5 tokens
	for _, r := range []RoPE[float64]{
		{D: 2, Base: 10000},
		{D: 6, Base: 10000},
		{D: 6, Base: 10000, Pairing: Interleaved},
		{D: 8, Base: 500000, Scaling: Scaling{LinearScaling, 2.5}},
		{D: 8, Base: 10000, Pairing: Interleaved, Scaling: Scaling{NTKScaling, 4}},
	} {
		t.Run(fmt.Sprintf("D=%d/%v/%v", r.D, r.Pairing, r.Scaling.Kind), func(t *testing.T) {
			rep := ropeFD(r, pos, B, H, T, 8, r.Backward).check()
			if err := rep.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d elements, max rel %.2e, max abs %.2e (eps %g)", rep.Checked, rep.MaxRel, rep.MaxAbs, rep.Eps)
		})
	}
	t.Run("directional/B=2/H=8/T=33/D=64", func(t *testing.T) {
		r := RoPE[float64]{D: 64, Base: 10000}
		pos := make([]int, 2*33)
		for i := range pos {
			pos[i] = 3*i + 1
		}
		rep := ropeFD(r, pos, 2, 8, 33, 9, r.Backward).directional(16)
		if err := rep.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d directions, max rel %.2e", rep.Checked, rep.MaxRel)
	})
}

func TestRoPEAccumulates(t *testing.T) {
	r := RoPE[float64]{D: 6, Base: 10000, Pairing: Interleaved}
	if err := ropeFD(r, []int{0, 3, 1, 2}, 2, 2, 2, 10, r.Backward).accumulates(); err != nil {
		t.Error(err)
	}
}

// TestRoPEGradRejectsMutants uses the interleaved pairing, so that the
// mutant that pairs halves is a mistake of convention, and positions that
// differ between batch items.
func TestRoPEGradRejectsMutants(t *testing.T) {
	r := RoPE[float64]{D: 6, Base: 10000, Pairing: Interleaved}
	const B, H, T = 2, 2, 3
	pos := []int{0, 1, 2, 4, 5, 6}
	rejectMutants(t, r.Backward, []mutant[ropeBackward]{
		{name: "rotation by +θ instead of −θ", backward: func(dx, dy []float64, pos []int, B, H, T int) {
			tmp := make([]float64, len(dy))
			r.Forward(tmp, dy, pos, B, H, T)
			for i, v := range tmp {
				dx[i] += v
			}
		}},
		{name: "half pairing where the convention is interleaved", backward: func(dx, dy []float64, pos []int, B, H, T int) {
			wrong := r
			wrong.Pairing = Half
			wrong.Backward(dx, dy, pos, B, H, T)
		}},
		{name: "positions of batch item 0 used for every item", backward: func(dx, dy []float64, pos []int, B, H, T int) {
			p0 := make([]int, len(pos))
			for b := range B {
				copy(p0[b*T:(b+1)*T], pos[:T])
			}
			r.Backward(dx, dy, p0, B, H, T)
		}},
		{name: "= instead of +=", byAccumulate: true, backward: func(dx, dy []float64, pos []int, B, H, T int) {
			clear(dx)
			r.Backward(dx, dy, pos, B, H, T)
		}},
	}, func(b ropeBackward) fdCase { return ropeFD(r, pos, B, H, T, 11, b) })
}

// TestRoPEFloat32 compares the precisions at positions up to 4095: the
// angles are computed in float64 in both, so float32 loses only the
// rounding of the rotation itself.
func TestRoPEFloat32(t *testing.T) {
	const B, H, T, D = 2, 4, 5, 32
	rnd := newRand(12)
	x, dy := randn(rnd, B*H*T*D, 1), randn(rnd, B*H*T*D, 1)
	pos := []int{0, 1, 2, 3, 4, 4091, 4092, 4093, 4094, 4095}
	for _, pairing := range []Pairing{Half, Interleaved} {
		r64 := RoPE[float64]{D: D, Base: 10000, Pairing: pairing}
		r32 := RoPE[float32]{D: D, Base: 10000, Pairing: pairing}
		y, dx := make([]float64, len(x)), make([]float64, len(x))
		r64.Forward(y, x, pos, B, H, T)
		r64.Backward(dx, dy, pos, B, H, T)
		y32, dx32 := make([]float32, len(x)), make([]float32, len(x))
		r32.Forward(y32, to32(x), pos, B, H, T)
		r32.Backward(dx32, to32(dy), pos, B, H, T)
		agree(t, "y", y, y32, 1e-6)
		agree(t, "dx", dx, dx32, 1e-6)
	}
}

func TestRoPEValidate(t *testing.T) {
	ok := RoPE[float64]{D: 8, Base: 10000}
	for _, tc := range []struct {
		edit func(*RoPE[float64])
		want string
	}{
		{func(r *RoPE[float64]) { r.D = 7 }, "D = 7 is odd"},
		{func(r *RoPE[float64]) { r.D = 0 }, "D = 0, want an even D >= 2"},
		{func(r *RoPE[float64]) { r.Base = 0 }, "Base = 0"},
		{func(r *RoPE[float64]) { r.Base = math.Inf(1) }, "Base = +Inf"},
		{func(r *RoPE[float64]) { r.Pairing = 2 }, "unknown Pairing(2)"},
		{func(r *RoPE[float64]) { r.Scaling = Scaling{LinearScaling, 0.5} }, "linear scaling Factor = 0.5"},
		{func(r *RoPE[float64]) { r.Scaling = Scaling{LinearScaling, 0} }, "linear scaling Factor = 0"},
		{func(r *RoPE[float64]) { r.Scaling = Scaling{NTKScaling, math.NaN()} }, "ntk scaling Factor = NaN"},
		{func(r *RoPE[float64]) { r.D, r.Scaling = 2, Scaling{NTKScaling, 2} }, "ntk scaling needs D > 2"},
		{func(r *RoPE[float64]) { r.Scaling.Kind = 3 }, "unknown ScalingKind(3)"},
	} {
		r := ok
		tc.edit(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "nn: RoPE: ") {
			t.Errorf("%+v: got %v, want an error containing %q", r, err, tc.want)
		}
	}
	for _, r := range []RoPE[float64]{ok, {D: 2, Base: 1}, {D: 4, Base: 10000, Scaling: Scaling{NTKScaling, 1}}, {D: 8, Base: 10000, Scaling: Scaling{Factor: 0.5}}} {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v rejected: %v", r, err)
		}
	}
}

func TestCheckPositions(t *testing.T) {
	for _, tc := range []struct {
		pos   []int
		limit int
		want  string
	}{
		{[]int{0, 1, 2}, 3, ""},
		{[]int{0, 1, 2}, 0, ""},
		{[]int{0, 5, -1, -2}, 0, "nn: pos[2] = -1 is negative"},
		{[]int{0, 4, 3, 9}, 4, "nn: pos[1] = 4 is not below the limit 4"},
	} {
		err := CheckPositions(tc.pos, tc.limit)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("CheckPositions(%v, %d) = %v, want %q", tc.pos, tc.limit, err, tc.want)
		}
	}
}

func TestRoPEPanics(t *testing.T) {
	r := RoPE[float64]{D: 4, Base: 10000}
	panics(t, "nn: RoPE.Forward: D = 5 is odd", func() {
		RoPE[float64]{D: 5, Base: 10000}.Forward(make([]float64, 5), make([]float64, 5), []int{0}, 1, 1, 1)
	})
	panics(t, "nn: RoPE.Forward: pos[1] = -3 is negative", func() {
		r.Forward(make([]float64, 8), make([]float64, 8), []int{0, -3}, 1, 1, 2)
	})
	panics(t, "nn: RoPE.Backward: len(pos) = 3, want B*T = 2", func() {
		r.Backward(make([]float64, 8), make([]float64, 8), []int{0, 1, 2}, 1, 1, 2)
	})
	panics(t, "nn: RoPE.Forward: len(x) = 7, want B*H*T*D = 8", func() {
		r.Forward(make([]float64, 8), make([]float64, 7), []int{0, 1}, 1, 1, 2)
	})
	panics(t, "nn: RoPE.Angles: len(sin) = 3, want len(pos)*D/2 = 2", func() {
		r.Angles(make([]float64, 2), make([]float64, 3), []int{4})
	})
}
