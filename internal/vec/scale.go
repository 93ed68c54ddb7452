package vec

// Scale32 multiplies x by alpha in place:
//
//	for i := range x {
//		x[i] *= alpha
//	}
func Scale32(alpha float32, x []float32) {
	scale32(alpha, x)
}

// Scale64 multiplies x by alpha in place:
//
//	for i := range x {
//		x[i] *= alpha
//	}
func Scale64(alpha float64, x []float64) {
	scale64(alpha, x)
}
