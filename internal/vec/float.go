package vec

// float is the element type of the kernels.
type float interface {
	~float32 | ~float64
}
