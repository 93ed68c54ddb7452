package nn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/nn"
)

// TestRoPEChecks runs the lab's checks on nn.RoPE: finite differences, the
// accumulation contract, float32 agreement and the semantic checks (package
// lab proves each of them can fail, on the faults).
func TestRoPEChecks(t *testing.T) { runChecks(t, checks.RoPE(), checks.RoPEReference) }

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
		pairing nn.Pairing
		want    []float64
	}{
		{nn.Half, []float64{c1 - 3*s1, 2*c2 - 4*s2, s1 + 3*c1, 2*s2 + 4*c2}},
		{nn.Interleaved, []float64{c1 - 2*s1, s1 + 2*c1, 3*c2 - 4*s2, 3*s2 + 4*c2}},
	} {
		y := make([]float64, 4)
		nn.RoPE[float64]{D: 4, Base: 100, Pairing: tc.pairing}.Forward(y, x, []int{1}, 1, 1, 1)
		near(t, tc.pairing.String(), y, tc.want, 1e-15)
	}
}

// TestParsePairing: ParsePairing inverts String, and refuses other names.
func TestParsePairing(t *testing.T) {
	for _, p := range []nn.Pairing{nn.Half, nn.Interleaved} {
		if got, err := nn.ParsePairing(p.String()); got != p || err != nil {
			t.Errorf("ParsePairing(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, name := range []string{"", "Half", "split", "Pairing(2)"} {
		if _, err := nn.ParsePairing(name); err == nil {
			t.Errorf("ParsePairing(%q): no error", name)
		}
	}
}

// TestRoPELinearScaling checks position interpolation: factor f at position
// p is the unscaled rotation at p/f, including fractional p/f.
func TestRoPELinearScaling(t *testing.T) {
	const D = 8
	plain := nn.RoPE[float64]{D: D, Base: 10000}
	scaled := nn.RoPE[float64]{D: D, Base: 10000, Scaling: nn.Scaling{nn.LinearScaling, 4}}
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
	got := nn.RoPE[float64]{D: 4, Base: 10000, Scaling: nn.Scaling{nn.NTKScaling, 4}}.Freqs()
	near(t, "θ", got, []float64{1, 0.0025}, 1e-15)
	const D, f = 16, 8
	plain := nn.RoPE[float64]{D: D, Base: 500000}.Freqs()
	ntk := nn.RoPE[float64]{D: D, Base: 500000, Scaling: nn.Scaling{nn.NTKScaling, f}}.Freqs()
	if ntk[0] != 1 {
		t.Errorf("θ_0 = %v, want 1", ntk[0])
	}
	if last := D/2 - 1; math.Abs(ntk[last]-plain[last]/f) > 1e-14*plain[last] {
		t.Errorf("lowest frequency %.17g, want %.17g / %d", ntk[last], plain[last], f)
	}
}

// TestRoPEFloat32 compares the precisions at positions up to 4095: the
// angles are computed in float64 in both, so float32 loses only the
// rounding of the rotation itself.
func TestRoPEFloat32(t *testing.T) {
	const B, H, T, D = 2, 4, 5, 32
	rnd := newRand(12)
	x, dy := randn(rnd, B*H*T*D, 1), randn(rnd, B*H*T*D, 1)
	pos := []int{0, 1, 2, 3, 4, 4091, 4092, 4093, 4094, 4095}
	for _, pairing := range []nn.Pairing{nn.Half, nn.Interleaved} {
		r64 := nn.RoPE[float64]{D: D, Base: 10000, Pairing: pairing}
		r32 := nn.RoPE[float32]{D: D, Base: 10000, Pairing: pairing}
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
	ok := nn.RoPE[float64]{D: 8, Base: 10000}
	for _, tc := range []struct {
		edit func(*nn.RoPE[float64])
		want string
	}{
		{func(r *nn.RoPE[float64]) { r.D = 7 }, "D = 7 is odd"},
		{func(r *nn.RoPE[float64]) { r.D = 0 }, "D = 0, want an even D >= 2"},
		{func(r *nn.RoPE[float64]) { r.Base = 0 }, "Base = 0"},
		{func(r *nn.RoPE[float64]) { r.Base = math.Inf(1) }, "Base = +Inf"},
		{func(r *nn.RoPE[float64]) { r.Pairing = 2 }, "unknown Pairing(2)"},
		{func(r *nn.RoPE[float64]) { r.Scaling = nn.Scaling{nn.LinearScaling, 0.5} }, "linear scaling Factor = 0.5"},
		{func(r *nn.RoPE[float64]) { r.Scaling = nn.Scaling{nn.LinearScaling, 0} }, "linear scaling Factor = 0"},
		{func(r *nn.RoPE[float64]) { r.Scaling = nn.Scaling{nn.NTKScaling, math.NaN()} }, "ntk scaling Factor = NaN"},
		{func(r *nn.RoPE[float64]) { r.D, r.Scaling = 2, nn.Scaling{nn.NTKScaling, 2} }, "ntk scaling needs D > 2"},
		{func(r *nn.RoPE[float64]) { r.Scaling.Kind = 3 }, "unknown ScalingKind(3)"},
	} {
		r := ok
		tc.edit(&r)
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "nn: RoPE: ") {
			t.Errorf("%+v: got %v, want an error containing %q", r, err, tc.want)
		}
	}
	for _, r := range []nn.RoPE[float64]{ok, {D: 2, Base: 1}, {D: 4, Base: 10000, Scaling: nn.Scaling{nn.NTKScaling, 1}}, {D: 8, Base: 10000, Scaling: nn.Scaling{Factor: 0.5}}} {
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
		err := nn.CheckPositions(tc.pos, tc.limit)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("CheckPositions(%v, %d) = %v, want %q", tc.pos, tc.limit, err, tc.want)
		}
	}
}

func TestRoPEPanics(t *testing.T) {
	r := nn.RoPE[float64]{D: 4, Base: 10000}
	panics(t, "nn: RoPE.Forward: D = 5 is odd", func() {
		nn.RoPE[float64]{D: 5, Base: 10000}.Forward(make([]float64, 5), make([]float64, 5), []int{0}, 1, 1, 1)
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

// TestRoPERotateIsForward: rotating with precomputed tables gives Forward's
// bits, for both pairings and every scaling, and a position beyond the
// tables panics.
func TestRoPERotateIsForward(t *testing.T) {
	const B, H, T, D, maxPos = 2, 3, 5, 8, 40
	r := rand.New(rand.NewPCG(4, 4))
	x := make([]float32, B*H*T*D)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	pos := make([]int, B*T)
	for i := range pos {
		pos[i] = r.IntN(maxPos)
	}
	for _, rope := range []nn.RoPE[float32]{
		{D: D, Base: 10000},
		{D: D, Base: 500, Pairing: nn.Interleaved},
		{D: D, Base: 10000, Scaling: nn.Scaling{Kind: nn.LinearScaling, Factor: 4}},
		{D: D, Base: 10000, Scaling: nn.Scaling{Kind: nn.NTKScaling, Factor: 2}},
	} {
		all := make([]int, maxPos)
		for p := range all {
			all[p] = p
		}
		cos, sin := make([]float32, maxPos*D/2), make([]float32, maxPos*D/2)
		rope.Angles(cos, sin, all)
		want, got := make([]float32, len(x)), make([]float32, len(x))
		rope.Forward(want, x, pos, B, H, T)
		rope.Rotate(got, x, pos, B, H, T, cos, sin)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%+v: element %d: Rotate %v, Forward %v", rope, i, got[i], want[i])
			}
		}
	}
	defer func() {
		if msg := fmt.Sprint(recover()); !strings.Contains(msg, "beyond the tables") {
			t.Errorf("panic %q, want one about a position beyond the tables", msg)
		}
	}()
	rope := nn.RoPE[float32]{D: D, Base: 10000}
	cos, sin := make([]float32, 3*D/2), make([]float32, 3*D/2)
	rope.Rotate(make([]float32, D), make([]float32, D), []int{3}, 1, 1, 1, cos, sin)
}
