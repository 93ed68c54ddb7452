package vec

import (
	"fmt"
	"math"
	"unsafe"
)

// Float is the element type of every kernel, and of the module: nn,
// attention and the model alias it. Named types of these underlying types
// are welcome: the generic entry points reinterpret their slices.
type Float interface {
	~float32 | ~float64
}

// is32 reports whether T is a 4-byte float.
func is32[T Float]() bool {
	var z T
	return unsafe.Sizeof(z) == 4
}

// as32 and as64 view a slice of T as the float type of its size: the
// kernels are written for float32 and float64, and T may be a named type
// of either.
func as32[T Float](x []T) []float32 {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&x[0])), len(x))
}

func as64[T Float](x []T) []float64 {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&x[0])), len(x))
}

// Gemm computes, for T of either size,
//
//	C = alpha·op(A)·op(B) + beta·C
//
// exactly as Gemm32 and Gemm64 do, which it calls.
func Gemm[T Float](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if is32[T]() {
		Gemm32(transA, transB, m, n, k, float32(alpha), as32(a), lda, as32(b), ldb, float32(beta), as32(c), ldc)
		return
	}
	Gemm64(transA, transB, m, n, k, float64(alpha), as64(a), lda, as64(b), ldb, float64(beta), as64(c), ldc)
}

// Dot is Dot32 or Dot64 by the size of T.
func Dot[T Float](x, y []T) T {
	if is32[T]() {
		return T(Dot32(as32(x), as32(y)))
	}
	return T(Dot64(as64(x), as64(y)))
}

// Axpy is Axpy32 or Axpy64 by the size of T: y += alpha·x.
func Axpy[T Float](alpha T, x, y []T) {
	if is32[T]() {
		Axpy32(float32(alpha), as32(x), as32(y))
		return
	}
	Axpy64(float64(alpha), as64(x), as64(y))
}

// ExpShift sets dst[i] = exp(x[i] − shift) and returns their sum:
//
//	var sum T
//	for i, v := range x {
//		dst[i] = T(math.Exp(float64(v - shift)))
//		sum += dst[i]
//	}
//	return sum
//
// float32 runs the vectorised exponential of Exp32 (within 2 ulp); float64
// runs math.Exp itself: it is the precision every derivative is checked in,
// and it carries no approximation of its own. A −Inf (a hidden score) gives
// exactly 0. dst may be x.
func ExpShift[T Float](dst, x []T, shift T) T {
	dst = dst[:len(x)]
	if is32[T]() {
		d, s, sh := as32(dst), as32(x), float32(shift)
		for i, v := range s {
			d[i] = v - sh
		}
		Exp32(d, d)
		return T(sum32(d))
	}
	var sum T
	for i, v := range x {
		e := T(math.Exp(float64(v - shift)))
		dst[i] = e
		sum += e
	}
	return sum
}

// ExpShiftFloor is ExpShift with a floor under the exponent:
//
//	var sum T
//	for i, v := range x {
//		dst[i] = 0
//		if t := v - shift; !(t < floor) { // NaN too
//			dst[i] = T(math.Exp(float64(t)))
//			live = true
//		}
//		sum += dst[i]
//	}
//	return sum, live
//
// It is the fused attention's softmax, which sets weights too small to move
// a float32 output to 0 (floor is the log of that weight) and skips the
// products of a tile with none left. float32 runs it in one pass (on AVX2:
// the shift, Exp32's polynomial with one scaling step by 2ⁿ, the floor's
// mask and the sum together), which needs floor ≥ −87 (weights of normal
// size) and t ≤ 88; float64 runs math.Exp. dst may be x.
func ExpShiftFloor[T Float](dst, x []T, shift, floor T) (sum T, live bool) {
	if floor < -87 {
		panic(fmt.Sprintf("vec: ExpShiftFloor floor %v < -87", floor))
	}
	dst = dst[:len(x)]
	if is32[T]() {
		s, l := expShiftFloor32(as32(dst), as32(x), float32(shift), float32(floor))
		return T(s), l
	}
	for i, v := range x {
		e := T(0)
		if t := v - shift; !(t < floor) {
			e = T(math.Exp(float64(t)))
			live = true
		}
		dst[i] = e
		sum += e
	}
	return sum, live
}

// Softcap sets dst[i] = c·tanh(x[i]/c), logit softcapping, for c > 0:
// float64 through math.Tanh, float32 as c·(1 − 2/(1 + exp(2x/c))) with
// Exp32's polynomial in one pass (AVX2) or through Exp32. dst may be x.
func Softcap[T Float](dst, x []T, c T) {
	if !(c > 0) {
		panic(fmt.Sprintf("vec: Softcap cap %v, want > 0", c))
	}
	dst = dst[:len(x)]
	if is32[T]() {
		softcap32(as32(dst), as32(x), float32(c))
		return
	}
	for i, v := range x {
		dst[i] = c * T(math.Tanh(float64(v/c)))
	}
}

// softcap32Generic is the portable float32 Softcap.
func softcap32Generic(dst, x []float32, c float32) {
	dst = dst[:len(x)]
	two := 2 / c
	for i, v := range x {
		dst[i] = v * two
	}
	Exp32(dst, dst)
	for i, e := range dst {
		dst[i] = c * (1 - 2/(1+e))
	}
}

// expShiftFloor32Generic is the portable ExpShiftFloor32.
func expShiftFloor32Generic(dst, x []float32, shift, floor float32) (sum float32, live bool) {
	dst = dst[:len(x)]
	negInf := float32(math.Inf(-1))
	for i, v := range x {
		t := v - shift
		if t < floor {
			t = negInf
		} else {
			live = true
		}
		dst[i] = t
	}
	exp32(dst, dst)
	return sum32(dst), live
}

// Is32 reports whether T is a 4-byte float: callers that keep an exact
// float64 path (math.Exp) and a vectorised float32 one branch on it.
func Is32[T Float]() bool { return is32[T]() }

// Exp is Exp32 or Exp64 by the size of T.
func Exp[T Float](dst, x []T) {
	if is32[T]() {
		Exp32(as32(dst), as32(x))
		return
	}
	Exp64(as64(dst), as64(x))
}

// sum32 returns the sum of x in eight interleaved partial sums, added
// pairwise at the end: one serial chain of additions would wait on the
// latency of each.
func sum32(x []float32) float32 {
	var a [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		y := x[i : i+8 : i+8]
		a[0] += y[0]
		a[1] += y[1]
		a[2] += y[2]
		a[3] += y[3]
		a[4] += y[4]
		a[5] += y[5]
		a[6] += y[6]
		a[7] += y[7]
	}
	for j := 0; i < len(x); i, j = i+1, j+1 {
		a[j] += x[i]
	}
	return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

// Max returns the largest element of x (NaN if x holds one), -Inf when x
// is empty. The result does not depend on the order of the comparisons.
func Max[T Float](x []T) T {
	if is32[T]() {
		return T(max32(as32(x)))
	}
	return maxGeneric(x)
}

// maxGeneric is the portable Max.
func maxGeneric[T Float](x []T) T {
	m := [4]T{T(math.Inf(-1)), T(math.Inf(-1)), T(math.Inf(-1)), T(math.Inf(-1))}
	i := 0
	for ; i+4 <= len(x); i += 4 {
		y := x[i : i+4 : i+4]
		m[0] = max(m[0], y[0])
		m[1] = max(m[1], y[1])
		m[2] = max(m[2], y[2])
		m[3] = max(m[3], y[3])
	}
	for ; i < len(x); i++ {
		m[0] = max(m[0], x[i])
	}
	return max(max(m[0], m[1]), max(m[2], m[3]))
}

// Convert returns the elements of x converted to S, a new slice (nil for
// nil): float64 to float32 rounds to nearest, the other ways are exact.
//
//	for i, v := range x { out[i] = S(v) }
func Convert[S, T Float](x []T) []S {
	if x == nil {
		return nil
	}
	out := make([]S, len(x))
	for i, v := range x {
		out[i] = S(v)
	}
	return out
}
