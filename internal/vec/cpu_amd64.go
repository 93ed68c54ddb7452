//go:build !purego

package vec

import "golang.org/x/sys/cpu"

// CPU features of the assembly paths. Tests switch them off to run the
// AVX2 and the portable paths on machines that have more.
var (
	useAVX512 = cpu.X86.HasAVX512F
	useAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)
