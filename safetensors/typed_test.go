package safetensors

import (
	"slices"
	"testing"
)

type weight float32 // a named element type, as a caller's may be

// TestGetSet: Set stores float32 data as F32 and float64 as F64, a copy;
// Get reads any floating-point tensor as either, exactly where the value
// fits; a missing tensor or an integer one is an error.
func TestGetSet(t *testing.T) {
	f := New()
	d32 := []float32{1.5, -2, 3.25}
	Set(f, "a", []int{3}, d32)
	Set(f, "b", []int{1, 2}, []float64{0.1, 1e300})
	Set(f, "w", []int{2}, []weight{4, 5})
	d32[0] = 99
	if f.Tensors["a"].DType != F32 || f.Tensors["b"].DType != F64 || f.Tensors["w"].DType != F32 || f.Tensors["a"].F32[0] != 1.5 {
		t.Fatalf("dtypes %s, %s, %s, a[0] %v", f.Tensors["a"].DType, f.Tensors["b"].DType, f.Tensors["w"].DType, f.Tensors["a"].F32[0])
	}
	if x, shape, err := Get[float64](f, "a"); err != nil || !slices.Equal(x, []float64{1.5, -2, 3.25}) || !slices.Equal(shape, []int{3}) {
		t.Errorf("Get[float64] of F32: %v %v %v", x, shape, err)
	}
	if x, _, err := Get[float32](f, "b"); err != nil || x[0] != float32(0.1) {
		t.Errorf("Get[float32] of F64: %v %v", x, err)
	}
	if x, _, err := Get[weight](f, "w"); err != nil || !slices.Equal(x, []weight{4, 5}) {
		t.Errorf("Get[weight]: %v %v", x, err)
	}
	f.SetBF16("h", []int{1}, []float32{1.25})
	if x, _, err := Get[float64](f, "h"); err != nil || x[0] != 1.25 {
		t.Errorf("Get[float64] of BF16: %v %v", x, err)
	}
	f.SetI64("i", []int{1}, []int64{1})
	if _, _, err := Get[float32](f, "i"); err == nil {
		t.Error("Get of an I64 tensor: no error")
	}
	if _, _, err := Get[float64](f, "nosuch"); err == nil {
		t.Error("Get of a missing tensor: no error")
	}
}
