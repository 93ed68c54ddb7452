package safetensors

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// DType names the element type of a tensor, spelled as in the file header.
type DType string

// The supported dtypes.
const (
	F32  DType = "F32"  // IEEE 754 binary32
	F64  DType = "F64"  // IEEE 754 binary64
	BF16 DType = "BF16" // bfloat16: the top 16 bits of a binary32
	F16  DType = "F16"  // IEEE 754 binary16
	I64  DType = "I64"  // two's complement signed 64-bit integer
)

// Size returns the number of bytes in one element of type d,
// or 0 if d is not a supported dtype.
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32:
		return 4
	case F64, I64:
		return 8
	}
	return 0
}

// IsFloat reports whether d is a supported floating-point dtype: F32, F64,
// BF16 or F16.
func (d DType) IsFloat() bool {
	return d == F32 || d == F64 || d == BF16 || d == F16
}

// metadataKey is the reserved header key holding the file's metadata.
const metadataKey = "__metadata__"

// Tensor is one named tensor. Exactly one of F32, F64, BF16, F16, I64 is
// set, matching DType. BF16 and F16 hold the raw bits of each element;
// [File.Float32] and [File.Float64] give their values.
type Tensor struct {
	DType DType
	Shape []int
	F32   []float32
	F64   []float64
	BF16  []uint16
	F16   []uint16
	I64   []int64
}

// File is the contents of a safetensors file: a set of named tensors
// and a map of string metadata.
type File struct {
	Tensors  map[string]*Tensor
	Metadata map[string]string
}

// New returns an empty File with non-nil Tensors and Metadata maps.
func New() *File {
	return &File{
		Tensors:  make(map[string]*Tensor),
		Metadata: make(map[string]string),
	}
}

// SetF64 stores a copy of shape and data as the F64 tensor name,
// replacing any tensor of that name.
// It panics if a dimension is negative, if len(data) is not the product
// of the dimensions, or if name is the reserved key "__metadata__".
func (f *File) SetF64(name string, shape []int, data []float64) {
	f.set("SetF64", name, shape, len(data), &Tensor{DType: F64, F64: slices.Clone(data)})
}

// SetF32 stores a copy of shape and data as the F32 tensor name,
// replacing any tensor of that name.
// It panics under the same conditions as [File.SetF64].
func (f *File) SetF32(name string, shape []int, data []float32) {
	f.set("SetF32", name, shape, len(data), &Tensor{DType: F32, F32: slices.Clone(data)})
}

// SetBF16 stores a copy of shape and data, each element rounded to the
// nearest bfloat16 (ties to even), as the BF16 tensor name, replacing any
// tensor of that name. A NaN stays a NaN; values beyond the largest
// bfloat16 by half its spacing or more become infinities.
// It panics under the same conditions as [File.SetF64].
func (f *File) SetBF16(name string, shape []int, data []float32) {
	bits := make([]uint16, len(data))
	for i, v := range data {
		bits[i] = bf16FromFloat32(v)
	}
	f.set("SetBF16", name, shape, len(data), &Tensor{DType: BF16, BF16: bits})
}

// SetF16 stores a copy of shape and data, each element rounded to the
// nearest IEEE binary16 (ties to even, with subnormals), as the F16 tensor
// name, replacing any tensor of that name. A NaN stays a NaN; magnitudes
// of 65520 and more become infinities.
// It panics under the same conditions as [File.SetF64].
func (f *File) SetF16(name string, shape []int, data []float32) {
	bits := make([]uint16, len(data))
	for i, v := range data {
		bits[i] = f16FromFloat32(v)
	}
	f.set("SetF16", name, shape, len(data), &Tensor{DType: F16, F16: bits})
}

// SetI64 stores a copy of shape and data as the I64 tensor name,
// replacing any tensor of that name.
// It panics under the same conditions as [File.SetF64].
func (f *File) SetI64(name string, shape []int, data []int64) {
	f.set("SetI64", name, shape, len(data), &Tensor{DType: I64, I64: slices.Clone(data)})
}

func (f *File) set(fn, name string, shape []int, n int, t *Tensor) {
	if name == metadataKey {
		panic(fmt.Sprintf("safetensors: %s: tensor name %q is reserved", fn, name))
	}
	want, ok := numElements(shape)
	if !ok {
		panic(fmt.Sprintf("safetensors: %s: tensor %q: invalid shape %v", fn, name, shape))
	}
	if n != want {
		panic(fmt.Sprintf("safetensors: %s: tensor %q: shape %v needs %d elements, data has %d", fn, name, shape, want, n))
	}
	t.Shape = cloneShape(shape)
	if f.Tensors == nil {
		f.Tensors = make(map[string]*Tensor)
	}
	f.Tensors[name] = t
}

// Names returns the names of the tensors in f, sorted.
func (f *File) Names() []string {
	return slices.Sorted(maps.Keys(f.Tensors))
}

// Has reports whether f holds a tensor called name.
func (f *File) Has(name string) bool {
	return f.Tensors[name] != nil
}

// Float64 returns a copy of the elements of tensor name converted to
// float64, together with a copy of its shape. The tensor must have a
// floating-point dtype (F32, F64, BF16 or F16); every conversion is exact.
func (f *File) Float64(name string) ([]float64, []int, error) {
	t, err := f.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	if t.DType == F64 {
		return append([]float64{}, t.F64...), cloneShape(t.Shape), nil
	}
	if !t.DType.IsFloat() {
		return nil, nil, notFloat(name, t.DType)
	}
	// F32, BF16 and F16 values are all float32s
	x := t.float32s()
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out, cloneShape(t.Shape), nil
}

// Float32 returns a copy of the elements of tensor name as float32,
// together with a copy of its shape. The tensor must have a floating-point
// dtype (F32, F64, BF16 or F16); F64 elements are rounded to the nearest
// float32, the others are converted exactly.
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, err := f.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	if !t.DType.IsFloat() {
		return nil, nil, notFloat(name, t.DType)
	}
	x := t.float32s()
	if t.DType == F32 {
		x = append([]float32{}, x...)
	}
	return x, cloneShape(t.Shape), nil
}

// float32s returns the elements of the floating-point tensor t as
// float32: its own F32 slice, or a new one.
func (t *Tensor) float32s() []float32 {
	var out []float32
	switch t.DType {
	case F32:
		return t.F32
	case F64:
		out = make([]float32, len(t.F64))
		for i, v := range t.F64 {
			out[i] = float32(v)
		}
	case BF16:
		out = make([]float32, len(t.BF16))
		for i, b := range t.BF16 {
			out[i] = bf16ToFloat32(b)
		}
	case F16:
		out = make([]float32, len(t.F16))
		for i, h := range t.F16 {
			out[i] = f16ToFloat32(h)
		}
	}
	return out
}

// notFloat returns the error for reading a tensor of dtype d as floats.
func notFloat(name string, d DType) error {
	return fmt.Errorf("safetensors: tensor %q: dtype %s, want F32, F64, BF16 or F16", name, d)
}

// Int64 returns a copy of the elements of tensor name, together with a
// copy of its shape. The tensor must have dtype I64.
func (f *File) Int64(name string) ([]int64, []int, error) {
	t, err := f.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	if t.DType != I64 {
		return nil, nil, fmt.Errorf("safetensors: tensor %q: dtype %s, want I64", name, t.DType)
	}
	return append([]int64{}, t.I64...), cloneShape(t.Shape), nil
}

// Convert changes the dtype of every floating-point tensor of f (F32, F64,
// BF16 or F16) to d, which must be one of those, and returns how many
// tensors changed dtype; integer tensors are left as they are. Widening is
// exact; narrowing rounds to nearest, ties to even, once (an F64 value goes
// to BF16 or F16 directly, not through a rounded float32). A NaN stays a
// NaN, and an infinity an infinity.
//
// A finite value beyond the range of d (at or past its largest value plus
// half its spacing: 65520 for F16) is an error naming the tensor, the
// element and the value. On any error f is left unchanged.
func (f *File) Convert(d DType) (int, error) {
	if !d.IsFloat() {
		return 0, fmt.Errorf("safetensors: convert to dtype %s: want F32, F64, BF16 or F16", dtypeName(d))
	}
	done := make(map[string]*Tensor)
	for _, name := range f.Names() {
		t := f.Tensors[name]
		if t == nil {
			return 0, fmt.Errorf("safetensors: tensor %q is nil", name)
		}
		if _, err := t.check(name); err != nil {
			return 0, err
		}
		if !t.DType.IsFloat() || t.DType == d {
			continue
		}
		c, err := t.convert(name, d)
		if err != nil {
			return 0, err
		}
		done[name] = c
	}
	for name, c := range done {
		f.Tensors[name] = c
	}
	return len(done), nil
}

// convert returns the floating-point tensor t, called name, as dtype d.
func (t *Tensor) convert(name string, d DType) (*Tensor, error) {
	var x []float64
	if t.DType == F64 {
		x = t.F64
	} else {
		x32 := t.float32s()
		x = make([]float64, len(x32))
		for i, v := range x32 {
			x[i] = float64(v)
		}
	}
	c := &Tensor{DType: d, Shape: cloneShape(t.Shape)}
	var inf func(i int) bool // whether element i of c is infinite
	switch d {
	case F64:
		c.F64 = x
		inf = func(int) bool { return false }
	case F32:
		c.F32 = make([]float32, len(x))
		for i, v := range x {
			c.F32[i] = float32(v)
		}
		inf = func(i int) bool { return math.IsInf(float64(c.F32[i]), 0) }
	case BF16:
		c.BF16 = make([]uint16, len(x))
		for i, v := range x {
			c.BF16[i] = bf16FromFloat32(roundOdd32(v))
		}
		inf = func(i int) bool { return c.BF16[i]&0x7fff == 0x7f80 }
	case F16:
		c.F16 = make([]uint16, len(x))
		for i, v := range x {
			c.F16[i] = f16FromFloat32(roundOdd32(v))
		}
		inf = func(i int) bool { return c.F16[i]&0x7fff == 0x7c00 }
	}
	for i, v := range x {
		if inf(i) && !math.IsInf(v, 0) {
			return nil, fmt.Errorf("safetensors: tensor %q: element %d (%g) is beyond the range of %s", name, i, v, d)
		}
	}
	return c, nil
}

// lookup returns the tensor called name after checking that it is
// consistent.
func (f *File) lookup(name string) (*Tensor, error) {
	t := f.Tensors[name]
	if t == nil {
		return nil, fmt.Errorf("safetensors: tensor %q not found", name)
	}
	if _, err := t.check(name); err != nil {
		return nil, err
	}
	return t, nil
}

// check reports whether t is a consistent tensor of a supported dtype
// and returns the size of its data in bytes.
func (t *Tensor) check(name string) (int, error) {
	size := t.DType.Size()
	if size == 0 {
		return 0, unsupported(name, t.DType)
	}
	n, ok := numElements(t.Shape)
	if !ok || n > math.MaxInt/size {
		return 0, fmt.Errorf("safetensors: tensor %q: invalid shape %v", name, t.Shape)
	}
	got := 0
	for _, s := range [...]struct {
		d DType
		n int
	}{{F32, len(t.F32)}, {F64, len(t.F64)}, {BF16, len(t.BF16)}, {F16, len(t.F16)}, {I64, len(t.I64)}} {
		switch {
		case s.d == t.DType:
			got = s.n
		case s.n != 0:
			return 0, fmt.Errorf("safetensors: tensor %q: dtype %s but %s data is set", name, t.DType, s.d)
		}
	}
	if got != n {
		return 0, fmt.Errorf("safetensors: tensor %q: shape %v needs %d elements, %s data has %d", name, t.Shape, n, t.DType, got)
	}
	return n * size, nil
}

// unsupported returns the error for a tensor of an unsupported dtype.
func unsupported(name string, d DType) error {
	return fmt.Errorf("safetensors: tensor %q: dtype %s not supported (want F32, F64, BF16, F16 or I64)", name, dtypeName(d))
}

// dtypeName returns d for use in an error message, quoted unless it is
// made only of letters, digits and underscores.
func dtypeName(d DType) string {
	if d == "" {
		return `""`
	}
	for _, c := range []byte(d) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return strconv.Quote(string(d))
		}
	}
	return string(d)
}

// numElements returns the number of elements of a tensor of the given
// shape. It reports false if a dimension is negative or if the product
// of the non-zero dimensions overflows an int.
func numElements(shape []int) (int, bool) {
	n, zero := 1, false
	for _, d := range shape {
		switch {
		case d < 0:
			return 0, false
		case d == 0:
			zero = true
		default:
			if n > math.MaxInt/d {
				return 0, false
			}
			n *= d
		}
	}
	if zero {
		return 0, true
	}
	return n, true
}

// cloneShape returns a non-nil copy of shape.
func cloneShape(shape []int) []int {
	return append([]int{}, shape...)
}
