package hugepage

import "golang.org/x/sys/unix"

func advise(b []byte) bool { return unix.Madvise(b, unix.MADV_HUGEPAGE) == nil }
