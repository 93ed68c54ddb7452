//go:build !amd64 || purego

package vec

func axpy32(alpha float32, x, y []float32) { axpyGeneric(alpha, x, y) }

func axpy64(alpha float64, x, y []float64) { axpyGeneric(alpha, x, y) }
