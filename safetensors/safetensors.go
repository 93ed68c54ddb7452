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
	F32 DType = "F32" // IEEE 754 binary32
	F64 DType = "F64" // IEEE 754 binary64
	I64 DType = "I64" // two's complement signed 64-bit integer
)

// Size returns the number of bytes in one element of type d,
// or 0 if d is not a supported dtype.
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F64, I64:
		return 8
	}
	return 0
}

// metadataKey is the reserved header key holding the file's metadata.
const metadataKey = "__metadata__"

// Tensor is one named tensor. Exactly one of F32, F64, I64 is set, matching DType.
type Tensor struct {
	DType DType
	Shape []int
	F32   []float32
	F64   []float64
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
// float64, together with a copy of its shape. The tensor must have dtype
// F32 or F64.
func (f *File) Float64(name string) ([]float64, []int, error) {
	t, err := f.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	switch t.DType {
	case F64:
		return append([]float64{}, t.F64...), cloneShape(t.Shape), nil
	case F32:
		out := make([]float64, len(t.F32))
		for i, v := range t.F32 {
			out[i] = float64(v)
		}
		return out, cloneShape(t.Shape), nil
	}
	return nil, nil, fmt.Errorf("safetensors: tensor %q: dtype %s, want F32 or F64", name, t.DType)
}

// Float32 returns a copy of the elements of tensor name as float32,
// together with a copy of its shape. The tensor must have dtype F32 or
// F64; F64 elements are rounded to the nearest float32.
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, err := f.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	switch t.DType {
	case F32:
		return append([]float32{}, t.F32...), cloneShape(t.Shape), nil
	case F64:
		out := make([]float32, len(t.F64))
		for i, v := range t.F64 {
			out[i] = float32(v)
		}
		return out, cloneShape(t.Shape), nil
	}
	return nil, nil, fmt.Errorf("safetensors: tensor %q: dtype %s, want F32 or F64", name, t.DType)
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
	}{{F32, len(t.F32)}, {F64, len(t.F64)}, {I64, len(t.I64)}} {
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
	return fmt.Errorf("safetensors: tensor %q: dtype %s not supported (want F32, F64 or I64)", name, dtypeName(d))
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
