package attention

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func draw(m [][]bool) string {
	var b strings.Builder
	for _, row := range m {
		for _, v := range row {
			if v {
				b.WriteByte('1')
			} else {
				b.WriteByte('0')
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestSeedVisibilityTables checks the mask rule against the tables of the
// design notes (004, Q009): a 4-token causal sequence; a 2-token chunk after
// 3 cached tokens (keys 0..3 and 0..4); and the tril(ones(2, 5)) trap.
func TestSeedVisibilityTables(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"full 4x4", Config{B: 1, Hq: 1, Hkv: 1, M: 4, N: 4, D: 1, Dv: 1, Causal: true},
			"1000\n1100\n1110\n1111\n"},
		{"chunk after cache", Config{B: 1, Hq: 1, Hkv: 1, M: 2, N: 5, D: 1, Dv: 1, Causal: true},
			"11110\n11111\n"},
		{"bottom-right", Config{B: 1, Hq: 1, Hkv: 1, M: 2, N: 5, D: 1, Dv: 1, Causal: true, Convention: BottomRight},
			"11110\n11111\n"},
		{"tril trap", Config{B: 1, Hq: 1, Hkv: 1, M: 2, N: 5, D: 1, Dv: 1, Causal: true, Convention: TopLeft},
			"10000\n11000\n"},
	} {
		if got := draw(tc.c.Visibility(0)); got != tc.want {
			t.Errorf("%s:\n%swant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestForwardBackwardByHand checks one case computed by hand. With scale 1,
// q = 1, k = (0, ln 3), v = (4, 8): S = (0, ln 3), P = (1/4, 3/4), O = 7,
// lse = ln 4. With dO = 1: dV = Pᵀ = (1/4, 3/4); dP = (4, 8);
// rowsum(P ⊙ dP) = 7; dS = (1/4·(4−7), 3/4·(8−7)) = (−3/4, 3/4);
// dQ = dS K = 3/4 · ln 3; dK = dSᵀ q = (−3/4, 3/4).
func TestForwardBackwardByHand(t *testing.T) {
	c := &Config{B: 1, Hq: 1, Hkv: 1, M: 1, N: 2, D: 1, Dv: 1, Scale: 1}
	q, k, v := []float64{1}, []float64{0, math.Log(3)}, []float64{4, 8}
	o, lse, p := make([]float64, 1), make([]float64, 1), make([]float64, 2)
	if err := Forward(o, lse, p, q, k, v, c); err != nil {
		t.Fatal(err)
	}
	dq, dk, dv := make([]float64, 1), make([]float64, 2), make([]float64, 2)
	Backward(dq, dk, dv, []float64{1}, q, k, v, p, c)
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"p0", p[0], 0.25}, {"p1", p[1], 0.75}, {"o", o[0], 7}, {"lse", lse[0], math.Log(4)},
		{"dv0", dv[0], 0.25}, {"dv1", dv[1], 0.75}, {"dq", dq[0], 0.75 * math.Log(3)},
		{"dk0", dk[0], -0.75}, {"dk1", dk[1], 0.75},
	} {
		if math.Abs(x.got-x.want) > 1e-15 {
			t.Errorf("%s = %.17g, want %.17g", x.name, x.got, x.want)
		}
	}
}

func randomSlices(r *rand.Rand, sizes ...int) [][]float64 {
	out := make([][]float64, len(sizes))
	for i, n := range sizes {
		out[i] = make([]float64, n)
		for j := range out[i] {
			out[i][j] = r.NormFloat64()
		}
	}
	return out
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, e := range x {
		y[i] = float32(e)
	}
	return y
}

// TestFloat32AgreesWithFloat64 runs the same case in both precisions at odd
// and prime sizes, M = 1 included.
func TestFloat32AgreesWithFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []*Config{
		{B: 2, Hq: 6, Hkv: 3, M: 7, N: 13, D: 5, Dv: 3, Causal: true},
		{B: 1, Hq: 4, Hkv: 1, M: 1, N: 11, D: 8, Dv: 8, Causal: true, Window: 5},
		{B: 1, Hq: 2, Hkv: 2, M: 5, N: 5, D: 3, Dv: 7},
	} {
		t.Run(fmt.Sprintf("B=%d/Hq=%d/Hkv=%d/M=%d/N=%d", c.B, c.Hq, c.Hkv, c.M, c.N), func(t *testing.T) {
			in := randomSlices(r, c.B*c.Hq*c.M*c.D, c.B*c.Hkv*c.N*c.D, c.B*c.Hkv*c.N*c.Dv, c.B*c.Hq*c.M*c.Dv)
			q, k, v, do := in[0], in[1], in[2], in[3]
			o, lse := make([]float64, len(do)), make([]float64, c.B*c.Hq*c.M)
			dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
			if err := Reference[float64]().Run(o, lse, dq, dk, dv, q, k, v, do, c); err != nil {
				t.Fatal(err)
			}
			o32, lse32 := make([]float32, len(do)), make([]float32, len(lse))
			dq32, dk32, dv32 := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			if err := Reference[float32]().Run(o32, lse32, dq32, dk32, dv32, to32(q), to32(k), to32(v), to32(do), c); err != nil {
				t.Fatal(err)
			}
			for _, x := range []struct {
				name string
				a    []float64
				b    []float32
			}{{"o", o, o32}, {"lse", lse, lse32}, {"dq", dq, dq32}, {"dk", dk, dk32}, {"dv", dv, dv32}} {
				for i := range x.a {
					if d := math.Abs(x.a[i] - float64(x.b[i])); d > 1e-5*(1+math.Abs(x.a[i])) {
						t.Fatalf("%s[%d]: float64 %.9g, float32 %.9g", x.name, i, x.a[i], x.b[i])
					}
				}
			}
		})
	}
}

func TestEmptyRowIsAnError(t *testing.T) {
	// Row 0 of batch 1 sits at position 0, but that item's key 0 is padding.
	c := &Config{B: 2, Hq: 1, Hkv: 1, M: 2, N: 2, D: 1, Dv: 1, Causal: true,
		KValid: []bool{true, true, false, true}}
	o := []float64{-1, -1, -1, -1}
	err := Forward(o, make([]float64, 4), make([]float64, 8), make([]float64, 4), make([]float64, 4), make([]float64, 4), c)
	var e *EmptyRowError
	if !errors.As(err, &e) || e.Batch != 1 || e.Row != 0 {
		t.Fatalf("got %v, want an EmptyRowError for batch 1, row 0", err)
	}
	if o[0] != -1 {
		t.Errorf("Forward wrote output before rejecting the input")
	}
	if want := "attention: batch 1, query row 0 (position 0) sees no key: every key is masked"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := Config{B: 2, Hq: 4, Hkv: 2, M: 3, N: 5, D: 4, Dv: 4}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Hkv = 3 }, "Hq = 4 is not a multiple of Hkv = 3"},
		{func(c *Config) { c.M = 0 }, "M = 0"},
		{func(c *Config) { c.QPos = make([]int, 5) }, "q_pos has 5 entries, want B*M = 6"},
		{func(c *Config) { c.KValid = make([]bool, 5) }, "k_valid has 5 entries, want B*N = 10"},
		{func(c *Config) { c.QSeg = make([]int, 6) }, "q_seg and k_seg must be given together"},
		{func(c *Config) { c.KPos = []int{0, 1, 2, -1, 4, 0, 1, 2, 3, 4} }, "k_pos[3] = -1 is negative"},
		{func(c *Config) { c.Window = -1 }, "window = -1"},
		{func(c *Config) { c.Scale = math.NaN() }, "scale = NaN"},
	} {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

func TestForwardPanicsOnLength(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "attention: len(q) = 3, want 4") {
			t.Errorf("panic %v, want one naming len(q)", r)
		}
	}()
	c := &Config{B: 1, Hq: 1, Hkv: 1, M: 1, N: 1, D: 4, Dv: 1}
	Forward(make([]float64, 1), make([]float64, 1), make([]float64, 1), make([]float64, 3), make([]float64, 4), make([]float64, 1), c)
}

func TestPositionsFromValidity(t *testing.T) {
	got := PositionsFromValidity([]bool{false, false, true, true, true, true, false, true}, 2, 4)
	want := []int{0, 0, 0, 1, 0, 1, 2, 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func ExampleForward() {
	// A 2-token chunk after a cache of 3 tokens: query positions 3 and 4.
	c := &Config{B: 1, Hq: 1, Hkv: 1, M: 2, N: 5, D: 1, Dv: 1, Causal: true, Scale: 1}
	q := []float64{0, 0} // equal scores: each query averages what it sees
	k := []float64{0, 0, 0, 0, 0}
	v := []float64{1, 2, 3, 4, 5}
	o, lse, p := make([]float64, 2), make([]float64, 2), make([]float64, 10)
	if err := Forward(o, lse, p, q, k, v, c); err != nil {
		panic(err)
	}
	fmt.Printf("o = %.4f %.4f\n", o[0], o[1])
	// Output: o = 2.5000 3.0000
}
