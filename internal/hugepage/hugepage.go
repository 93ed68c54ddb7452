// Package hugepage asks the operating system to back large slices with
// transparent huge pages (2 MiB on x86-64 Linux) where it can. A stream over
// a long slice, such as decoding's pass over a KV cache of hundreds of
// megabytes, then walks one page-table entry per 2 MiB instead of one per
// 4 KiB, and the hardware's page walks stop competing with the stream's own
// memory traffic.
//
// It is a hint: where the kernel has transparent huge pages switched off
// (or only for madvise'd memory, which is what this package does), on other
// systems, or for slices shorter than a huge page, nothing changes, and no
// value read or written ever differs.
package hugepage

import "unsafe"

// Size is the huge page size the hint is made for.
const Size = 2 << 20

// Advise marks the whole huge pages inside x for transparent huge pages.
// Pages already touched are merged by the kernel later, if at all; pages
// touched after the call are backed by huge pages when the kernel has them
// free. It reports whether the hint was given (false when x spans no whole
// huge page or the system does not take it).
func Advise[T any](x []T) bool {
	if len(x) == 0 {
		return false
	}
	var z T
	base := unsafe.Pointer(unsafe.SliceData(x))
	p := uintptr(base)
	end := p + uintptr(len(x))*unsafe.Sizeof(z)
	lo := (p + Size - 1) &^ (Size - 1)
	hi := end &^ (Size - 1)
	if hi <= lo {
		return false
	}
	return advise(unsafe.Slice((*byte)(unsafe.Add(base, lo-p)), hi-lo))
}
