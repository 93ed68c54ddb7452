package vec

import "math"

// exp32Generic is the portable Exp32.
func exp32Generic(dst, x []float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		// float64 has the range and precision to round exp(v) correctly
		// to float32 in nearly all cases.
		dst[i] = float32(math.Exp(float64(v)))
	}
}

// exp64Generic is the portable Exp64. It does not call math.Exp, whose
// amd64 assembly overflows to +Inf from about x = 709.43 on, short of
// log(MaxFloat64) = 709.78; it is the algorithm of the assembly in scalar
// form.
func exp64Generic(dst, x []float64) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = exp64Scalar(v)
	}
}

// Constants of exp64Scalar, the same as those of mkasm.go.
const (
	exp64Lo = -746 // exp(−746) < 2⁻¹⁰⁷⁴/2: rounds to 0
	exp64Hi = 710  // exp(710) > MaxFloat64: overflows to +Inf
	// ln2 = exp64C1 + exp64C2, with exp64C1 short enough that n·exp64C1
	// is exact for the n that occur (Cody and Waite).
	exp64C1 = 6.93145751953125e-1
	exp64C2 = 1.42860682030941723212e-6
)

// exp64Q holds the coefficients of Q(r) = Σ_{k=0}^{12} r^k/(k+1)!, highest
// degree first, so that exp(r) = 1 + r·Q(r) to within 5e-18 on |r| ≤ ln2/2.
var exp64Q = func() (q [13]float64) {
	for k := 12; k >= 0; k-- {
		f := 1.0
		for i := 2; i <= k+1; i++ {
			f *= float64(i)
		}
		q[12-k] = 1 / f
	}
	return q
}()

// exp64Scalar returns exp(x) as 2ⁿ·exp(r) with n = round(x·log2(e)) and
// r = x − n·ln2, |r| ≤ ln2/2.
func exp64Scalar(x float64) float64 {
	switch {
	case x != x:
		return x
	case x < exp64Lo:
		x = exp64Lo
	case x > exp64Hi:
		x = exp64Hi
	}
	n := math.RoundToEven(x * math.Log2E)
	r := x - n*exp64C1
	r -= n * exp64C2
	q := exp64Q[0]
	for _, c := range exp64Q[1:] {
		q = q*r + c
	}
	return math.Ldexp(1+r*q, int(n))
}
