//go:build !amd64 || purego

package vec

func scale32(alpha float32, x []float32) { scaleGeneric(alpha, x) }

func scale64(alpha float64, x []float64) { scaleGeneric(alpha, x) }
