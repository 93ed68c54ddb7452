package vec

// NonFinite returns the index of the first NaN or infinity in x, or -1 when
// every element is finite:
//
//	for i, v := range x {
//		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
//			return i
//		}
//	}
//	return -1
//
// It is the one pass that loaders run over weights, indexes and caches
// before trusting them. v−v is 0 for every finite v and NaN for NaN and
// ±Inf, so one subtraction and one comparison test an element; blocks of
// eight are tested together (a NaN in any of them makes the sum NaN) and
// searched one by one only when the block fails.
func NonFinite[T Float](x []T) int {
	i := 0
	for ; i+8 <= len(x); i += 8 {
		y := x[i : i+8 : i+8]
		s := (y[0] - y[0]) + (y[1] - y[1]) + (y[2] - y[2]) + (y[3] - y[3]) +
			(y[4] - y[4]) + (y[5] - y[5]) + (y[6] - y[6]) + (y[7] - y[7])
		if s != 0 {
			break
		}
	}
	for ; i < len(x); i++ {
		if v := x[i]; v-v != 0 {
			return i
		}
	}
	return -1
}
