//go:build !amd64 || purego

package vec

// testPaths lists the implementations this build can run: only the
// portable one.
func testPaths() []testPath {
	return []testPath{{"generic", func() func() { return func() {} }}}
}
