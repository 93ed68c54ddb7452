//go:build !amd64 || purego

package vec

func dots32(x, b []float32, ldb int, out []float32) { dotsGeneric(x, b, ldb, out) }

func dots64(x, b []float64, ldb int, out []float64) { dotsGeneric(x, b, ldb, out) }

func axpys32(alpha, b []float32, ldb int, y []float32) { axpysGeneric(alpha, b, ldb, y) }

func axpys64(alpha, b []float64, ldb int, y []float64) { axpysGeneric(alpha, b, ldb, y) }
