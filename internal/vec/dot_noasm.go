//go:build !amd64 || purego

package vec

func dot32(x, y []float32) float32 { return dotGeneric(x, y) }

func dot64(x, y []float64) float64 { return dotGeneric(x, y) }
