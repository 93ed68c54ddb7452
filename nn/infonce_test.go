package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attnlab/attnlab/gradcheck"
)

func randSlice(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	return x
}

// TestInfoNCETable checks the loss on a case worked by hand: orthonormal
// queries equal to their documents at τ = 1 give S = I, so each row's loss
// is log(e + 1) − 1 = log(1 + e⁻¹).
func TestInfoNCETable(t *testing.T) {
	q := []float64{1, 0, 0, 1}
	want := math.Log1p(math.Exp(-1)) // 0.31326…
	for _, sym := range []bool{false, true} {
		c := InfoNCE[float64]{B: 2, N: 2, D: 2, Symmetric: sym}
		a := c.NewActs()
		got := c.Forward(a, q, q, 1, nil)
		if math.Abs(got-want) > 1e-15 {
			t.Errorf("symmetric %v: loss %.17g, want %.17g", sym, got, want)
		}
		// a hard negative equal to query 0 ties with its positive: row 0
		// becomes log(2e + 1) − 1
		c3 := InfoNCE[float64]{B: 2, N: 3, D: 2}
		a3 := c3.NewActs()
		got = c3.Forward(a3, q, []float64{1, 0, 0, 1, 1, 0}, 1, nil)
		want3 := (math.Log(2*math.E+1) - 1 + math.Log(math.E+2) - 1) / 2
		if math.Abs(got-want3) > 1e-15 {
			t.Errorf("hard negative: loss %.17g, want %.17g", got, want3)
		}
	}
}

// TestHeadGrad differentiates Head (pooling, normalisation, InfoNCE) with
// finite differences in float64, and checks float32 against float64.
func TestHeadGrad(t *testing.T) {
	for _, tc := range []struct {
		B, N, Tq, Td, D int
		sym, learned    bool
	}{
		{1, 1, 1, 1, 3, false, false},
		{3, 3, 2, 4, 5, false, true},
		{4, 7, 3, 2, 6, true, true},
		{5, 5, 4, 3, 7, true, false},
	} {
		t.Run(fmt.Sprintf("B=%d/N=%d/Tq=%d/Td=%d/D=%d/sym=%v", tc.B, tc.N, tc.Tq, tc.Td, tc.D, tc.sym), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.B*100+tc.N), 1))
			h := Head[float64]{Loss: InfoNCE[float64]{B: tc.B, N: tc.N, D: tc.D, Symmetric: tc.sym}, Tq: tc.Tq, Td: tc.Td, Eps: 1e-12}
			xq, xd := randSlice(r, tc.B*tc.Tq*tc.D), randSlice(r, tc.N*tc.Td*tc.D)
			validQ, validD := make([]bool, tc.B*tc.Tq), make([]bool, tc.N*tc.Td)
			for i := range validQ {
				validQ[i] = i%tc.Tq == 0 || r.IntN(3) > 0
			}
			for i := range validD {
				validD[i] = i%tc.Td == 0 || r.IntN(3) > 0
			}
			mask := make([]bool, tc.B*tc.N)
			if tc.N > 2 {
				mask[0*tc.N+tc.N-1] = true
			}
			logTau := []float64{math.Log(0.6)}
			a := h.NewActs()
			loss := func() float64 { return h.Forward(a, xq, validQ, xd, validD, math.Exp(logTau[0]), mask) }
			loss()
			dxq, dxd := make([]float64, len(xq)), make([]float64, len(xd))
			var dtau float64
			tau := math.Exp(logTau[0])
			h.Backward(dxq, dxd, &dtau, 1, a, validQ, validD, tau, mask)
			params := []gradcheck.Param{{Name: "xq", X: xq, Grad: dxq}, {Name: "xd", X: xd, Grad: dxd}}
			if tc.learned { // τ learned as log τ: ∂L/∂log τ = τ·∂L/∂τ
				params = append(params, gradcheck.Param{Name: "logτ", X: logTau, Grad: []float64{tau * dtau}})
			}
			rep := gradcheck.Check(loss, params, gradcheck.Options{Precise: true, Abs: 1e-11, Rel: 1e-8})
			if err := rep.Err(); err != nil {
				t.Fatal(err)
			}
			for i, ok := range validQ {
				for j := range tc.D {
					if !ok && dxq[i*tc.D+j] != 0 {
						t.Fatalf("padding query token %d got gradient %g", i, dxq[i*tc.D+j])
					}
				}
			}

			// float32 agrees with float64
			h32 := Head[float32]{Loss: InfoNCE[float32]{B: tc.B, N: tc.N, D: tc.D, Symmetric: tc.sym}, Tq: tc.Tq, Td: tc.Td, Eps: 1e-12}
			a32 := h32.NewActs()
			l32 := h32.Forward(a32, to32(xq), validQ, to32(xd), validD, float32(tau), mask)
			dxq32, dxd32 := make([]float32, len(xq)), make([]float32, len(xd))
			var dtau32 float32
			h32.Backward(dxq32, dxd32, &dtau32, 1, a32, validQ, validD, float32(tau), mask)
			if math.Abs(float64(l32)-loss()) > 1e-5 || math.Abs(float64(dtau32)-dtau) > 1e-4 {
				t.Errorf("float32 loss %g, dτ %g; float64 %g, %g", l32, dtau32, loss(), dtau)
			}
			for i := range dxq {
				if math.Abs(float64(dxq32[i])-dxq[i]) > 1e-4 {
					t.Fatalf("float32 dxq[%d] = %g, float64 %g", i, dxq32[i], dxq[i])
				}
			}
		})
	}
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func TestInfoNCEPanics(t *testing.T) {
	c := InfoNCE[float64]{B: 2, N: 3, D: 2}
	a := c.NewActs()
	q, d := make([]float64, 4), make([]float64, 6)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"masked positive", func() { c.Forward(a, q, d, 1, []bool{false, false, false, false, true, false}) }},
		{"τ = 0", func() { c.Forward(a, q, d, 0, nil) }},
		{"N < B", func() {
			InfoNCE[float64]{B: 3, N: 2, D: 2}.NewActs()
			InfoNCE[float64]{B: 3, N: 2, D: 2}.Forward(a, q, d, 1, nil)
		}},
		{"short d", func() { c.Forward(a, q, d[:4], 1, nil) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
}

func TestL2NormZeroRow(t *testing.T) {
	n := L2Norm[float64]{D: 3, Eps: 1e-12}
	x := []float64{0, 0, 0, 3, 0, 4}
	y, norm := make([]float64, 6), make([]float64, 2)
	n.Forward(y, norm, x, 2)
	if y[0] != 0 || y[3] != 0.6 || y[5] != 0.8 || norm[1] != 5 {
		t.Errorf("y = %v, norm = %v", y, norm)
	}
}

func TestMeanPoolEmptySequence(t *testing.T) {
	p := MeanPool[float64]{D: 2}
	out := []float64{9, 9, 9, 9}
	p.Forward(out, []float64{1, 2, 3, 4, 5, 6, 7, 8}, []bool{true, true, false, false}, 2, 2)
	if out[0] != 2 || out[1] != 3 || out[2] != 0 || out[3] != 0 {
		t.Errorf("out = %v, want [2 3 0 0]", out)
	}
}

func TestDuplicateMask(t *testing.T) {
	keys := []string{"x", "y", "x", "x"}
	m := make([]bool, 2*4)
	DuplicateMask(m, keys, 2)
	want := []bool{false, false, true, true, false, false, false, false}
	for i := range m {
		if m[i] != want[i] {
			t.Fatalf("mask %v, want %v", m, want)
		}
	}
}
