//go:build !purego

package vec

// testPaths lists the implementations this machine can run, fastest first.
// Each sets the feature switches for its path and returns a function that
// restores them.
func testPaths() []testPath {
	hw512, hw2 := useAVX512, useAVX2
	set := func(avx512, avx2 bool) func() func() {
		return func() func() {
			old512, old2 := useAVX512, useAVX2
			useAVX512, useAVX2 = avx512, avx2
			return func() { useAVX512, useAVX2 = old512, old2 }
		}
	}
	var ps []testPath
	if hw512 {
		ps = append(ps, testPath{"AVX512", set(true, hw2)})
	}
	if hw2 {
		ps = append(ps, testPath{"AVX2", set(false, true)})
	}
	return append(ps, testPath{"generic", set(false, false)})
}
