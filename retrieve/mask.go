package retrieve

import "fmt"

// It panics if B > len(keys) or len(dst) != B·len(keys).
func DuplicateMask(dst []bool, keys []string, B int) {
	N := len(keys)
	if B > N || len(dst) != B*N {
		panic(fmt.Sprintf("retrieve: DuplicateMask: B = %d, %d keys, len(dst) = %d: want B <= N and len(dst) = B*N", B, N, len(dst)))
	}
	for i := range B {
		for j, k := range keys {
			dst[i*N+j] = j != i && k == keys[i]
		}
	}
}
