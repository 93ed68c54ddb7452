//go:build !amd64 || purego

package vec

func exp32(dst, x []float32) { exp32Generic(dst, x) }

func exp64(dst, x []float64) { exp64Generic(dst, x) }
