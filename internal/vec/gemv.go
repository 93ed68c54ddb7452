package vec

import "fmt"

// The matrix–vector kernels behind the skinny products (see skinny.go),
// also called directly by decoding, which has a few query rows against a
// long stream of keys.

// Dots sets out[j] = Σ_p x[p]·b[j·ldb+p] for j < len(out): the dot products
// of x with len(out) rows of b (rows of len(x) elements, ldb apart), read
// once, in order. Each row's sum is computed the same way whatever the other
// rows are. It panics if b is too short.
func Dots[T Float](x, b []T, ldb int, out []T) { dots(x, b, ldb, out) }

// Axpys adds to y the first len(y) elements of len(alpha) rows of b (ldb
// apart), each weighted by its alpha: y[x] += Σ_p alpha[p]·b[p·ldb+x],
// summed in the order of p; b is read once, in order. It panics if b is
// too short.
func Axpys[T Float](alpha, b []T, ldb int, y []T) { axpys(alpha, b, ldb, y) }

func dots[T Float](x, b []T, ldb int, out []T) {
	k, n := len(x), len(out)
	if n == 0 {
		return
	}
	if k == 0 {
		clear(out)
		return
	}
	if ldb < k || len(b) < (n-1)*ldb+k {
		panic(fmt.Sprintf("vec: dots: %d rows of %d with ldb %d do not fit in %d elements", n, k, ldb, len(b)))
	}
	if is32[T]() {
		dots32(as32(x), as32(b), ldb, as32(out))
	} else {
		dots64(as64(x), as64(b), ldb, as64(out))
	}
}

func axpys[T Float](alpha, b []T, ldb int, y []T) {
	k, n := len(alpha), len(y)
	if k == 0 || n == 0 {
		return
	}
	if ldb < n || len(b) < (k-1)*ldb+n {
		panic(fmt.Sprintf("vec: axpys: %d rows of %d with ldb %d do not fit in %d elements", k, n, ldb, len(b)))
	}
	if is32[T]() {
		axpys32(as32(alpha), as32(b), ldb, as32(y))
	} else {
		axpys64(as64(alpha), as64(b), ldb, as64(y))
	}
}

func dotsGeneric[T Float](x, b []T, ldb int, out []T) {
	for j := range out {
		out[j] = dotGeneric(x, b[j*ldb:j*ldb+len(x)])
	}
}

func axpysGeneric[T Float](alpha, b []T, ldb int, y []T) {
	if len(y) == 0 {
		return
	}
	for p, a := range alpha {
		axpyGeneric(a, b[p*ldb:p*ldb+len(y)], y)
	}
}
