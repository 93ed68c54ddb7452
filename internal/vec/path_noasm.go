//go:build !amd64 || purego

package vec

// Path names the kernels this process runs: "generic", the portable Go
// of this build (another architecture, or the purego build tag).
func Path() string { return "generic" }
