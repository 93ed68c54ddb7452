package safetensors

import "math"

// Half-precision formats, as bit patterns in a uint16:
//
//	BF16: sign(1) exponent(8, bias 127) mantissa(7)  — the top half of a float32
//	F16:  sign(1) exponent(5, bias 15)  mantissa(10) — IEEE 754 binary16
//
// Every value of either format is exactly a float32 (F16's subnormals
// m·2⁻²⁴ are normal float32s), so decoding is exact. Encoding rounds to
// nearest, ties to even; a NaN stays a quiet NaN of the same sign.

// bf16ToFloat32 returns the value of the bfloat16 bits b.
func bf16ToFloat32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// bf16FromFloat32 rounds x to the nearest bfloat16, ties to even.
func bf16FromFloat32(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7fffffff > 0x7f800000 {
		// NaN: truncating could clear every payload bit left (giving an
		// infinity), so set the quiet bit.
		return uint16(b>>16) | 0x0040
	}
	// Add just under half of the dropped unit, plus the kept lowest bit:
	// above half rounds up, below down, and an exact half rounds up only
	// from an odd value. A carry runs into the exponent, up to infinity
	// (MaxFloat32 lies above the largest bfloat16 plus half its spacing).
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// f16ToFloat32 returns the value of the IEEE binary16 bits h.
func f16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0x1f: // infinity or NaN: the payload moves to the top of the mantissa
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case 0: // zero or subnormal: man·2⁻²⁴, exact in float32
		v := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(v))
	}
	// normal: rebias the exponent from 15 to 127
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// f16FromFloat32 rounds x to the nearest IEEE binary16, ties to even.
// Magnitudes from 65520 (the largest binary16, 65504, plus half its
// spacing) up round to infinity; those up to 2⁻²⁵ (half the smallest
// subnormal) round to zero.
func f16FromFloat32(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN: keep the top of the payload, set the quiet bit
		return sign | 0x7e00 | uint16(abs>>13)&0x3ff
	case abs >= 0x477ff000: // 65520 and above, infinity included
		return sign | 0x7c00
	case abs >= 0x38800000: // 2⁻¹⁴ and above: a normal binary16
		// Rebias the exponent from 127 to 15 and drop 13 mantissa bits,
		// rounding as in bf16FromFloat32; a carry into the exponent gives
		// the next power of two (at most 0x7bff, the threshold above).
		abs -= (127 - 15) << 23
		abs += 0xfff + (abs>>13)&1
		return sign | uint16(abs>>13)
	case abs > 0x33000000: // above 2⁻²⁵: a subnormal, or the smallest normal
		// x = m·2^(e-150) with the implicit bit in m; in units of 2⁻²⁴
		// that is m·2^(e-126), so shift right by 126-e (from 14 to 24).
		e := abs >> 23
		m := abs&0x7fffff | 0x800000
		shift := 126 - e
		q := m >> shift
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && q&1 == 1 {
			q++ // may reach 0x400, the smallest normal
		}
		return sign | uint16(q)
	}
	// 2⁻²⁵ itself is a tie between zero and the smallest subnormal: the
	// even one is zero.
	return sign
}

// roundOdd32 rounds x to a float32 by round-to-odd: an inexact result is
// the neighbour of x whose last mantissa bit is 1. Rounding that result
// to bfloat16 or binary16 (at least two bits fewer, everywhere in their
// ranges) then gives x correctly rounded, with no double rounding.
func roundOdd32(x float64) float32 {
	r := float32(x)
	if float64(r) == x || math.IsNaN(x) {
		return r
	}
	b := math.Float32bits(r)
	if b&1 == 1 {
		return r
	}
	// r is even: step one unit towards x (an overflow to infinity steps
	// back to MaxFloat32, an underflow to zero up to the smallest
	// subnormal).
	if math.Abs(float64(r)) < math.Abs(x) {
		b++
	} else {
		b--
	}
	return math.Float32frombits(b)
}
