package safetensors

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A halfFormat is BF16 or F16 with its conversions, for tests that run on
// both.
type halfFormat struct {
	dtype    DType
	toF32    func(uint16) float32
	fromF32  func(float32) uint16
	expBits  int // exponent bits; the mantissa has 15-expBits
	inf, max uint16
}

var halfFormats = []halfFormat{
	{BF16, bf16ToFloat32, bf16FromFloat32, 8, 0x7f80, 0x7f7f},
	{F16, f16ToFloat32, f16FromFloat32, 5, 0x7c00, 0x7bff},
}

// fromF64 rounds x as File.Convert does from F64.
func (h halfFormat) fromF64(x float64) uint16 { return h.fromF32(roundOdd32(x)) }

// refValue computes the value of bits b from the format's definition, in
// float64: (-1)^s · 2^(e-bias) · 1.m, or 2^(1-bias) · 0.m when e = 0.
func (h halfFormat) refValue(b uint16) float64 {
	manBits := 15 - h.expBits
	bias := 1<<(h.expBits-1) - 1
	e := int(b>>manBits) & (1<<h.expBits - 1)
	m := float64(b & (1<<manBits - 1))
	var v float64
	switch {
	case e == 1<<h.expBits-1 && m == 0:
		v = math.Inf(1)
	case e == 1<<h.expBits-1:
		v = math.NaN()
	case e == 0:
		v = math.Ldexp(m, 1-bias-manBits)
	default:
		v = math.Ldexp(m+float64(int(1)<<manBits), e-bias-manBits)
	}
	if b&0x8000 != 0 {
		v = -v
	}
	return v
}

func isNaNBits(h halfFormat, b uint16) bool { return b&0x7fff > h.inf }

// TestHalfAllBits: over all 65536 patterns of each format, decoding gives
// the value of the format's definition, and encoding that value gives back
// the same bits (from float32 and from float64); a NaN decodes to a NaN and
// encodes to a NaN of the same sign.
func TestHalfAllBits(t *testing.T) {
	for _, h := range halfFormats {
		t.Run(string(h.dtype), func(t *testing.T) {
			bad := 0
			for i := range 1 << 16 {
				b := uint16(i)
				v := h.toF32(b)
				ref := h.refValue(b)
				if isNaNBits(h, b) {
					back := h.fromF32(v)
					if !math.IsNaN(float64(v)) || !isNaNBits(h, back) || back&0x8000 != b&0x8000 || !isNaNBits(h, h.fromF64(float64(v))) {
						t.Errorf("%#04x: NaN decodes to %v, encodes back to %#04x", b, v, back)
						bad++
					}
				} else if float64(v) != ref || math.Signbit(float64(v)) != math.Signbit(ref) {
					t.Errorf("%#04x decodes to %v, want %v", b, v, ref)
					bad++
				} else if back, back64 := h.fromF32(v), h.fromF64(float64(v)); back != b || back64 != b {
					t.Errorf("%#04x = %v encodes back to %#04x (from float64 %#04x)", b, v, back, back64)
					bad++
				}
				if bad > 10 {
					t.Fatal("too many failures")
				}
			}
		})
	}
}

// TestHalfRounding: between every two neighbouring finite values a < b of
// each format (and between the largest and infinity), the midpoint rounds
// to the one with the even last bit, and the nearest float32s on either
// side of it (and float64s much nearer) round to a and to b.
func TestHalfRounding(t *testing.T) {
	for _, h := range halfFormats {
		t.Run(string(h.dtype), func(t *testing.T) {
			bad := 0
			for ia := uint16(0); ia <= h.max; ia++ {
				ib := ia + 1 // the next magnitude; h.inf after h.max
				a := h.refValue(ia)
				b := h.refValue(ib)
				if ib == h.inf {
					b = 2*a - h.refValue(ia-1) // the spacing continued
				}
				mid := (a + b) / 2
				if float64(float32(mid)) != mid {
					t.Fatalf("%#04x: midpoint %v is not a float32", ia, mid)
				}
				even := ia
				if ia&1 == 1 {
					even = ib
				}
				above32 := math.Nextafter32(float32(mid), float32(math.Inf(1)))
				below32 := math.Nextafter32(float32(mid), 0)
				nudge := mid * 0x1p-40 // far below a float32's spacing: only round-to-odd keeps it
				for _, neg := range []uint16{0, 0x8000} {
					sign := float64(1)
					if neg != 0 {
						sign = -1
					}
					for _, c := range []struct {
						what string
						got  uint16
						want uint16
					}{
						{"midpoint", h.fromF32(float32(sign * mid)), even},
						{"float32 above the midpoint", h.fromF32(float32(sign) * above32), ib},
						{"float32 below the midpoint", h.fromF32(float32(sign) * below32), ia},
						{"float64 midpoint", h.fromF64(sign * mid), even},
						{"float64 just above the midpoint", h.fromF64(sign * (mid + nudge)), ib},
						{"float64 just below the midpoint", h.fromF64(sign * (mid - nudge)), ia},
					} {
						if c.got != c.want|neg {
							t.Errorf("%s between %#04x and %#04x (%g): got %#04x, want %#04x", c.what, ia|neg, ib|neg, sign*mid, c.got, c.want|neg)
							bad++
						}
					}
				}
				if bad > 10 {
					t.Fatal("too many failures")
				}
			}
		})
	}
}

// TestHalfRoundingCases are named cases of the rounding rules, with the
// source of each number.
func TestHalfRoundingCases(t *testing.T) {
	tests := []struct {
		h    halfFormat
		x    float64
		want uint16
	}{
		// bfloat16: 1 = 0x3f80, spacing 2⁻⁷ above 1.
		{halfFormats[0], 1, 0x3f80},
		{halfFormats[0], 1 + 0x1p-8, 0x3f80},             // tie between 0x3f80 (even) and 0x3f81
		{halfFormats[0], 1 + 3*0x1p-8, 0x3f82},           // tie between 0x3f81 and 0x3f82 (even)
		{halfFormats[0], 1 + 0x1p-8 + 0x1p-30, 0x3f81},   // just above a tie: float32(x) is the tie itself
		{halfFormats[0], 1 + 0x1p-8 - 0x1p-30, 0x3f80},   // just below it
		{halfFormats[0], math.Pi, 0x4049},                // 3.140625, the nearest
		{halfFormats[0], -2, 0xc000},                     // sign
		{halfFormats[0], math.MaxFloat32, 0x7f80},        // beyond the largest (0x7f7f) plus half its spacing
		{halfFormats[0], 0x1.fep127, 0x7f7f},             // the largest
		{halfFormats[0], 0x1.ffp127, 0x7f80},             // largest plus half the spacing: a tie, the even side is infinity
		{halfFormats[0], 1e300, 0x7f80},                  // a float64 far beyond
		{halfFormats[0], 0x1p-133, 0x0001},               // the smallest subnormal
		{halfFormats[0], 0x1p-134, 0x0000},               // half of it: a tie, towards zero
		{halfFormats[0], math.SmallestNonzeroFloat32, 0}, // far below half the smallest
		{halfFormats[0], -0x1p-140, 0x8000},              // a negative underflow keeps its sign
		// binary16: 1 = 0x3c00, spacing 2⁻¹⁰ above 1; largest 65504 = 0x7bff, spacing 32.
		{halfFormats[1], 1, 0x3c00},
		{halfFormats[1], 1 + 0x1p-11, 0x3c00},            // tie, to even
		{halfFormats[1], 1 + 3*0x1p-11, 0x3c02},          // tie, to even
		{halfFormats[1], 1 + 0x1p-11 + 0x1p-30, 0x3c01},  // just above a tie (no double rounding through float32)
		{halfFormats[1], 0.1, 0x2e66},                    // 0.0999755859375, the nearest
		{halfFormats[1], 65504, 0x7bff},                  // the largest
		{halfFormats[1], 65519.99, 0x7bff},               // below 65504 + 16
		{halfFormats[1], 65520, 0x7c00},                  // 65504 + 16: a tie, the even side is infinity
		{halfFormats[1], -1e6, 0xfc00},                   // overflow to -Inf
		{halfFormats[1], 0x1p-14, 0x0400},                // the smallest normal
		{halfFormats[1], 0x1p-14 - 0x1p-25, 0x0400},      // tie between 0x03ff and 0x0400 (even)
		{halfFormats[1], 0x1p-14 - 3*0x1p-25, 0x03fe},    // tie between 0x03fe (even) and 0x03ff
		{halfFormats[1], 0x1p-24, 0x0001},                // the smallest subnormal
		{halfFormats[1], 3 * 0x1p-25, 0x0002},            // tie between 0x0001 and 0x0002 (even)
		{halfFormats[1], 0x1p-25, 0x0000},                // tie between 0 (even) and 0x0001
		{halfFormats[1], 0x1p-25 + 0x1p-40, 0x0001},      // just above it
		{halfFormats[1], -0x1p-26, 0x8000},               // a negative underflow keeps its sign
		{halfFormats[1], 5.9604644775390625e-08, 0x0001}, // 2⁻²⁴ in decimal
	}
	for _, tt := range tests {
		for _, from := range []string{"float32", "float64"} {
			var got uint16
			if from == "float32" {
				if float64(float32(tt.x)) != tt.x && math.Abs(tt.x) < math.MaxFloat32 {
					continue // not a float32: only the float64 path sees x
				}
				got = tt.h.fromF32(float32(tt.x))
			} else {
				got = tt.h.fromF64(tt.x)
			}
			if got != tt.want {
				t.Errorf("%s from %s %v (%x) = %#04x, want %#04x", tt.h.dtype, from, tt.x, tt.x, got, tt.want)
			}
		}
	}
	for _, h := range halfFormats {
		for _, x := range []float64{math.Inf(1), math.Inf(-1)} {
			if got := h.fromF64(x); got != h.inf|uint16(b2u(x < 0))<<15 {
				t.Errorf("%s of %v = %#04x", h.dtype, x, got)
			}
		}
		for _, bits := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa00000} {
			nan := math.Float32frombits(bits)
			got := h.fromF32(nan)
			if !isNaNBits(h, got) || got&0x8000 != uint16(bits>>16)&0x8000 || !math.IsNaN(float64(h.toF32(got))) {
				t.Errorf("%s of NaN %#08x = %#04x, want a NaN of the same sign", h.dtype, bits, got)
			}
		}
	}
}

func b2u(b bool) uint16 {
	if b {
		return 1
	}
	return 0
}

// TestHalfFile: BF16 and F16 tensors survive MarshalBinary and Parse, and
// WriteFile and ReadFile, bit for bit, with the bytes the format defines;
// Float32 and Float64 read their values.
func TestHalfFile(t *testing.T) {
	vals := []float32{1, -2, 0.1, float32(math.Inf(-1)), 0, 70000}
	f := New()
	f.SetBF16("b", []int{2, 3}, vals)
	f.SetF16("h", []int{3, 2}, vals)
	f.SetF16("scalar", nil, []float32{0.5})
	f.SetBF16("empty", []int{0}, nil)
	f.SetI64("n", []int{1}, []int64{7})
	f.Metadata["format"] = "pt"

	data, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// bfloat16 1.0 is 0x3f80, binary16 1.0 is 0x3c00: little-endian bytes.
	if !bytes.Contains(data, []byte{0x80, 0x3f, 0x00, 0xc0}) || !bytes.Contains(data, []byte{0x00, 0x3c, 0x00, 0xc0}) {
		t.Error("the data buffer lacks the little-endian bits of 1 and -2")
	}
	for _, want := range []string{`"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}`, `"h":{"dtype":"F16","shape":[3,2]`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("header lacks %s", want)
		}
	}
	g, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(f, g) {
		t.Fatalf("round trip changed the file:\n got %+v\nwant %+v", g, f)
	}
	path := filepath.Join(t.TempDir(), "half.safetensors")
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	r, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !equalFiles(f, r) {
		t.Fatal("WriteFile and ReadFile changed the file")
	}

	wantB := []float32{1, -2, 0.10009765625, float32(math.Inf(-1)), 0, 70144}                  // bfloat16 nearest of each
	wantH := []float32{1, -2, 0.0999755859375, float32(math.Inf(-1)), 0, float32(math.Inf(1))} // binary16: 70000 overflows
	for _, c := range []struct {
		name  string
		want  []float32
		shape []int
	}{{"b", wantB, []int{2, 3}}, {"h", wantH, []int{3, 2}}, {"scalar", []float32{0.5}, []int{}}, {"empty", []float32{}, []int{0}}} {
		got, shape, err := r.Float32(c.name)
		if err != nil || !slices.Equal(got, c.want) || !slices.Equal(shape, c.shape) {
			t.Errorf("Float32(%q) = %v, %v, %v; want %v, %v", c.name, got, shape, err, c.want, c.shape)
		}
		got64, _, err := r.Float64(c.name)
		if err != nil || len(got64) != len(c.want) {
			t.Fatalf("Float64(%q) = %v, %v", c.name, got64, err)
		}
		for i := range got64 {
			if got64[i] != float64(c.want[i]) {
				t.Errorf("Float64(%q)[%d] = %v, want %v", c.name, i, got64[i], c.want[i])
			}
		}
	}
}

// TestHalfRejects: wrong data lengths and mixed-up fields are errors
// naming the tensor, in Parse, MarshalBinary and the accessors.
func TestHalfRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		data []byte
		want string
	}{
		{"BF16 short", raw(`{"b":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}}`, 4), `tensor "b": data_offsets [0 4] hold 4 bytes, shape [3] of BF16 needs 6`},
		{"F16 long", raw(`{"h":{"dtype":"F16","shape":[1],"data_offsets":[0,4]}}`, 4), `tensor "h": data_offsets [0 4] hold 4 bytes, shape [1] of F16 needs 2`},
		{"F16 odd tail", raw(`{"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, 3), `data bytes [2 3) after tensor "h" are not used`},
	} {
		_, err := Parse(tt.data)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name   string
		tensor *Tensor
		want   string
	}{
		{"BF16 short", &Tensor{DType: BF16, Shape: []int{2}, BF16: []uint16{1}}, `tensor "x": shape [2] needs 2 elements, BF16 data has 1`},
		{"F16 long", &Tensor{DType: F16, Shape: []int{}, F16: []uint16{1, 2}}, `tensor "x": shape [] needs 1 elements, F16 data has 2`},
		{"BF16 bits in F16", &Tensor{DType: F16, Shape: []int{1}, BF16: []uint16{1}}, `tensor "x": dtype F16 but BF16 data is set`},
		{"F16 bits beside F32", &Tensor{DType: F32, Shape: []int{1}, F32: []float32{1}, F16: []uint16{1}}, `tensor "x": dtype F32 but F16 data is set`},
	} {
		f := &File{Tensors: map[string]*Tensor{"x": tt.tensor}}
		_, err := f.MarshalBinary()
		if err == nil || !strings.HasPrefix(err.Error(), "safetensors: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: MarshalBinary error %v, want one containing %q", tt.name, err, tt.want)
		}
		if _, _, err := f.Float32("x"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Float32 error %v, want one containing %q", tt.name, err, tt.want)
		}
		if _, err := f.Convert(F32); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Convert error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	for _, set := range []func(*File){
		func(f *File) { f.SetBF16("a", []int{2, 3}, make([]float32, 5)) },
		func(f *File) { f.SetF16("a", []int{2, 3}, make([]float32, 5)) },
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, `tensor "a": shape [2 3] needs 6 elements, data has 5`) {
					t.Errorf("panic %q", msg)
				}
			}()
			set(New())
		}()
	}
}

// TestConvert: every floating-point tensor changes dtype, integers stay;
// widening is exact, narrowing rounds once; an overflow is an error that
// leaves the file as it was.
func TestConvert(t *testing.T) {
	src := func() *File {
		f := New()
		f.SetF32("w", []int{2, 2}, []float32{1, 0.1, -3.5, float32(math.NaN())})
		f.SetF64("x", []int{2}, []float64{1 + 0x1p-8 + 0x1p-30, math.Inf(-1)}) // above a bfloat16 tie
		f.SetBF16("b", []int{1}, []float32{0.1})
		f.SetI64("ids", []int{2}, []int64{1, 2})
		f.Metadata["k"] = "v"
		return f
	}
	for _, d := range []DType{F32, F64, BF16, F16} {
		t.Run(string(d), func(t *testing.T) {
			f := src()
			n, err := f.Convert(d)
			if err != nil {
				t.Fatal(err)
			}
			want := 3
			if d == F32 || d == F64 || d == BF16 {
				want = 2 // one of the three is d already
			}
			if n != want {
				t.Errorf("Convert(%s) = %d tensors, want %d", d, n, want)
			}
			for _, name := range []string{"w", "x", "b"} {
				if f.Tensors[name].DType != d {
					t.Errorf("tensor %q has dtype %s after Convert(%s)", name, f.Tensors[name].DType, d)
				}
			}
			if ids, _, err := f.Int64("ids"); err != nil || !slices.Equal(ids, []int64{1, 2}) || f.Metadata["k"] != "v" {
				t.Errorf("integers or metadata changed: %v, %v, %v", ids, err, f.Metadata)
			}
			// Every converted value is the source value rounded once to d.
			orig := src()
			for _, name := range []string{"w", "x", "b"} {
				x, _, _ := orig.Float64(name)
				got, _, _ := f.Float64(name)
				for i, v := range x {
					var w float64
					switch d {
					case F64:
						w = v
					case F32:
						w = float64(float32(v))
					case BF16:
						w = float64(bf16ToFloat32(halfFormats[0].fromF64(v)))
					case F16:
						w = float64(f16ToFloat32(halfFormats[1].fromF64(v)))
					}
					if got[i] != w && !(math.IsNaN(got[i]) && math.IsNaN(w)) {
						t.Errorf("%s[%d] = %v as %s, want %v", name, i, got[i], d, w)
					}
				}
			}
			if d == BF16 && f.Tensors["x"].BF16[0] != 0x3f81 {
				t.Errorf("F64 1+2⁻⁸+2⁻³⁰ became %#04x, want 0x3f81 (rounded once, not through float32)", f.Tensors["x"].BF16[0])
			}
			if _, err := f.MarshalBinary(); err != nil {
				t.Error(err)
			}
		})
	}

	f := src()
	f.SetF32("big", []int{3}, []float32{1, 2, 70000})
	before, _ := f.MarshalBinary()
	_, err := f.Convert(F16)
	if err == nil || err.Error() != `safetensors: tensor "big": element 2 (70000) is beyond the range of F16` {
		t.Errorf("overflow: error %v", err)
	}
	if after, _ := f.MarshalBinary(); !bytes.Equal(before, after) {
		t.Error("a failed Convert changed the file")
	}
	f = New()
	f.SetF64("huge", []int{1}, []float64{1e300})
	if _, err := f.Convert(F32); err == nil || !strings.Contains(err.Error(), `tensor "huge": element 0 (1e+300) is beyond the range of F32`) {
		t.Errorf("F64 overflow to F32: error %v", err)
	}
	if _, err := f.Convert(BF16); err == nil || !strings.Contains(err.Error(), "beyond the range of BF16") {
		t.Errorf("F64 overflow to BF16: error %v", err)
	}
	for _, d := range []DType{I64, "F8", ""} {
		if _, err := New().Convert(d); err == nil || !strings.HasPrefix(err.Error(), "safetensors: convert to dtype ") {
			t.Errorf("Convert(%q): error %v", d, err)
		}
	}
}

func ExampleFile_SetBF16() {
	f := New()
	f.SetBF16("w", []int{3}, []float32{1, 0.1, 1 + 1.0/256}) // the last is a tie: to even
	w, _, _ := f.Float32("w")
	fmt.Printf("%.8f %#04x\n", w, f.Tensors["w"].BF16)
	// Output: [1.00000000 0.10009766 1.00000000] [0x3f80 0x3dcd 0x3f80]
}
