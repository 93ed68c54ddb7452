//go:build !purego

package vec

//go:noescape
func dots32AVX512(x, b []float32, ldb int, out []float32)

//go:noescape
func dots32AVX2(x, b []float32, ldb int, out []float32)

//go:noescape
func dots64AVX512(x, b []float64, ldb int, out []float64)

//go:noescape
func dots64AVX2(x, b []float64, ldb int, out []float64)

//go:noescape
func axpys32AVX512(alpha, b []float32, ldb int, y []float32)

//go:noescape
func axpys32AVX2(alpha, b []float32, ldb int, y []float32)

//go:noescape
func axpys64AVX512(alpha, b []float64, ldb int, y []float64)

//go:noescape
func axpys64AVX2(alpha, b []float64, ldb int, y []float64)

func dots32(x, b []float32, ldb int, out []float32) {
	switch {
	case useAVX512 && len(x)%16 == 0:
		dots32AVX512(x, b, ldb, out)
	case useAVX2 && len(x)%8 == 0:
		dots32AVX2(x, b, ldb, out)
	default:
		dotsGeneric(x, b, ldb, out)
	}
}

func dots64(x, b []float64, ldb int, out []float64) {
	switch {
	case useAVX512 && len(x)%8 == 0:
		dots64AVX512(x, b, ldb, out)
	case useAVX2 && len(x)%4 == 0:
		dots64AVX2(x, b, ldb, out)
	default:
		dotsGeneric(x, b, ldb, out)
	}
}

func axpys32(alpha, b []float32, ldb int, y []float32) {
	switch {
	case useAVX512:
		head := len(y) &^ 15
		axpys32AVX512(alpha, b, ldb, y[:head])
		axpysGeneric(alpha, b[head:], ldb, y[head:])
	case useAVX2:
		head := len(y) &^ 7
		axpys32AVX2(alpha, b, ldb, y[:head])
		axpysGeneric(alpha, b[head:], ldb, y[head:])
	default:
		axpysGeneric(alpha, b, ldb, y)
	}
}

func axpys64(alpha, b []float64, ldb int, y []float64) {
	switch {
	case useAVX512:
		head := len(y) &^ 7
		axpys64AVX512(alpha, b, ldb, y[:head])
		axpysGeneric(alpha, b[head:], ldb, y[head:])
	case useAVX2:
		head := len(y) &^ 3
		axpys64AVX2(alpha, b, ldb, y[:head])
		axpysGeneric(alpha, b[head:], ldb, y[head:])
	default:
		axpysGeneric(alpha, b, ldb, y)
	}
}
