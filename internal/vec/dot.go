package vec

// Dot32 returns the dot product of x and y:
//
//	var sum float32
//	for i, v := range x {
//		sum += v * y[i]
//	}
//	return sum
//
// y must be at least as long as x.
func Dot32(x, y []float32) float32 {
	return dot32(x, y[:len(x)])
}

// Dot64 returns the dot product of x and y:
//
//	var sum float64
//	for i, v := range x {
//		sum += v * y[i]
//	}
//	return sum
//
// y must be at least as long as x.
func Dot64(x, y []float64) float64 {
	return dot64(x, y[:len(x)])
}
