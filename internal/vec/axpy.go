package vec

// Axpy32 adds alpha times x to y:
//
//	for i, v := range x {
//		y[i] += alpha * v
//	}
//
// y must be at least as long as x.
func Axpy32(alpha float32, x, y []float32) {
	axpy32(alpha, x, y[:len(x)])
}

// Axpy64 adds alpha times x to y:
//
//	for i, v := range x {
//		y[i] += alpha * v
//	}
//
// y must be at least as long as x.
func Axpy64(alpha float64, x, y []float64) {
	axpy64(alpha, x, y[:len(x)])
}
