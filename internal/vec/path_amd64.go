//go:build !purego

package vec

// Path names the kernels this process runs: "avx512" (AVX-512F), "avx2"
// (AVX2 with FMA) or "generic" (portable Go: a CPU without AVX2 and FMA,
// another architecture, or the purego build tag).
func Path() string {
	switch {
	case useAVX512:
		return "avx512"
	case useAVX2:
		return "avx2"
	}
	return "generic"
}
