package vec

// axpyGeneric is the portable Axpy.
func axpyGeneric[T Float](alpha T, x, y []T) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}
