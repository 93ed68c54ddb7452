package faults

// Exported to the external tests.
var (
	SwiGLU32          = swiglu32
	SigmoidLn2Rounded = sigmoidLn2Rounded
)
