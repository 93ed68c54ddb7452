package vec

// scaleGeneric is the portable Scale.
func scaleGeneric[T Float](alpha T, x []T) {
	for i := range x {
		x[i] *= alpha
	}
}
