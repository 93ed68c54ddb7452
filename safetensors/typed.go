package safetensors

import (
	"unsafe"

	"github.com/attnlab/attnlab/internal/vec"
)

// Get returns a copy of the elements of the floating-point tensor name
// (F32, F64, BF16 or F16) as T, with a copy of its shape: File.Float32's
// values for a 4-byte T, File.Float64's for an 8-byte one.
func Get[T vec.Float](f *File, name string) ([]T, []int, error) {
	var z T
	if unsafe.Sizeof(z) == 4 {
		x, shape, err := f.Float32(name)
		return vec.Convert[T](x), shape, err
	}
	x, shape, err := f.Float64(name)
	return vec.Convert[T](x), shape, err
}

// Set stores a copy of shape and data as the tensor name, F32 for a
// 4-byte T and F64 for an 8-byte one, replacing any tensor of that name.
// It panics under the same conditions as [File.SetF64].
func Set[T vec.Float](f *File, name string, shape []int, data []T) {
	var z T
	if unsafe.Sizeof(z) == 4 {
		f.set("Set", name, shape, len(data), &Tensor{DType: F32, F32: vec.Convert[float32](data)})
		return
	}
	f.set("Set", name, shape, len(data), &Tensor{DType: F64, F64: vec.Convert[float64](data)})
}
